package e2e

import (
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/route"
	"lifeboat.dev/lifeboat/test/testenv"
)

// --rebalance-cordon-expiry (scaled to 6 s): the cordon of a rebalance
// recommendation that no interruption followed expires, even across a
// lifeboat restart (kill -9 while the cordon stands); a node whose
// recommendation was followed by a Spot interruption stays cordoned.
func TestRebalanceCordonExpiry(t *testing.T) {
	const expiry = 6 * time.Second
	h := newHarness(t, harnessOptions{flags: []string{"--rebalance-cordon-expiry", expiry.String()}})
	ids := h.CreateGroup("rbx-"+testenv.UniqueName("g"), 2)
	quiet, followed := h.NodeName(ids[0]), h.NodeName(ids[1])
	for _, id := range ids {
		h.PutEvent(route.SourceEC2, route.RebalanceRecommendation, time.Now(), map[string]string{"instance-id": id})
	}
	cordoned := time.Now()
	for _, node := range []string{quiet, followed} {
		h.Eventually(10*time.Second, node+" cordoned for the recommendation", func() bool {
			n := h.Node(node)
			return n.Spec.Unschedulable && testenv.HasTaint(n, "lifeboat.io/rebalance-recommendation") &&
				n.Annotations["lifeboat.io/rebalance-cordon-expires"] != ""
		})
	}
	h.PutEvent(route.SourceEC2, route.SpotInterruption, time.Now(), map[string]string{"instance-id": ids[1], "instance-action": "terminate"})
	h.Eventually(10*time.Second, "the Spot interruption's cordon", func() bool {
		return testenv.HasTaint(h.Node(followed), "lifeboat.io/spot-interruption")
	})
	// A restart while the cordon stands: the appointment is on the node.
	h.Lifeboat.Kill()
	if err := h.Lifeboat.Restart(h.Ctx); err != nil {
		t.Fatal(err)
	}
	h.Eventually(expiry+15*time.Second, "the quiet node uncordoned at the expiry", func() bool {
		n := h.Node(quiet)
		return !n.Spec.Unschedulable && !testenv.HasTaint(n, "lifeboat.io/rebalance-recommendation")
	})
	if took := time.Since(cordoned); took < expiry-time.Second {
		t.Errorf("uncordoned %v after the cordon; the expiry is %v", took, expiry)
	}
	h.Eventually(10*time.Second, "a RebalanceCordonExpired Event", func() bool { return h.NodeEvents(quiet, "RebalanceCordonExpired") >= 1 })
	time.Sleep(2 * time.Second)
	if n := h.Node(followed); !n.Spec.Unschedulable || !testenv.HasTaint(n, "lifeboat.io/spot-interruption") {
		t.Errorf("the node a Spot interruption followed was uncordoned: unschedulable %v, taints %v", n.Spec.Unschedulable, n.Spec.Taints)
	}
	if h.NodeEvents(followed, "RebalanceCordonExpired") != 0 {
		t.Error("RebalanceCordonExpired on the node a Spot interruption followed")
	}
}
