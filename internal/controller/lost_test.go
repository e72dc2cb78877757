package controller

import (
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/kube/clientset"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/plan"
)

// lostStarter returns a function that starts a lifeboat over client (a
// real Drainer, so that what it records on nodes is there for the next).
func lostStarter(t *testing.T, client *fake.Clientset, lc *fakeLifecycle) func() (*Controller, *metrics.Metrics, *record.FakeRecorder) {
	return func() (*Controller, *metrics.Metrics, *record.FakeRecorder) {
		m, rec := metrics.New(), record.NewFakeRecorder(100)
		d := drain.New(clientset.New(client), testClock, slog.New(slog.NewTextHandler(io.Discard, nil)), drain.Options{})
		o := Options{Policy: plan.Policy{DrainKinds: []event.Kind{event.LifecycleTerminate, event.SpotInterruption}, CompleteLifecycle: true},
			LaunchReadyTimeout: time.Hour, LaunchTimeoutResult: "ABANDON", LifecycleTimeoutResult: "ABANDON", RetryBackoff: 20 * time.Millisecond}
		return run(t, client, nodes.Options{}, Deps{Drainer: d, ASG: lc, Recorder: rec, Metrics: m}, o), m, rec
	}
}

// checkNotLost fails if the action was counted or reported lost.
func checkNotLost(t *testing.T, m *metrics.Metrics, rec *record.FakeRecorder, transition string, lc *fakeLifecycle) {
	t.Helper()
	if n := counterValue(t, m.LifecycleLost.WithLabelValues(transition)); n != 0 {
		t.Errorf("lifeboat_lifecycle_actions_lost_total{transition=%q} = %v; want 0: lifeboat completed it itself", transition, n)
	}
	for len(rec.Events) > 0 {
		if ev := <-rec.Events; strings.HasPrefix(ev, "Warning LifecycleActionLost") {
			t.Errorf("Event %q for an action lifeboat completed", ev)
		}
	}
	if s := lc.snapshot(); len(s.completed) != 1 {
		t.Errorf("completed %v; want once", s.completed)
	}
}

var lostHook = lifecycle.Hook{HeartbeatTimeout: 30 * time.Second, GlobalTimeout: time.Hour}

// Issue 22 defect 11: "lifecycle actions lost" (metric and Warning Event)
// must count actions that timed out or someone else completed, not those
// lifeboat itself completed before a restart or a re-plan: completing
// again answers "no active action", and operators alerting on the metric
// are paged for nothing. Here a launch action's message comes back after
// a restart (it was not deleted yet): the second process must not count
// it lost.
func TestLaunchActionLifeboatCompletedBeforeARestartIsNotLost(t *testing.T) {
	lc := &fakeLifecycle{owned: true, hook: lostHook, gone: map[string]bool{}}
	client := fake.NewClientset(readyNode("node-a", instA))
	start := lostStarter(t, client, lc)
	e := events(t, lifecycleBody(event.TransitionLaunching, instA, "tok-1"))[0]
	first, _, _ := start()
	first.SubmitAction(e, 1)
	if s := settled(t, first); s.Outcome != Done {
		t.Fatalf("first run settled %v", s.Outcome)
	}
	second, m, rec := start()
	second.SubmitAction(e, 2)
	if s := settled(t, second); s.Outcome != Done {
		t.Fatalf("second run settled %v", s.Outcome)
	}
	checkNotLost(t, m, rec, "launch", lc)
}

// Issue 22 defect 11, terminate actions: completed, then planned again
// (a Spot notice arrived before the node's work finished) or resumed after
// a crash between the completion and the node's done record.
func TestTerminateActionLifeboatCompletedIsNotLostOnReplanOrResume(t *testing.T) {
	term := func(t *testing.T) event.Event {
		return events(t, lifecycleBody(event.TransitionTerminating, instA, "tok-1"))[0]
	}
	t.Run("re-planned", func(t *testing.T) {
		lc := &fakeLifecycle{owned: true, hook: lostHook, gone: map[string]bool{}}
		client := fake.NewClientset(readyNode("node-a", instA))
		c, m, rec := lostStarter(t, client, lc)()
		var once sync.Once
		lc.afterComplete = func() {
			once.Do(func() { c.Submit("node-a", instA, time.Time{}, events(t, spot(instA)), NoTicket) })
		}
		c.Submit("node-a", instA, time.Time{}, []event.Event{term(t)}, 1)
		if s := settled(t, c); s.Outcome != Done {
			t.Fatalf("settled %v", s.Outcome)
		}
		if n := lc.snapshot().completeCalls; n < 2 {
			t.Fatalf("%d completion calls: the re-plan did not happen", n)
		}
		checkNotLost(t, m, rec, "terminate", lc)
	})
	t.Run("resumed", func(t *testing.T) {
		e := term(t)
		lc := &fakeLifecycle{owned: true, hook: lostHook, gone: map[string]bool{"tok-1": true}, completed: []string{"CONTINUE"}}
		n := readyNode("node-a", instA)
		persisted, err := persist([]event.Event{e})
		if err != nil {
			t.Fatal(err)
		}
		// What a lifeboat that completed the action and died before
		// finishing the node left on it.
		n.Annotations = map[string]string{drain.AnnotationEvents: persisted,
			AnnotationLifecycle: lifecycleNote(*e.Lifecycle, lifecycle.Continue, testClock.Now())}
		client := fake.NewClientset(n)
		c, m, rec := lostStarter(t, client, lc)()
		waitFor(t, "the resumed work to finish", func() bool { return c.idle() && lc.snapshot().completeCalls > 0 })
		checkNotLost(t, m, rec, "terminate", lc)
	})
}
