package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notify"
	"lifeboat.dev/lifeboat/internal/plan"
)

// brokenDrainer fails every cordon.
type brokenDrainer struct{ fakeDrainer }

func (b *brokenDrainer) Cordon(context.Context, string, []string, string, map[string]string) (bool, error) {
	return false, errors.New("the API server said no")
}

type recordingNotifier struct {
	mu   sync.Mutex
	sent []notify.Notification
}

func (r *recordingNotifier) Notify(n notify.Notification) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, n)
}

func (r *recordingNotifier) phases() []notify.Phase {
	r.mu.Lock()
	defer r.mu.Unlock()
	var p []notify.Phase
	for _, n := range r.sent {
		p = append(p, n.Phase)
	}
	return p
}

// A node whose work keeps failing is retried with a growing backoff, and
// people are told once, when it has failed for a while.
func TestFailingWorkNotifiesOnce(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	n := &recordingNotifier{}
	d := &brokenDrainer{fakeDrainer{cordons: map[string]int{}, drains: map[string]int{}, release: make(chan struct{})}}
	c := run(t, fake.NewClientset(node("node-a", instA)), nodes.Options{}, Deps{Drainer: d, Notifier: n, Clock: clk},
		Options{Policy: plan.Policy{DrainKinds: []event.Kind{event.SpotInterruption}}, RetryBackoff: time.Second})
	c.Submit("node-a", instA, time.Time{}, events(t, spot(instA)), 1)
	// Backoffs 1, 2, 4, 8, 16, 32 s: the sixth failure is past 30 s.
	for i := 0; i < 8; i++ {
		waitFor(t, "the node goroutine to wait", clk.HasWaiters)
		if i < 5 && len(n.phases()) != 0 {
			t.Fatalf("notified %v after %d failures; want nothing before the backoff reaches 30 s", n.phases(), i)
		}
		clk.Step(time.Minute)
	}
	waitFor(t, "a failed notification", func() bool { return len(n.phases()) > 0 })
	if got := n.phases(); len(got) != 1 || got[0] != notify.PhaseFailed {
		t.Errorf("notifications = %v, want exactly one %q", got, notify.PhaseFailed)
	}
}

// refusingDrainer ends every drain with a pod whose eviction was refused
// for good (an admission webhook's 403), as package drain reports it.
type refusingDrainer struct{ fakeDrainer }

func (r *refusingDrainer) Drain(context.Context, string, drain.Deadline, func(drain.Progress)) (drain.Result, error) {
	return drain.Result{Remaining: 1, NotEvicted: []drain.PodProblem{{Namespace: "ns", Name: "guarded", Reason: "admission webhook denied the request"}}},
		fmt.Errorf("draining node node-a: %w", drain.ErrNotEvicted)
}

// Issue 14 item 5: a node whose pods cannot leave is reported (on the node
// and on the pod) and its work ends; it is not retried forever.
func TestRefusedEvictionIsReportedNotRetried(t *testing.T) {
	rec := record.NewFakeRecorder(100)
	d := &refusingDrainer{fakeDrainer{cordons: map[string]int{}, drains: map[string]int{}, release: make(chan struct{})}}
	c := run(t, fake.NewClientset(node("node-a", instA)), nodes.Options{}, Deps{Drainer: d, Recorder: rec},
		Options{Policy: plan.Policy{DrainKinds: []event.Kind{event.SpotInterruption}}, RetryBackoff: time.Second})
	c.Submit("node-a", instA, time.Time{}, events(t, spot(instA)), 1)
	if s := settled(t, c); s != (Settlement{Ticket: 1, Outcome: Done}) {
		t.Errorf("settled %+v, want ticket 1 done", s)
	}
	var got []string
	for len(rec.Events) > 0 {
		got = append(got, <-rec.Events)
	}
	for _, want := range []string{"Warning DrainIncomplete", "Warning EvictionRefused ns/guarded"} {
		if !slices.ContainsFunc(got, func(e string) bool { return strings.HasPrefix(e, want) }) {
			t.Errorf("no Event starting %q in %q", want, got)
		}
	}
}
