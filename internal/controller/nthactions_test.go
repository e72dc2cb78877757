package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notify"
	"lifeboat.dev/lifeboat/internal/plan"
)

// --complete-lifecycle-action-delay: the terminate action is completed that
// long after the drain, under heartbeats; without it, at once.
func TestCompleteLifecycleActionDelay(t *testing.T) {
	const delay = 400 * time.Millisecond
	for _, tc := range []struct {
		name    string
		delay   time.Duration
		atLeast time.Duration
		atMost  time.Duration
	}{
		{"no delay", 0, 0, delay / 2},
		{"delayed", delay, delay, 10 * delay},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lc := &fakeLifecycle{owned: true, hook: lifecycle.Hook{HeartbeatTimeout: 30 * time.Second, GlobalTimeout: 48 * time.Hour}}
			rec := record.NewFakeRecorder(100)
			c, _, _ := startLifecycleWith(t, lc, rec, false, func(o *Options) { o.CompleteLifecycleDelay = tc.delay }, readyNode("node-a", instA))
			start := time.Now()
			c.Submit("node-a", instA, time.Time{}, events(t, lifecycleBody(event.TransitionTerminating, instA, "tok-delay")), 1)
			waitFor(t, "the completion", func() bool { return len(lc.snapshot().completed) > 0 })
			took := time.Since(start)
			if took < tc.atLeast || took > tc.atMost {
				t.Errorf("completed %v after the submit, want %v..%v", took, tc.atLeast, tc.atMost)
			}
			s := lc.snapshot()
			// (Without a delay the completion may come before the heartbeat
			// loop's first call: only the delay must run under heartbeats.)
			if s.completed[0] != "CONTINUE" || (tc.delay > 0 && !s.beatRunningAtComplete[0]) {
				t.Errorf("completed %v, heartbeats running %v; want CONTINUE, under heartbeats after a delay", s.completed, s.beatRunningAtComplete)
			}
		})
	}
}

// The delay never passes AWS's deadline (less the margin).
func TestCompleteLifecycleActionDelayCappedByDeadline(t *testing.T) {
	lc := &fakeLifecycle{owned: true, hook: lifecycle.Hook{HeartbeatTimeout: 30 * time.Second, GlobalTimeout: 48 * time.Hour}}
	c, _, _ := startLifecycleWith(t, lc, nil, false, func(o *Options) { o.CompleteLifecycleDelay = time.Hour; o.DeadlineMargin = 100 * time.Millisecond })
	w := &nodeWork{name: "node-a", reported: map[string]bool{}}
	p := plan.Plan{Deadline: testClock.Now().Add(400 * time.Millisecond), Lifecycle: []event.LifecycleAction{{GroupName: "g", HookName: "h", Token: "t"}}}
	start := time.Now()
	if err := c.delayCompletion(t.Context(), w, p); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 250*time.Millisecond || took > 2*time.Second {
		t.Errorf("waited %v; want the 300 ms left before the deadline less the margin, not the hour", took)
	}
}

// Issue 23 item 2: the drain of a terminate action ends --deadline-margin
// before the action's own timeout (its start plus the hook's global
// timeout), so that the completion after it reaches Auto Scaling in time.
func TestTerminateDrainEndsAMarginBeforeTheActionTimesOut(t *testing.T) {
	lc := &fakeLifecycle{owned: true, hook: lifecycle.Hook{HeartbeatTimeout: 30 * time.Second, GlobalTimeout: time.Hour}}
	c, _, _ := startLifecycleWith(t, lc, nil, true, func(o *Options) { o.DeadlineMargin = 5 * time.Second }, readyNode("node-a", instA))
	d := c.Drainer.(*fakeDrainer)
	c.Submit("node-a", instA, time.Time{}, events(t, lifecycleBody(event.TransitionTerminating, instA, "tok-margin")), 1)
	waitFor(t, "a drain planned against the hook's timeout", func() bool { return !d.lastDeadline().IsZero() })
	actionStart := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC) // the message's time
	if got, want := d.lastDeadline(), actionStart.Add(time.Hour-5*time.Second); !got.Equal(want) {
		t.Errorf("drain deadline %v, want %v (the action's start + the 1 h global timeout - the 5 s margin)", got, want)
	}
}

// --heartbeat-until: heartbeats stop that long after the action started
// (its event's time, so a restart does not extend them), and the action's
// deadline moves to one heartbeat timeout after the last heartbeat.
func TestHeartbeatUntil(t *testing.T) {
	lc := &fakeLifecycle{owned: true, hook: lifecycle.Hook{HeartbeatTimeout: 5 * time.Minute, GlobalTimeout: 48 * time.Hour}}
	c, _, _ := startLifecycleWith(t, lc, nil, true, func(o *Options) { o.HeartbeatUntil = 10 * time.Minute }, readyNode("node-a", instA))
	evs := events(t, lifecycleBody(event.TransitionTerminating, instA, "tok-until"))
	c.Submit("node-a", instA, time.Time{}, evs, 1)
	waitFor(t, "heartbeats", func() bool { return lc.snapshot().started > 0 })
	actionStart := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC) // the message's time
	if got, want := lc.snapshot().untils[0], actionStart.Add(10*time.Minute); !got.Equal(want) {
		t.Errorf("heartbeats until %v, want %v (the action's start + 10m)", got, want)
	}
	tests := []struct {
		name   string
		until  time.Time
		lastOK time.Time
		want   time.Time
	}{
		// Heartbeats every minute, heartbeat timeout 5 minutes.
		{"no cap: the global timeout", time.Time{}, actionStart, actionStart.Add(48 * time.Hour)},
		{"capped: the last heartbeat (up to a minute before the cap) + heartbeat timeout", actionStart.Add(10 * time.Minute), actionStart, actionStart.Add(14 * time.Minute)},
		{"the last heartbeat is known", actionStart.Add(10 * time.Minute), actionStart.Add(9*time.Minute + 30*time.Second), actionStart.Add(14*time.Minute + 30*time.Second)},
		{"cap past the global timeout", actionStart.Add(48 * time.Hour), actionStart, actionStart.Add(48 * time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &beat{hook: lc.hook, known: true, lastOK: tt.lastOK, until: tt.until, interval: lifecycle.NewInterval(time.Minute)}
			if got, ok := b.deadline(actionStart); !ok || !got.Equal(tt.want) {
				t.Errorf("deadline = %v, %v; want %v", got, ok, tt.want)
			}
		})
	}
}

// The pods a drain evicted are named in the Drained Event and in the
// finished notification (not in the received one).
func TestEvictedPodsNamed(t *testing.T) {
	pods := []string{"shop/web-0", "shop/cart-1"}
	d := &fakeDrainer{cordons: map[string]int{}, drains: map[string]int{}, release: make(chan struct{}), pods: pods}
	close(d.release)
	n := &recordingNotifier{}
	rec := record.NewFakeRecorder(100)
	c := run(t, fake.NewClientset(node("node-a", instA)), nodes.Options{}, Deps{Drainer: d, Notifier: n, Recorder: rec},
		Options{Policy: plan.Policy{DrainKinds: []event.Kind{event.SpotInterruption}}})
	c.Submit("node-a", instA, time.Time{}, events(t, spot(instA)), 1)
	settled(t, c)
	var drained string
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.HasPrefix(e, "Normal Drained") {
			drained = e
		}
	}
	if !strings.Contains(drained, "shop/web-0, shop/cart-1") {
		t.Errorf("Drained Event %q; want it to name the evicted pods", drained)
	}
	waitFor(t, "two notifications", func() bool { return len(n.phases()) == 2 })
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range n.sent {
		want := []string(nil)
		if s.Phase == notify.PhaseFinished {
			want = pods
		}
		if !slices.Equal(s.Pods, want) {
			t.Errorf("%s notification pods %v, want %v", s.Phase, s.Pods, want)
		}
	}
}
