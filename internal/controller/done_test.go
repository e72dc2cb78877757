package controller

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/message"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/plan"
)

// A message redelivered after a restart whose events the node records as
// done (lifeboat died between finishing the node and deleting the message)
// is deleted without acting again; a new event for the node is acted on.
func TestEventsDoneOnNodeAreNotRepeated(t *testing.T) {
	res, err := message.Parse(spot(instA))
	if err != nil || len(res.Events) != 1 {
		t.Fatalf("Parse: %v, %+v", err, res)
	}
	done, _ := json.Marshal([]string{"spot-interruption-older", res.Events[0].ID})
	n := node("node-a", instA)
	n.Annotations = map[string]string{AnnotationDoneEvents: string(done), AnnotationDrained: "2026-11-21T12:01:00Z"}
	client := fake.NewClientset(n, node("node-b", instB))
	index := nodes.New(client, nodes.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	d := &fakeDrainer{cordons: map[string]int{}, drains: map[string]int{}, release: make(chan struct{})}
	close(d.release)
	a := &fakeAcker{}
	c := New(Deps{Nodes: index, Drainer: d, Acker: a, Metrics: metrics.New(), Clock: clock.RealClock{},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))},
		Options{Policy: plan.Policy{DrainKinds: []event.Kind{event.SpotInterruption}}, UnknownInstance: config.UnknownLeave})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); index.Run(ctx) }()
	go func() { defer wg.Done(); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	select {
	case <-c.Started():
	case <-time.After(10 * time.Second):
		t.Fatal("controller did not start")
	}

	c.HandleMessage(ctx, msg("again", spot(instA)))
	waitFor(t, "the redelivered message acked", func() bool { acked, _ := a.snapshot(); return len(acked) == 1 })
	if got := d.count(d.cordons, "node-a"); got != 0 {
		t.Errorf("cordons = %d for an event already done, want 0", got)
	}
	c.HandleMessage(ctx, msg("new", spot(instB)))
	waitFor(t, "the new event drained and acked", func() bool { acked, _ := a.snapshot(); return len(acked) == 2 && d.count(d.drains, "node-b") == 1 })
}

func TestDoneEventsBounded(t *testing.T) {
	client := fake.NewClientset(node("node-a", instA))
	c := New(Deps{Nodes: nodes.New(client, nodes.Options{})}, Options{})
	var evs []event.Event
	for i := range 2 * maxDoneEvents {
		evs = append(evs, event.Event{ID: "spot-interruption-" + string(rune('a'+i%26)) + string(rune('a'+i/26))})
	}
	var ids []string
	if err := json.Unmarshal([]byte(c.doneEvents("node-a", evs)), &ids); err != nil {
		t.Fatal(err)
	}
	if len(ids) != maxDoneEvents || ids[len(ids)-1] != evs[len(evs)-1].ID {
		t.Errorf("done events = %d ending %q, want the last %d ending %q", len(ids), ids[len(ids)-1], maxDoneEvents, evs[len(evs)-1].ID)
	}
}
