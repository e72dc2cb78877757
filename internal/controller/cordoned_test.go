package controller

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/kube/clientset"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/plan"
)

// heldDrainer cordons and annotates through a real Drainer (over a fake
// clientset), and its drains wait until release is closed.
type heldDrainer struct {
	*drain.Drainer
	release chan struct{}
	started chan struct{} // gets a value when a drain starts
}

func (h *heldDrainer) Drain(ctx context.Context, _ string, _ drain.Deadline, _ func(drain.Progress)) (drain.Result, error) {
	h.started <- struct{}{}
	select {
	case <-h.release:
		return drain.Result{}, nil
	case <-ctx.Done():
		return drain.Result{}, ctx.Err()
	}
}

// Issue 23 item 6: a new event for a node mid-drain (here a rebalance
// recommendation during a Spot drain) plans the same work again; its
// cordon write changes the node (a second taint, the events annotation),
// and every such write was reported as a new Cordoned Event. It is
// reported once per piece of work; what a later write added is logged.
func TestCordonedReportedOncePerWork(t *testing.T) {
	client := fake.NewClientset(node("node-a", instA))
	h := &heldDrainer{Drainer: drain.New(clientset.New(client), testClock, slog.New(slog.NewTextHandler(io.Discard, nil)), drain.Options{}),
		release: make(chan struct{}), started: make(chan struct{}, 4)}
	rec := record.NewFakeRecorder(100)
	c := run(t, client, nodes.Options{}, Deps{Drainer: h, Recorder: rec},
		Options{Policy: plan.Policy{DrainKinds: []event.Kind{event.SpotInterruption}}, RetryBackoff: 100 * time.Millisecond})
	spot := event.Event{ID: "spot-1", Kind: event.SpotInterruption, Source: event.SourceSQS, InstanceID: instA,
		Time: testClock.Now(), Deadline: testClock.Now().Add(2 * time.Minute)}
	c.Submit("node-a", instA, time.Time{}, []event.Event{spot}, 1)
	<-h.started
	c.Submit("node-a", instA, time.Time{}, rebalanceEvent(instA), 2)
	<-h.started // the drain restarted after the second cordon write
	if n := trackedNode(t, client); !hasTaint(n, rebalanceTaint) {
		t.Fatalf("taints %v: the second plan's cordon did not add the recommendation's taint", n.Spec.Taints)
	}
	close(h.release)
	settled(t, c)
	settled(t, c)
	cordoned := 0
	for done := false; !done; {
		select {
		case e := <-rec.Events:
			if strings.HasPrefix(e, "Normal Cordoned ") {
				cordoned++
			}
		default:
			done = true
		}
	}
	if cordoned != 1 {
		t.Errorf("Cordoned Events = %d, want 1 for one piece of work", cordoned)
	}
}
