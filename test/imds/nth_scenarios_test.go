package imds

import (
	"testing"
	"time"

	imdssrc "lifeboat.dev/lifeboat/internal/source/imds"
	"lifeboat.dev/lifeboat/test/testenv"
)

// NTH's IMDS-mode dry-run scenarios (aws-node-termination-handler's
// spot-interruption-dry-run-test, rebalance-recommendation-dry-run-test and
// maintenance-event-dry-run-test), configured as an NTH user would: the
// DaemonSet with DRY_RUN=true. The notice is received and logged; the node
// is not cordoned, tainted or annotated, and no pod is evicted.
func TestNTHDryRunIMDS(t *testing.T) {
	for _, tc := range []struct {
		nth  string
		imds func() testenv.IMDSOptions
	}{
		{"spot-interruption-dry-run-test", func() testenv.IMDSOptions {
			return testenv.IMDSOptions{Scenario: testenv.IMDSSpot, After: time.Second}
		}},
		{"rebalance-recommendation-dry-run-test", func() testenv.IMDSOptions {
			return testenv.IMDSOptions{Scenario: testenv.IMDSRebalance, After: time.Second}
		}},
		{"maintenance-event-dry-run-test", func() testenv.IMDSOptions {
			notBefore := inLead()
			return testenv.IMDSOptions{Scenario: testenv.IMDSEvents, EventCode: imdssrc.CodeSystemReboot, EventState: imdssrc.StateActive,
				EventID: "instance-event-0cccccccccccccccc", EventNotBefore: notBefore, EventNotAfter: notBefore.Add(2 * time.Hour)}
		}},
	} {
		t.Run(tc.nth, func(t *testing.T) {
			w := newWorld(t, worldOptions{imds: tc.imds(), env: []string{"DRY_RUN=true", "ENABLE_REBALANCE_DRAINING=true"}})
			pod := w.pod(500 * time.Millisecond)
			w.eventually(20*time.Second, "the notice received and logged", func() bool {
				return w.lb.CountLogs(`"msg":"InterruptionReceived"`) >= 1
			})
			untouched := func() bool {
				n := w.nodeNow()
				return !n.Spec.Unschedulable && len(lifeboatTaints(n)) == 0 && n.Annotations["lifeboat.io/events"] == "" && w.podExists(pod)
			}
			w.holds(3*time.Second, "the node untouched and the pod running", untouched)
			if got := w.kubeRequests()["POST pods/eviction"]; got != 0 {
				t.Errorf("evictions posted = %v, want 0", got)
			}
		})
	}
}

// NTH's IMDS-mode scenarios whose outcome an NTH variable decides:
// cordon-only-test (CORDON_ONLY=true: a Spot notice cordons and taints, no
// eviction) and rebalance-recommendation-drain-test
// (ENABLE_REBALANCE_DRAINING=true: a rebalance recommendation drains).
func TestNTHCordonOnlyAndRebalanceDrainIMDS(t *testing.T) {
	for _, tc := range []struct {
		nth     string
		env     string
		imds    testenv.IMDSOptions
		taint   string
		evicted bool
	}{
		{"cordon-only-test", "CORDON_ONLY=true", testenv.IMDSOptions{Scenario: testenv.IMDSSpot, After: time.Second}, taintSpot, false},
		{"rebalance-recommendation-drain-test", "ENABLE_REBALANCE_DRAINING=true", testenv.IMDSOptions{Scenario: testenv.IMDSRebalance, After: time.Second}, taintRebalance, true},
	} {
		t.Run(tc.nth, func(t *testing.T) {
			w := newWorld(t, worldOptions{imds: tc.imds, env: []string{tc.env}})
			pod := w.pod(500 * time.Millisecond)
			w.eventually(20*time.Second, "the node cordoned and tainted", func() bool {
				n := w.nodeNow()
				_, ok := taintValue(n, tc.taint)
				return n.Spec.Unschedulable && ok
			})
			if tc.evicted {
				w.eventually(20*time.Second, "the pod evicted", func() bool { return !w.podExists(pod) })
				w.eventually(10*time.Second, "the Drained event", func() bool { return w.nodeEvents("Drained") == 1 })
				return
			}
			w.holds(3*time.Second, "the pod running", func() bool { return w.podExists(pod) })
			if got := w.kubeRequests()["POST pods/eviction"]; got != 0 {
				t.Errorf("evictions posted = %v, want 0", got)
			}
		})
	}
}
