// Package readiness decides what lifeboat's /readyz answers, from what
// lifeboat already knows: whether it has started, whether its node watch
// has synced and its last list or watch request answered, whether this
// replica leads, and whether its event source answered its last request.
//
// A probe asks no one. In IMDS mode every node's pod is probed every few
// seconds: a probe that asked the API server (as it did before issue 22)
// cost about 1,000 requests a second at 5,000 nodes, for nothing the node
// watch does not already tell.
package readiness

import (
	"fmt"
	"sync"
)

// Gauge is the lifeboat_leader metric, kept in step with the leader flag.
type Gauge interface{ Set(float64) }

// State is what /readyz reports. The zero value is not ready ("starting");
// it is safe for concurrent use.
type State struct {
	// Gauge, if set, follows SetLeader.
	Gauge Gauge

	mu       sync.Mutex
	started  bool
	leader   bool
	source   bool
	synced   func() bool // nil: no node watch yet
	watchErr error       // the last node list or watch request's error
}

// Started says that lifeboat has started its parts.
func (s *State) Started() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = true
}

// SetLeader says whether this replica leads (queue mode), and sets Gauge.
func (s *State) SetLeader(b bool) {
	s.setLeader(b)
	if s.Gauge != nil {
		v := 0.0
		if b {
			v = 1
		}
		s.Gauge.Set(v)
	}
}

// Acting says that this process acts without an election (IMDS mode:
// every pod works). Unlike SetLeader it leaves Gauge alone.
func (s *State) Acting() { s.setLeader(true) }

func (s *State) setLeader(b bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leader = b
}

// SetSource says whether the event source answered its last request.
func (s *State) SetSource(ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.source = ok
}

// WatchNodes names the node watch readiness follows: synced reports
// whether its cache has been filled (nodes.Index.Synced).
func (s *State) WatchNodes(synced func() bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.synced = synced
}

// NodeWatch is told the outcome of every node list and watch request
// (nodes.Options.OnListWatch): nil when the API server answered.
func (s *State) NodeWatch(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchErr = err
}

// Ready returns whether lifeboat is ready and a short explanation.
func (s *State) Ready() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !s.started:
		return false, "starting"
	case s.synced == nil || !s.synced():
		if s.watchErr != nil {
			return false, fmt.Sprintf("node watch not synced: %v", s.watchErr)
		}
		return false, "node watch not synced yet"
	case s.watchErr != nil:
		return false, fmt.Sprintf("node watch failing: %v", s.watchErr)
	case !s.leader:
		return true, "ok: standby"
	case !s.source:
		return false, "leader, but the event source did not answer its last request"
	}
	return true, "ok: leader"
}
