package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"lifeboat.dev/lifeboat/internal/notify"
	"lifeboat.dev/lifeboat/internal/route"
	"lifeboat.dev/lifeboat/test/testenv"
)

// Issue 23 item 5: when AWS's deadline passes with pods on the node, one
// Event, one log line and the webhook say which pods were cut off and
// why: here one a PodDisruptionBudget never let go (its shutdown never
// started) and one stuck terminating, its object held by a finalizer after
// its grace period. Both are counted lifeboat_evictions_total{result=
// "cut-off"}, not "evicted"; the pod that left is named as evicted. (On
// 69db33e DeadlinePassed said "2 of 3 pods still there" without naming
// them, cut-off was 0 and evicted 2: the held pod counted as evicted.)
// The budget's pod is left until the deadline:
// --delete-blocked-pods-before-deadline=false.
func TestDeadlinePassedNamesThePodsCutOff(t *testing.T) {
	hook := newNotificationSink(t)
	h := newHarness(t, harnessOptions{flags: []string{"--deadline-margin", "2s", "--webhook-template", "json", "--delete-blocked-pods-before-deadline=false"},
		env: []string{"LIFEBOAT_WEBHOOK_URL=" + hook.url}})
	id := h.CreateGroup("cutoff-"+testenv.UniqueName("g"), 1)[0]
	node := h.NodeName(id)
	ns := kube.Namespace(t)
	free, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Name: testenv.UniqueName("free"), Node: node, ShutdownAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	guarded, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Name: testenv.UniqueName("guarded"), Node: node, Labels: map[string]string{"app": "guarded"}, ShutdownAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	held, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Name: testenv.UniqueName("held"), Node: node, Grace: 5 * time.Second, ShutdownAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const finalizer = "lifeboat.test/held"
	if _, err := kube.Client.CoreV1().Pods(ns).Patch(h.Ctx, held.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":["`+finalizer+`"]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := kube.Client.CoreV1().Pods(ns).Patch(ctx, held.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("removing the finalizer: %v", err)
		}
	})
	if err := kube.GuardPod(h.Ctx, ns, "guarded"); err != nil {
		t.Fatal(err)
	}
	// The notice was sent 100 s ago: 20 s are left before AWS acts.
	sent := time.Now().Add(-100 * time.Second)
	deadline := sent.Add(2 * time.Minute)
	h.PutEvent(route.SourceEC2, route.SpotInterruption, sent, map[string]string{"instance-id": id, "instance-action": "terminate"})
	h.Eventually(time.Until(deadline)+10*time.Second, "a DeadlinePassed Event on the node", func() bool { return h.NodeEvents(node, "DeadlinePassed") >= 1 })
	ev := firstEvent(t, h, metav1.NamespaceDefault, node, "DeadlinePassed")
	t.Logf("DeadlinePassed: %s", ev.Message)
	for _, want := range []string{
		ns + "/" + guarded.Name + ": not-started (eviction refused (429): Cannot evict pod as it would violate the pod's disruption budget",
		ns + "/" + held.Name + ": finalizer (its grace period is over; finalizers: " + finalizer + ")",
		"1 pods evicted and gone before it (" + ns + "/" + free.Name + ")",
	} {
		if !strings.Contains(ev.Message, want) {
			t.Errorf("DeadlinePassed does not say %q", want)
		}
	}
	if n := h.Metric("lifeboat_evictions_total", map[string]string{"result": "cut-off"}); n != 2 {
		t.Errorf(`lifeboat_evictions_total{result="cut-off"} = %v, want 2`, n)
	}
	if n := h.Metric("lifeboat_evictions_total", map[string]string{"result": "evicted"}); n != 1 {
		t.Errorf(`lifeboat_evictions_total{result="evicted"} = %v, want 1 (the held pod was cut off, not evicted)`, n)
	}
	h.Eventually(10*time.Second, "a finished notification naming the pods cut off", func() bool {
		hook.mu.Lock()
		defer hook.mu.Unlock()
		return slices.ContainsFunc(hook.sent, func(n notify.Notification) bool {
			cut := strings.Join(n.CutOff, "\n")
			return n.Phase == notify.PhaseFinished && n.Node == node && strings.Contains(cut, ns+"/"+guarded.Name+": not-started") &&
				strings.Contains(cut, ns+"/"+held.Name+": finalizer")
		})
	})
}
