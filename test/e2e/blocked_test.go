package e2e

import (
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/route"
	"lifeboat.dev/lifeboat/test/testenv"
)

// podTrace is what polling a pod saw: when its deletion started (its
// deletionTimestamp less the grace period it got) and when it was gone.
type podTrace struct {
	mu        sync.Mutex
	deletedAt time.Time // zero: never seen terminating
	grace     int64
	goneAt    time.Time // zero: still there when polling stopped
}

// tracePod polls the pod every 100 ms until it is gone or until stop.
func tracePod(h *harness, ns, name string, stop time.Time) *podTrace {
	tr := &podTrace{}
	go func() {
		for time.Now().Before(stop) && h.Ctx.Err() == nil {
			p, err := kube.Client.CoreV1().Pods(ns).Get(h.Ctx, name, metav1.GetOptions{})
			tr.mu.Lock()
			switch {
			case apierrors.IsNotFound(err):
				tr.goneAt = time.Now()
				tr.mu.Unlock()
				return
			case err != nil:
			case p.DeletionTimestamp != nil && tr.deletedAt.IsZero() && p.DeletionGracePeriodSeconds != nil:
				tr.grace = *p.DeletionGracePeriodSeconds
				tr.deletedAt = p.DeletionTimestamp.Add(-time.Duration(tr.grace) * time.Second)
			}
			tr.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return tr
}

func (tr *podTrace) get() (deletedAt time.Time, grace int64, goneAt time.Time) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.deletedAt, tr.grace, tr.goneAt
}

// Issue 25 item 2: a pod a PodDisruptionBudget allowing 0 disruptions
// blocks gets its shutdown before a Spot interruption's deadline: deleted
// at (deadline - its grace period - --deadline-margin) with its grace
// period, gone before the deadline, reported (BlockedPodDeleted on the pod
// and the node naming the budget, the Drained Event,
// lifeboat_evictions_total{result="deleted-blocked"}). With
// --delete-blocked-pods-before-deadline=false it stays until the deadline
// and is cut off (the harm, and what lifeboat did before: on b4a2dcd the
// default case failed so, the pod never deleted and DeadlinePassed).
func TestBlockedPodGetsItsShutdown(t *testing.T) {
	const (
		grace    = 8 * time.Second
		shutdown = 6 * time.Second // the pod's preStop and SIGTERM handler
		margin   = 2 * time.Second
	)
	tests := []struct {
		name  string
		flags []string
		on    bool
	}{
		{name: "default: deleted in time for its shutdown", on: true},
		{name: "off: left until the deadline", flags: []string{"--delete-blocked-pods-before-deadline=false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{flags: append([]string{"--deadline-margin", margin.String()}, tt.flags...)})
			id := h.CreateGroup("blocked-"+testenv.UniqueName("g"), 1)[0]
			node := h.NodeName(id)
			ns := kube.Namespace(t)
			guarded, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Name: testenv.UniqueName("guarded"), Node: node,
				Labels: map[string]string{"app": "guarded"}, Grace: grace, ShutdownAfter: shutdown})
			if err != nil {
				t.Fatal(err)
			}
			if err := kube.GuardPod(h.Ctx, ns, "guarded"); err != nil {
				t.Fatal(err)
			}
			// The notice was sent 100 s ago: 20 s are left before AWS acts
			// (whole seconds: the event's time has no fraction).
			sent := time.Now().Add(-100 * time.Second).Truncate(time.Second)
			deadline := sent.Add(2 * time.Minute)
			tr := tracePod(h, ns, guarded.Name, deadline.Add(5*time.Second))
			h.PutEvent(route.SourceEC2, route.SpotInterruption, sent, map[string]string{"instance-id": id, "instance-action": "terminate"})
			end := "DeadlinePassed"
			if tt.on {
				end = "Drained"
			}
			h.Eventually(time.Until(deadline)+10*time.Second, "a "+end+" Event on the node", func() bool { return h.NodeEvents(node, end) >= 1 })
			if tt.on {
				// The drain saw the pod go; the poll sees it within 100 ms.
				h.Eventually(5*time.Second, "the pod seen gone", func() bool { _, _, gone := tr.get(); return !gone.IsZero() })
			}
			deletedAt, got, goneAt := tr.get()
			ev := firstEvent(t, h, metav1.NamespaceDefault, node, end)
			t.Logf("%s: %s", end, ev.Message)
			if !tt.on {
				if !deletedAt.IsZero() && deletedAt.Before(deadline) {
					t.Errorf("pod deleted %v before the deadline with the option off", deadline.Sub(deletedAt))
				}
				if !strings.Contains(ev.Message, ns+"/"+guarded.Name+": not-started") {
					t.Errorf("DeadlinePassed does not name the pod cut off, not started")
				}
				if n := h.Metric("lifeboat_evictions_total", map[string]string{"result": "cut-off"}); n != 1 {
					t.Errorf(`lifeboat_evictions_total{result="cut-off"} = %v, want 1`, n)
				}
				if e := firstEvent(t, h, ns, guarded.Name, "BlockedPodDeleted"); e != nil {
					t.Errorf("BlockedPodDeleted with the option off: %s", e.Message)
				}
				return
			}
			want := deadline.Add(-grace - margin)
			t.Logf("pod deleted %v before the deadline with grace %d s (want %v, %d s), gone %v before it",
				deadline.Sub(deletedAt), got, deadline.Sub(want), int64(grace/time.Second), deadline.Sub(goneAt))
			// Up to a second early (a grace period is whole seconds);
			// deletionTimestamp has whole seconds.
			if deletedAt.IsZero() || deletedAt.Sub(want).Abs() > 2*time.Second || got != int64(grace/time.Second) {
				t.Errorf("pod deleted at %v with grace %d s; want at %v (deadline - grace - margin) with %v", deletedAt, got, want, grace)
			}
			if goneAt.IsZero() || !goneAt.Before(deadline) {
				t.Errorf("pod gone at %v; want its shutdown over before the deadline %v", goneAt, deadline)
			}
			if !strings.Contains(ev.Message, "1 blocked pods deleted in time for their shutdown ("+ns+"/"+guarded.Name+")") {
				t.Errorf("Drained does not name the blocked pod deleted")
			}
			for _, e := range []*corev1.Event{firstEvent(t, h, ns, guarded.Name, "BlockedPodDeleted"), firstEvent(t, h, metav1.NamespaceDefault, node, "BlockedPodDeleted")} {
				if e == nil {
					t.Fatal("no BlockedPodDeleted Event on the pod and on the node")
				}
				if e.Type != corev1.EventTypeWarning || !strings.Contains(e.Message, "disruption budget guard") || !strings.Contains(e.Message, "grace period of 8 s") {
					t.Errorf("BlockedPodDeleted %s %q does not name the budget and the grace period", e.Type, e.Message)
				}
			}
			if n := h.Metric("lifeboat_evictions_total", map[string]string{"result": "deleted-blocked"}); n != 1 {
				t.Errorf(`lifeboat_evictions_total{result="deleted-blocked"} = %v, want 1`, n)
			}
			if n := h.Metric("lifeboat_evictions_total", map[string]string{"result": "cut-off"}); n != 0 {
				t.Errorf(`lifeboat_evictions_total{result="cut-off"} = %v, want 0`, n)
			}
		})
	}
}
