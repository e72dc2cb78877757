package outofservice

import (
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/clocktest"
)

func TestGhost(t *testing.T) {
	at := clocktest.Epoch
	tests := []struct {
		name  string
		state string
		now   time.Time
		after time.Duration
		want  bool
	}{
		{"terminated, bound reached", StateTerminated, at.Add(10 * time.Minute), 10 * time.Minute, true},
		{"terminated, bound not reached", StateTerminated, at.Add(10*time.Minute - time.Second), 10 * time.Minute, false},
		{"stopped: a stopped instance keeps its Node", StateStopped, at.Add(time.Hour), 10 * time.Minute, false},
		{"shutting-down", StateShuttingDown, at.Add(time.Hour), 10 * time.Minute, false},
		{"nothing known", "", at.Add(time.Hour), 10 * time.Minute, false},
		{"disabled", StateTerminated, at.Add(time.Hour), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Ghost(tt.state, at, tt.now, tt.after); got != tt.want {
				t.Errorf("Ghost = %v, want %v", got, tt.want)
			}
		})
	}
}

// A node still there --ghost-node-after after EC2 said its instance
// terminated is reported once (Warning Event) and counted while it stays;
// by default nothing is deleted and EC2 is never asked (no
// ec2:DescribeInstances needed).
func TestGhostReportedOnceAndCounted(t *testing.T) {
	x := newWorldWith(t, Options{GhostAfter: 10 * time.Minute})
	x.drained("n1", "i-0000000000000001a")
	x.drained("n2", "i-0000000000000002b")
	x.sync()
	x.stateChange("i-0000000000000001a", StateTerminated, x.clock.Now())
	x.step(10*time.Minute - time.Second)
	if got := x.ghosts(); got != 0 || x.events(ReasonGhost) != 0 {
		t.Fatalf("a ghost (gauge %v) before the bound", got)
	}
	x.step(time.Second)
	for range 10 {
		x.step(time.Second)
	}
	if got := x.ghosts(); got != 1 {
		t.Errorf("gauge %v, want 1", got)
	}
	if got := x.events(ReasonGhost); got != 1 {
		t.Errorf("%d %s Events, want 1", got, ReasonGhost)
	}
	if x.nodes.writes() != 0 || len(x.nodes.deletions()) != 0 || x.ec2.calls() != 0 {
		t.Errorf("%d writes, deletions %v, %d DescribeInstances calls; want none by default", x.nodes.writes(), x.nodes.deletions(), x.ec2.calls())
	}
	x.nodes.remove("n1") // the cloud controller caught up
	x.step(time.Second)
	if got := x.ghosts(); got != 0 {
		t.Errorf("gauge %v once the node is gone, want 0", got)
	}
}

// With --delete-ghost-nodes a ghost is deleted once, with its UID; a Ready
// one is reported, never deleted (a kubelet still reports under its name).
func TestGhostDeletedUnlessReady(t *testing.T) {
	x := newWorldWith(t, Options{GhostAfter: time.Minute, DeleteGhosts: true})
	x.drained("dead", "i-0000000000000001a")
	x.drained("ready", "i-0000000000000002b")
	x.nodes.get("ready").Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	x.sync()
	for _, id := range []string{"i-0000000000000001a", "i-0000000000000002b"} {
		x.stateChange(id, StateTerminated, x.clock.Now())
	}
	for range 70 {
		x.step(time.Second) // the deleted node stays in the cache meanwhile
	}
	if got := x.nodes.deletions(); !slices.Equal(got, []string{"dead/uid-dead"}) {
		t.Fatalf("deletions %v, want [dead/uid-dead]", got)
	}
	if got := x.events(ReasonGhostDeleted); got != 1 {
		t.Errorf("%d %s Events, want 1", got, ReasonGhostDeleted)
	}
}

// ghosts reads the lifeboat_ghost_nodes gauge.
func (x *world) ghosts() float64 {
	x.t.Helper()
	var m dto.Metric
	if err := x.w.Metrics.GhostNodes.Write(&m); err != nil {
		x.t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// Without a notification, --delete-ghost-nodes learns the termination
// from DescribeInstances; without --out-of-service-taint no taint is
// added, whatever the state.
func TestGhostFromDescribeWithoutTaint(t *testing.T) {
	x := newWorldWith(t, Options{GhostAfter: time.Minute, DeleteGhosts: true})
	x.drained("n1", "i-0000000000000001a")
	x.drained("n2", "i-0000000000000002b")
	x.ec2.set("i-0000000000000001a", StateTerminated)
	x.ec2.set("i-0000000000000002b", StateStopped)
	x.sync()
	for range 100 {
		x.step(time.Second)
	}
	if got := x.nodes.deletions(); !slices.Equal(got, []string{"n1/uid-n1"}) {
		t.Fatalf("deletions %v, want [n1/uid-n1] (terminated seen by DescribeInstances at 30 s, a ghost a minute later)", got)
	}
	if x.nodes.writes() != 0 {
		t.Errorf("%d taint writes without --out-of-service-taint", x.nodes.writes())
	}
}
