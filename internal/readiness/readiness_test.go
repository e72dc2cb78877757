package readiness

import (
	"errors"
	"strings"
	"testing"
)

type gauge struct{ v float64 }

func (g *gauge) Set(v float64) { g.v = v }

func TestReady(t *testing.T) {
	lost := errors.New("connection refused")
	tests := []struct {
		name     string
		set      func(s *State)
		ready    bool
		contains string
	}{
		{"nothing yet", func(*State) {}, false, "starting"},
		{"started, no node watch", func(s *State) { s.Started() }, false, "node watch not synced"},
		{"node watch not synced", func(s *State) { s.Started(); s.WatchNodes(func() bool { return false }) }, false, "node watch not synced yet"},
		{"node watch never listed", func(s *State) {
			s.Started()
			s.WatchNodes(func() bool { return false })
			s.NodeWatch(lost)
		}, false, "node watch not synced: connection refused"},
		{"standby", func(s *State) { s.Started(); s.WatchNodes(func() bool { return true }) }, true, "ok: standby"},
		{"node watch failing", func(s *State) {
			s.Started()
			s.WatchNodes(func() bool { return true })
			s.NodeWatch(lost)
		}, false, "node watch failing: connection refused"},
		{"node watch recovered", func(s *State) {
			s.Started()
			s.WatchNodes(func() bool { return true })
			s.NodeWatch(lost)
			s.NodeWatch(nil)
		}, true, "ok: standby"},
		{"leader before its source answered", func(s *State) {
			s.Started()
			s.WatchNodes(func() bool { return true })
			s.SetLeader(true)
		}, false, "event source"},
		{"leader", func(s *State) {
			s.Started()
			s.WatchNodes(func() bool { return true })
			s.SetLeader(true)
			s.SetSource(true)
		}, true, "ok: leader"},
		{"acting, source failing", func(s *State) {
			s.Started()
			s.WatchNodes(func() bool { return true })
			s.Acting()
			s.SetSource(true)
			s.SetSource(false)
		}, false, "event source"},
		{"leader, node watch failing", func(s *State) {
			s.Started()
			s.WatchNodes(func() bool { return true })
			s.SetLeader(true)
			s.SetSource(true)
			s.NodeWatch(lost)
		}, false, "node watch failing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s State
			tt.set(&s)
			ok, why := s.Ready()
			if ok != tt.ready || !strings.Contains(why, tt.contains) {
				t.Errorf("Ready() = %v, %q; want %v and a reason containing %q", ok, why, tt.ready, tt.contains)
			}
		})
	}
}

// SetLeader keeps lifeboat_leader in step; Acting (IMDS mode) leaves it.
func TestLeaderGauge(t *testing.T) {
	g := &gauge{v: -1}
	s := State{Gauge: g}
	s.Acting()
	if g.v != -1 {
		t.Errorf("Acting set the gauge to %v", g.v)
	}
	s.SetLeader(true)
	if g.v != 1 {
		t.Errorf("after SetLeader(true) the gauge is %v, want 1", g.v)
	}
	s.SetLeader(false)
	if g.v != 0 {
		t.Errorf("after SetLeader(false) the gauge is %v, want 0", g.v)
	}
}
