package e2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"lifeboat.dev/lifeboat/internal/route"
	"lifeboat.dev/lifeboat/test/testenv"
)

// A Spot interruption on a node whose pod a PodDisruptionBudget allowing
// no disruption guards: the drain forecast says so, and the
// DrainForecastMiss Warning (on the node and on the pod, naming it) is
// there before AWS's deadline, which the drain then passes with the pod
// still there. The pod the budget does not cover is not named. The
// budget's pod is left until the deadline:
// --delete-blocked-pods-before-deadline=false.
func TestDrainForecastMiss(t *testing.T) {
	h := newHarness(t, harnessOptions{flags: []string{"--deadline-margin", "2s", "--delete-blocked-pods-before-deadline=false"}})
	id := h.CreateGroup("forecast-"+testenv.UniqueName("g"), 1)[0]
	node := h.NodeName(id)
	ns := kube.Namespace(t)
	// A grace period that fits the 20 s left: the forecast must not name it.
	free, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: node, Grace: 5 * time.Second, ShutdownAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	guarded, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: node, Labels: map[string]string{"app": "guarded"}, ShutdownAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := kube.GuardPod(h.Ctx, ns, "guarded"); err != nil {
		t.Fatal(err)
	}
	// The notice was sent 100 s ago: 20 s are left before AWS acts.
	sent := time.Now().Add(-100 * time.Second)
	deadline := sent.Add(2 * time.Minute)
	h.PutEvent(route.SourceEC2, route.SpotInterruption, sent, map[string]string{"instance-id": id, "instance-action": "terminate"})

	var nodeEv, podEv *corev1.Event
	h.Eventually(time.Until(deadline), "DrainForecastMiss on the node and the pod", func() bool {
		if nodeEv == nil {
			nodeEv = firstEvent(t, h, metav1.NamespaceDefault, node, "DrainForecastMiss")
		}
		if podEv == nil {
			podEv = firstEvent(t, h, ns, guarded.Name, "DrainForecastMiss")
		}
		return nodeEv != nil && podEv != nil
	})
	seen := time.Now()
	left := deadline.Sub(seen)
	t.Logf("forecast warnings seen %v before the deadline\nnode: %s\npod:  %s", left.Round(time.Millisecond), nodeEv.Message, podEv.Message)
	if left <= 0 {
		t.Fatalf("the forecast warnings arrived %v after the deadline", -left)
	}
	for _, e := range []*corev1.Event{nodeEv, podEv} {
		if e.Type != corev1.EventTypeWarning {
			t.Errorf("%s event of type %s, want Warning", e.InvolvedObject.Kind, e.Type)
		}
		// Event timestamps have whole seconds: recorded no later than the
		// second before the deadline.
		if at := e.FirstTimestamp.Time; !at.Before(deadline.Truncate(time.Second)) {
			t.Errorf("%s event recorded at %s, not before the deadline %s", e.InvolvedObject.Kind, at.UTC().Format(time.RFC3339), deadline.UTC().Format(time.RFC3339Nano))
		}
	}
	if !strings.Contains(nodeEv.Message, ns+"/"+guarded.Name+" (PDBBlocks") || !strings.Contains(nodeEv.Message, "guard") {
		t.Errorf("the node's warning does not name the blocked pod and its budget: %s", nodeEv.Message)
	}
	if strings.Contains(nodeEv.Message, free.Name) {
		t.Errorf("the node's warning names %s, which no budget covers: %s", free.Name, nodeEv.Message)
	}
	if podEv.InvolvedObject.UID != guarded.UID {
		t.Errorf("the pod's warning is about UID %s, want %s", podEv.InvolvedObject.UID, guarded.UID)
	}
	// The forecast was right: the pod is still there at the deadline.
	h.Eventually(time.Until(deadline)+10*time.Second, "a DeadlinePassed event on the node", func() bool { return h.NodeEvents(node, "DeadlinePassed") >= 1 })
	if !h.podExists(ns, guarded.Name) {
		t.Error("pod guarded by a PDB was removed (no force-delete configured)")
	}
	if h.podExists(ns, free.Name) {
		t.Error("the pod no budget covers was not drained")
	}
	// Reported once per node's work, however often the forecast was refreshed.
	if n := h.NodeEvents(node, "DrainForecastMiss"); n != 1 {
		t.Errorf("%d DrainForecastMiss events on the node, want 1", n)
	}
}

// firstEvent returns the Event with reason about the named object in ns,
// or nil.
func firstEvent(t *testing.T, h *harness, ns, name, reason string) *corev1.Event {
	t.Helper()
	list, err := kube.Client.CoreV1().Events(ns).List(h.Ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": name, "reason": reason}.String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) == 0 {
		return nil
	}
	return &list.Items[0]
}
