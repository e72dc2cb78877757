package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/nodes"
)

// startWithClock starts an IMDS-mode controller for node "self" on clk.
func startWithClock(t *testing.T, d nodeDrainer, clk *clocktesting.FakeClock, o Options) *Controller {
	t.Helper()
	return run(t, fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "self"}}), nodes.Options{OnlyNode: "self"}, Deps{Drainer: d, Clock: clk}, o)
}

// Issue 14 item 1: events due now and a scheduled change in the future
// arrive together (the DaemonSet restarts on an instance whose metadata lists
// a completed maintenance and a new active system-reboot). Acting on the due
// ones must not mark the future one done: when it comes due the node is
// cordoned and drained.
func TestFutureScheduledChangeKeptWhileDueEventsAreActedOn(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	const inst = "i-0123456789abcdef0"
	historyStart := now.Add(-48 * time.Hour)
	history := event.Event{ID: "history", Kind: event.ScheduledChangeCanceled, Source: event.SourceIMDS, InstanceID: inst,
		Action: "system-maintenance", Deadline: historyStart}
	rebootAt := now.Add(2 * time.Hour)
	reboot := event.Event{ID: "reboot", Kind: event.ScheduledChange, Source: event.SourceIMDS, InstanceID: inst,
		Action: "system-reboot", Deadline: rebootAt}
	due := event.Event{ID: "rebalance", Kind: event.RebalanceRecommendation, Source: event.SourceIMDS, InstanceID: inst}

	for _, tc := range []struct {
		name    string
		present []event.Event
	}{
		{"completed maintenance beside a new reboot", []event.Event{history, reboot}},
		{"rebalance recommendation beside a new reboot", []event.Event{due, reboot}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(now)
			d := &nodeRecorder{}
			c := startWithClock(t, d, clk, Options{Policy: imdsPolicy})
			c.SubmitNode("self", tc.present)
			waitFor(t, "the node goroutine to wait or finish", func() bool { return clk.HasWaiters() || c.idle() })
			if c.isDone(reboot.ID) {
				t.Fatalf("the reboot at %s was marked done before it was acted on", rebootAt)
			}
			if c.idle() {
				t.Fatal("the node's work ended with the reboot still ahead")
			}
			d.mu.Lock()
			if d.drains != 0 {
				t.Errorf("drains = %d before the reboot is due; want 0", d.drains)
			}
			d.mu.Unlock()
			clk.Step(2*time.Hour + time.Second)
			waitFor(t, "the drain for the reboot", func() bool { d.mu.Lock(); defer d.mu.Unlock(); return d.drains == 1 })
			waitFor(t, "the work to finish", c.idle)
			if !c.isDone(reboot.ID) {
				t.Error("the reboot is not recorded done after its drain")
			}
		})
	}
}
