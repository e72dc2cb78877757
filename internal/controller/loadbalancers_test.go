package controller

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/lbdrain"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/plan"
)

// fakeLoadBalancers holds Wait until release is closed, then answers
// outcome; it records the calls in order.
type fakeLoadBalancers struct {
	mu      sync.Mutex
	calls   []string
	until   time.Time
	held    []lbdrain.Registration // handed to waiting, if any
	outcome lbdrain.Outcome
	release chan struct{}
}

func (f *fakeLoadBalancers) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *fakeLoadBalancers) Note(_ context.Context, node string) { f.record("note " + node) }
func (f *fakeLoadBalancers) Forget(node string)                  { f.record("forget " + node) }

func (f *fakeLoadBalancers) Wait(ctx context.Context, node, instanceID string, until time.Time, waiting func(lbdrain.Decision)) (lbdrain.Outcome, error) {
	f.record("wait " + node + " " + instanceID)
	f.mu.Lock()
	f.until = until
	f.mu.Unlock()
	if len(f.held) > 0 {
		waiting(lbdrain.Decision{Verdict: lbdrain.Hold, Held: f.held})
	}
	select {
	case <-ctx.Done():
		return lbdrain.Outcome{}, ctx.Err()
	case <-f.release:
	}
	return f.outcome, nil
}

func (f *fakeLoadBalancers) snapshot() ([]string, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...), f.until
}

// Issue 26 item 4: with --wait-for-load-balancers a terminate action is
// completed with CONTINUE only once the wait for the target groups has
// ended, bounded by the action's deadline less the margin; each ending is
// reported and counted.
func TestTerminateWaitsForLoadBalancers(t *testing.T) {
	held := []lbdrain.Registration{{TargetGroup: "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/web/0123456789abcdef",
		Type: lbdrain.Instance, ID: instA, Port: 30080, State: "draining"}}
	for _, tc := range []struct {
		name    string
		held    []lbdrain.Registration
		outcome lbdrain.Outcome
		want    []string // Events, in order, after the drain's
	}{
		{"drained", held, lbdrain.Outcome{Result: lbdrain.Drained, Waited: 4 * time.Second},
			[]string{"Normal WaitingForLoadBalancers waiting up to", "Normal LoadBalancersDrained no target group holds the node after 4s"}},
		{"cut short", held, lbdrain.Outcome{Result: lbdrain.NotDrained, Waited: time.Minute, Held: held},
			[]string{"Normal WaitingForLoadBalancers", "Warning LoadBalancersNotDrained target groups [web] still hold 1 targets after 1m0s (web " + instA + ":30080 draining): completing anyway"}},
		{"unknown", nil, lbdrain.Outcome{Result: lbdrain.Unknown, Err: errors.New("AccessDenied")},
			[]string{"Warning LoadBalancersUnknown cannot read target groups (AccessDenied;"}},
		{"not held", nil, lbdrain.Outcome{Result: lbdrain.NotHeld}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lc := &fakeLifecycle{owned: true, hook: lifecycle.Hook{HeartbeatTimeout: 30 * time.Second, GlobalTimeout: time.Hour}}
			rec := record.NewFakeRecorder(100)
			d := &fakeDrainer{cordons: map[string]int{}, drains: map[string]int{}, release: make(chan struct{})}
			lb := &fakeLoadBalancers{held: tc.held, outcome: tc.outcome, release: make(chan struct{})}
			m := metrics.New()
			c := run(t, fake.NewClientset(readyNode("node-a", instA)), nodes.Options{}, Deps{Drainer: d, ASG: lc, Recorder: rec, LoadBalancers: lb, Metrics: m},
				Options{Policy: plan.Policy{DrainKinds: []event.Kind{event.LifecycleTerminate}, CompleteLifecycle: true},
					LifecycleTimeoutResult: "ABANDON", RetryBackoff: 20 * time.Millisecond, DeadlineMargin: 5 * time.Minute})
			c.Submit("node-a", instA, time.Time{}, events(t, lifecycleBody(event.TransitionTerminating, instA, "tok-lb")), 1)
			// The drain ends once the hook (its deadline) is known.
			waitFor(t, "heartbeats", func() bool { return lc.snapshot().beating > 0 })
			close(d.release)
			waitFor(t, "the load balancer wait", func() bool { calls, _ := lb.snapshot(); return slices.Contains(calls, "wait node-a "+instA) })
			time.Sleep(100 * time.Millisecond)
			if got := lc.snapshot().completed; len(got) != 0 {
				t.Fatalf("completed %v while the load balancer wait was on", got)
			}
			close(lb.release)
			waitFor(t, "the terminate action completed", func() bool { return len(lc.snapshot().completed) == 1 })
			if got := lc.snapshot().completed; got[0] != "CONTINUE" {
				t.Errorf("completed with %v, want CONTINUE", got)
			}
			calls, until := lb.snapshot()
			// Noted at the cordon (again if the plan is made again), waited
			// for once, forgotten.
			if i := slices.Index(calls, "wait node-a "+instA); i < 1 || calls[0] != "note node-a" || calls[len(calls)-1] != "forget node-a" || i != len(calls)-2 {
				t.Errorf("calls %q, want note node-a (once or more), then wait, then forget", calls)
			}
			// The action's deadline is about an hour (the hook's global
			// timeout) after its start, the fixtures' time: the wait ends the
			// 5 min margin before it.
			if lo, hi := time.Date(2026, 11, 25, 12, 54, 30, 0, time.UTC), time.Date(2026, 11, 25, 12, 55, 30, 0, time.UTC); until.Before(lo) || until.After(hi) {
				t.Errorf("waited until %v, want the action's deadline less the margin, about %v", until, lo.Add(30*time.Second))
			}
			var seen []string
			for len(rec.Events) > 0 {
				if e := <-rec.Events; strings.Contains(e, "LoadBalancer") {
					seen = append(seen, e)
				}
			}
			if len(seen) != len(tc.want) {
				t.Fatalf("load balancer Events %q, want %q", seen, tc.want)
			}
			for i := range seen {
				if !strings.HasPrefix(seen[i], tc.want[i]) {
					t.Errorf("Event %d %q, want it to start with %q", i, seen[i], tc.want[i])
				}
			}
			if n := testutil.ToFloat64(m.LoadBalancerWaits.WithLabelValues(string(tc.outcome.Result))); n != 1 {
				t.Errorf("lifeboat_load_balancer_waits_total{result=%q} = %v, want 1", tc.outcome.Result, n)
			}
		})
	}
}
