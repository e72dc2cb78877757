package imds

import (
	"testing"
	"time"

	"lifeboat.dev/lifeboat/test/testenv"
)

// aws-node-termination-handler's ENABLE_SPOT_INTERRUPTION_DRAINING=false,
// set as an NTH user's DaemonSet sets it: a Spot notice cordons and taints
// the node but does not drain it (it drained before: issue 17).
func TestNTHSpotDrainingOff(t *testing.T) {
	w := newWorld(t, worldOptions{imds: testenv.IMDSOptions{Scenario: testenv.IMDSSpot, SpotAction: "terminate", After: time.Second},
		env: []string{"ENABLE_SPOT_INTERRUPTION_DRAINING=false"}})
	pod := w.pod(time.Second)
	w.eventually(20*time.Second, "the node cordoned and tainted", func() bool {
		n := w.nodeNow()
		_, ok := taintValue(n, taintSpot)
		return n.Spec.Unschedulable && ok
	})
	w.holds(3*time.Second, "the pod running", func() bool { return w.podExists(pod) })
	if got := w.kubeRequests()["POST pods/eviction"]; got != 0 {
		t.Errorf("evictions posted = %v, want 0", got)
	}
	if got := w.metric("lifeboat_events_received_total", "kind", "spot-interruption"); got != 1 {
		t.Errorf("spot events = %v, want 1", got)
	}
	if got := w.nodeEvents("Drained"); got != 0 {
		t.Errorf("Drained events = %d, want 0", got)
	}
}
