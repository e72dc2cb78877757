package controller

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/kube/clientset"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/plan"
)

// Pods of the cut-short tests, on node-a: quick leaves as soon as it is
// evicted, slow starts terminating and stays until the test deletes it,
// guarded's evictions are all refused by a PodDisruptionBudget (429).
const (
	podQuick   = "quick"
	podSlow    = "slow"
	podGuarded = "guarded"
)

func cutPod(name string) *corev1.Pod {
	grace := int64(30)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: "node-a", TerminationGracePeriodSeconds: &grace}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// cutWorld is a controller with a real Drainer over a fake clientset whose
// evictions behave as above, a recorder and a notifier.
type cutWorld struct {
	c      *Controller
	client *fake.Clientset
	m      *metrics.Metrics
	rec    *record.FakeRecorder
	notes  *recordingNotifier

	mu     sync.Mutex
	events []string // every Event recorded so far

	// blockList, when set, makes the next pod list wait for release and
	// fail as a canceled request does (listing is closed when it begins).
	blockList        atomic.Bool
	listing, release chan struct{}
}

func startCutWorld(t *testing.T, pods ...string) *cutWorld {
	t.Helper()
	objs := []runtime.Object{node("node-a", instA)}
	for _, p := range pods {
		objs = append(objs, cutPod(p))
	}
	w := &cutWorld{client: fake.NewClientset(objs...), m: metrics.New(), rec: record.NewFakeRecorder(1000), notes: &recordingNotifier{}}
	podsGVR := corev1.SchemeGroupVersion.WithResource("pods")
	w.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		obj, err := w.client.Tracker().Get(podsGVR, ev.Namespace, ev.Name)
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*corev1.Pod).DeepCopy()
		switch {
		case pod.Name == podGuarded:
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
		case pod.Name == podQuick:
			return true, nil, w.client.Tracker().Delete(podsGVR, ev.Namespace, ev.Name)
		case pod.DeletionTimestamp == nil:
			at := metav1.NewTime(testClock.Now().Add(30 * time.Second))
			pod.DeletionTimestamp = &at
			return true, nil, w.client.Tracker().Update(podsGVR, pod, ev.Namespace)
		}
		return true, nil, nil // already terminating: accepted, nothing changes
	})
	w.listing, w.release = make(chan struct{}), make(chan struct{})
	w.client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if !w.blockList.CompareAndSwap(true, false) {
			return false, nil, nil
		}
		close(w.listing)
		<-w.release
		return true, nil, fmt.Errorf("listing pods: %w", context.Canceled)
	})
	d := drain.New(clientset.New(w.client), testClock, slog.New(slog.NewTextHandler(io.Discard, nil)), drain.Options{Backoff: 50 * time.Millisecond})
	w.c = run(t, w.client, nodes.Options{}, Deps{Drainer: d, Recorder: w.rec, Metrics: w.m, Notifier: w.notes},
		Options{Policy: plan.Policy{DrainKinds: []event.Kind{event.SpotInterruption}}, RetryBackoff: 20 * time.Millisecond})
	return w
}

// event waits for an Event starting with prefix and returns it ("" after
// 10 s: the test has failed).
func (w *cutWorld) event(t *testing.T, prefix string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		for len(w.rec.Events) > 0 {
			w.events = append(w.events, <-w.rec.Events)
		}
		i := slices.IndexFunc(w.events, func(e string) bool { return strings.HasPrefix(e, prefix) })
		var got string
		if i >= 0 {
			got = w.events[i]
		}
		w.mu.Unlock()
		if got != "" {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Errorf("no Event starting %q within 10 s; Events: %q", prefix, w.events)
	return ""
}

// podWatches is how many watches on node-a's pods were made. The fake
// clientset records an action and makes its watch under one lock: a watch
// counted here sees every change made through the clientset after.
func (w *cutWorld) podWatches() int {
	n := 0
	for _, a := range w.client.Actions() {
		if wa, ok := a.(k8stesting.WatchAction); ok && a.GetResource().Resource == "pods" &&
			wa.GetWatchRestrictions().Fields.String() == "spec.nodeName=node-a" {
			n++
		}
	}
	return n
}

func (w *cutWorld) pod(t *testing.T, name string) (*corev1.Pod, bool) {
	t.Helper()
	p, err := w.client.CoreV1().Pods("ns").Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return p, true
}

func spotEvent(id string) event.Event {
	return event.Event{ID: id, Kind: event.SpotInterruption, Source: event.SourceSQS, InstanceID: instA, Action: "terminate",
		Time: testClock.Now(), Deadline: testClock.Now().Add(2 * time.Minute)}
}

func evictions(t *testing.T, m *metrics.Metrics, result string) float64 {
	t.Helper()
	return counterValue(t, m.Evictions.WithLabelValues(result))
}

// Issue 23 item 4: a drain cut short by a new event for the node (here a
// second notice) was canceled without a word: what it had evicted was
// neither counted nor reported, and the drain under the next plan reported
// only its own evictions. Now the cut short is reported (what it did, what
// is still on the node and why) and the final Drained counts the whole
// piece of work.
func TestDrainCutShortIsReportedAndAccumulated(t *testing.T) {
	w := startCutWorld(t, podQuick, podSlow)
	w.c.Submit("node-a", instA, time.Time{}, []event.Event{spotEvent("spot-1")}, 1)
	waitFor(t, "quick gone and slow terminating", func() bool {
		_, quick := w.pod(t, podQuick)
		slow, ok := w.pod(t, podSlow)
		return !quick && ok && slow.DeletionTimestamp != nil
	})
	time.Sleep(100 * time.Millisecond) // the drain waits for slow
	w.c.Submit("node-a", instA, time.Time{}, []event.Event{spotEvent("spot-2")}, 2)
	cut := w.event(t, "Normal DrainInterrupted")
	t.Log(cut)
	for _, want := range []string{"1 pods evicted and gone (ns/quick)", "ns/slow: mid-shutdown"} {
		if !strings.Contains(cut, want) {
			t.Errorf("DrainInterrupted Event %q does not say %q", cut, want)
		}
	}
	// The fake clientset's watches begin at the moment they are made,
	// whatever resourceVersion they ask for: slow deleted between the next
	// drain's list of the node's pods and its watch would never be seen
	// gone (a real API server replays it from the list's resourceVersion),
	// and the test timed out once in a few hundred runs. Slow is deleted
	// once that watch, the second on the node's pods, is made.
	waitFor(t, "the next drain watching the node's pods", func() bool { return w.podWatches() >= 2 })
	if err := w.client.CoreV1().Pods("ns").Delete(context.Background(), podSlow, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	drained := w.event(t, "Normal Drained")
	t.Log(drained)
	if !strings.Contains(drained, "2 pods evicted") || !strings.Contains(drained, "ns/quick") || !strings.Contains(drained, "ns/slow") {
		t.Errorf("Drained Event %q; want the whole piece of work: 2 pods evicted, ns/quick and ns/slow", drained)
	}
	for range 2 { // tickets 1 and 2
		if s := settled(t, w.c); s.Outcome != Done {
			t.Errorf("settled %+v", s)
		}
	}
	if n := evictions(t, w.m, "evicted"); n != 2 {
		t.Errorf(`lifeboat_evictions_total{result="evicted"} = %v, want 2 (each pod once over the piece of work)`, n)
	}
	if n := evictions(t, w.m, "cut-off"); n != 0 {
		t.Errorf(`lifeboat_evictions_total{result="cut-off"} = %v, want 0: the drain went on and every pod left`, n)
	}
}

// Issue 23 item 4: a Node deleted mid-drain (its instance died) was
// reported with a Normal NodeGone ("nothing left to drain") after the
// drain had waited on. Now the drain stops when the Node goes, and a
// Warning names the pods still on it, which died with the instance (cut
// off), and why; they are counted as cut off, not evicted, and the
// finished notification names them too.
func TestNodeDeletedMidDrainNamesThePodsThatDied(t *testing.T) {
	w := startCutWorld(t, podSlow, podGuarded)
	w.c.Submit("node-a", instA, time.Time{}, []event.Event{spotEvent("spot-1")}, 1)
	waitFor(t, "slow terminating", func() bool {
		slow, ok := w.pod(t, podSlow)
		return ok && slow.DeletionTimestamp != nil
	})
	time.Sleep(200 * time.Millisecond) // guarded's evictions are refused meanwhile
	if err := w.client.CoreV1().Nodes().Delete(context.Background(), "node-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone := w.event(t, "Warning NodeGone")
	t.Log(gone)
	for _, want := range []string{"ns/slow: mid-shutdown", "ns/guarded: not-started", "disruption budget"} {
		if !strings.Contains(gone, want) {
			t.Errorf("NodeGone Event %q does not say %q", gone, want)
		}
	}
	if s := settled(t, w.c); s.Outcome != Done {
		t.Errorf("settled %+v", s)
	}
	if n := evictions(t, w.m, "cut-off"); n != 2 {
		t.Errorf(`lifeboat_evictions_total{result="cut-off"} = %v, want 2`, n)
	}
	if n := evictions(t, w.m, "evicted"); n != 0 {
		t.Errorf(`lifeboat_evictions_total{result="evicted"} = %v, want 0: no pod left the node before it died`, n)
	}
	waitFor(t, "the finished notification", func() bool { return slices.Contains(w.notes.phases(), "finished") })
	w.notes.mu.Lock()
	defer w.notes.mu.Unlock()
	for _, n := range w.notes.sent {
		if n.Phase == "finished" && (len(n.CutOff) != 2 || !strings.Contains(strings.Join(n.CutOff, ";"), "ns/guarded")) {
			t.Errorf("finished notification names %q as cut off; want ns/slow and ns/guarded", n.CutOff)
		}
	}
}

// A drain cut short, then a drain the Node's deletion cancels before it
// listed the node's pods: the pod the first left mid-shutdown died with
// the instance, and the Warning NodeGone says so. In CI test/realnode
// TestInstanceDiesMidShutdown got a Normal NodeGone calling that pod
// "evicted and gone", counted evicted: the second drain's empty result
// had replaced the first's cut-off pods.
func TestNodeDeletedBeforeTheNextDrainListedKeepsThePodsCutOff(t *testing.T) {
	w := startCutWorld(t, podSlow)
	w.c.Submit("node-a", instA, time.Time{}, []event.Event{spotEvent("spot-1")}, 1)
	waitFor(t, "slow terminating", func() bool {
		slow, ok := w.pod(t, podSlow)
		return ok && slow.DeletionTimestamp != nil
	})
	time.Sleep(100 * time.Millisecond) // the drain waits for slow
	w.blockList.Store(true)
	w.c.Submit("node-a", instA, time.Time{}, []event.Event{spotEvent("spot-2")}, 2)
	if cut := w.event(t, "Normal DrainInterrupted"); !strings.Contains(cut, "ns/slow: mid-shutdown") {
		t.Errorf("DrainInterrupted Event %q does not name ns/slow mid-shutdown", cut)
	}
	select {
	case <-w.listing: // the next drain is listing the node's pods
	case <-time.After(10 * time.Second):
		t.Fatal("the drain of the next plan never listed the node's pods")
	}
	// Through the tracker: the fake clientset holds its lock while the
	// list waits.
	if err := w.client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("nodes"), "", "node-a"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Node gone from the informer", func() bool { _, ok := w.c.Nodes.ByName("node-a"); return !ok })
	time.Sleep(200 * time.Millisecond) // its deletion cancels the drain
	close(w.release)
	gone := w.event(t, "Warning NodeGone")
	t.Log(gone)
	if !strings.Contains(gone, "ns/slow: mid-shutdown") {
		t.Errorf("NodeGone Event %q does not name ns/slow mid-shutdown", gone)
	}
	if n := evictions(t, w.m, "cut-off"); n != 1 {
		t.Errorf(`lifeboat_evictions_total{result="cut-off"} = %v, want 1`, n)
	}
	if n := evictions(t, w.m, "evicted"); n != 0 {
		t.Errorf(`lifeboat_evictions_total{result="evicted"} = %v, want 0`, n)
	}
}
