package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"

	"lifeboat.dev/lifeboat/internal/notify"
	"lifeboat.dev/lifeboat/internal/route"
	"lifeboat.dev/lifeboat/test/testenv"
)

// An NTH user's node actions, set with NTH's own environment variables,
// take effect on the API server: the pod grace period replaces a pod's own,
// the node grace period ends a blocked drain long before AWS's deadline,
// the taint effect and the load balancer label. The out-of-service taint
// is not added after the drain while the instance still runs (it comes
// once EC2 says the instance has shut down:
// TestOutOfServiceOnlyOnConfirmedShutdown).
func TestNTHNodeActions(t *testing.T) {
	hook := newNotificationSink(t)
	h := newHarness(t, harnessOptions{flags: []string{"--webhook-template", "json"}, env: []string{
		"LIFEBOAT_WEBHOOK_URL=" + hook.url,
		"POD_TERMINATION_GRACE_PERIOD=3",
		"NODE_TERMINATION_GRACE_PERIOD=10",
		"TAINT_NODE=true",
		"TAINT_EFFECT=PreferNoSchedule",
		"EXCLUDE_FROM_LOAD_BALANCERS=true",
		"ENABLE_OUT_OF_SERVICE_TAINT=true",
	}})
	ids := h.CreateGroup("nth-"+testenv.UniqueName("g"), 2)
	free, blocked := h.NodeName(ids[0]), h.NodeName(ids[1])
	ns := kube.Namespace(t)
	// Its own grace (300 s) and shutdown (60 s) are long: only the 3 s
	// POD_TERMINATION_GRACE_PERIOD gets it off the node within the test.
	slow, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: free, Grace: 300 * time.Second, ShutdownAfter: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	guarded, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: blocked, Labels: map[string]string{"app": "nth-guarded"}, ShutdownAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	one := intstr.FromInt32(1)
	if _, err := kube.CreatePDB(h.Ctx, testenv.PDBSpec{Namespace: ns, Name: "guard", Selector: map[string]string{"app": "nth-guarded"}, MinAvailable: &one}); err != nil {
		t.Fatal(err)
	}
	put := time.Now()
	for _, id := range ids {
		// Sent now: AWS's deadline is two minutes away.
		h.PutEvent(route.SourceEC2, route.SpotInterruption, put, map[string]string{"instance-id": id, "instance-action": "terminate"})
	}
	for _, node := range []string{free, blocked} {
		h.Eventually(10*time.Second, node+" cordoned, tainted PreferNoSchedule and excluded from load balancers", func() bool {
			n := h.Node(node)
			return n.Spec.Unschedulable && taintEffect(n, "lifeboat.io/spot-interruption") == corev1.TaintEffectPreferNoSchedule &&
				n.Labels["node.kubernetes.io/exclude-from-external-load-balancers"] == "lifeboat"
		})
	}
	h.Eventually(15*time.Second, "the 300 s-grace pod gone within its 3 s POD_TERMINATION_GRACE_PERIOD", func() bool { return !h.podExists(ns, slow.Name) })
	if took := time.Since(put); took > 12*time.Second {
		t.Errorf("pod gone %v after the notice; with a 3 s grace period it takes a few seconds", took)
	}
	h.Eventually(10*time.Second, "the drained node's record", func() bool { return h.Node(free).Annotations["lifeboat.io/drained"] != "" })
	if testenv.HasTaint(h.Node(free), outOfServiceTaint) {
		t.Error("out-of-service taint on a drained node whose instance still runs")
	}
	// The Drained Event names the evicted pod.
	h.Eventually(10*time.Second, "a Drained Event naming the evicted pod", func() bool {
		list, err := kube.Client.CoreV1().Events(metav1.NamespaceDefault).List(h.Ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.name": free, "reason": "Drained"}.String()})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if strings.Contains(e.Message, ns+"/"+slow.Name) {
				return true
			}
		}
		return false
	})
	// So does the finished webhook notification.
	h.Eventually(10*time.Second, "a finished notification naming the evicted pod", func() bool {
		return hook.finishedWith(free, ns+"/"+slow.Name)
	})
	// The PDB blocks the other drain: NODE_TERMINATION_GRACE_PERIOD (10 s)
	// ends it, not AWS's deadline two minutes away.
	h.Eventually(25*time.Second, "DeadlinePassed on the blocked node at the node grace period", func() bool { return h.NodeEvents(blocked, "DeadlinePassed") >= 1 })
	if took := time.Since(put); took > 30*time.Second || took < 9*time.Second {
		t.Errorf("blocked drain ended %v after the notice, want about NODE_TERMINATION_GRACE_PERIOD (10 s)", took)
	}
	if !h.podExists(ns, guarded.Name) {
		t.Error("pod guarded by a PDB was removed (no force-delete configured)")
	}
	if n := h.Node(blocked); testenv.HasTaint(n, outOfServiceTaint) {
		t.Error("out-of-service taint on a node whose drain did not finish")
	}
}

func taintEffect(n *corev1.Node, key string) corev1.TaintEffect {
	if n == nil {
		return ""
	}
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return t.Effect
		}
	}
	return ""
}

// notificationSink receives lifeboat's webhook notifications (json
// template: the notification itself).
type notificationSink struct {
	url  string
	mu   sync.Mutex
	sent []notify.Notification
}

func newNotificationSink(t *testing.T) *notificationSink {
	s := &notificationSink{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n notify.Notification
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.sent = append(s.sent, n)
		s.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// finishedWith reports whether a finished notification of node names pod.
func (s *notificationSink) finishedWith(node, pod string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.sent {
		if n.Phase == notify.PhaseFinished && n.Node == node && slices.Contains(n.Pods, pod) {
			return true
		}
	}
	return false
}
