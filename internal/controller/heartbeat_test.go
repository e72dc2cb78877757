package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/plan"
)

// fakeLifecycle is an Auto Scaling stand-in that records the order of
// calls: whether heartbeats were running when the hook was read and when
// the action was completed.
type fakeLifecycle struct {
	mu        sync.Mutex
	owned     bool
	hookGate  chan struct{} // Hook waits for it when not nil
	hookErr   error         // Hook fails with it when not nil
	hook      lifecycle.Hook
	beating   int // KeepAlive loops running now
	started   int // KeepAlive loops started
	intervals []time.Duration
	untils    []time.Time // KeepAlive's until, per loop
	// beatRunningAtHook / AtComplete: were heartbeats running when Hook was
	// called / when Complete was called.
	beatRunningAtHook, beatRunningAtComplete []bool
	completed                                []string // results
	// completeFails / ownedFails: the first so many Complete / Owned
	// calls fail (throttled); failed completions are not in completed.
	completeFails, ownedFails int
	completeCalls, ownedCalls int
	// gone: tokens AWS no longer has an active action for (completed
	// before, by anyone): completing them again answers "no active action".
	gone map[string]bool
	// afterComplete, if set, runs after each successful completion.
	afterComplete func()
}

//lint:ignore ST1005 the text is the Auto Scaling API's own error
var errThrottled = errors.New("Throttling: Rate exceeded")

func (f *fakeLifecycle) Owned(context.Context, string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ownedCalls++
	if f.ownedCalls <= f.ownedFails {
		return false, errThrottled
	}
	return f.owned, nil
}

func (f *fakeLifecycle) Hook(ctx context.Context, _, _ string) (lifecycle.Hook, error) {
	f.mu.Lock()
	f.beatRunningAtHook = append(f.beatRunningAtHook, f.beating > 0)
	gate, err := f.hookGate, f.hookErr
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return lifecycle.Hook{}, ctx.Err()
		}
	}
	if err != nil {
		return lifecycle.Hook{}, err
	}
	return f.hook, nil
}

// Complete records the completion; afterComplete runs before it returns
// (the controller sees its effect before it goes on, as it would see an
// event that arrived while the call was in flight).
func (f *fakeLifecycle) Complete(_ context.Context, _ string, a event.LifecycleAction, result lifecycle.Result) error {
	after, err := f.complete(a, result)
	if after != nil {
		after()
	}
	return err
}

func (f *fakeLifecycle) complete(a event.LifecycleAction, result lifecycle.Result) (func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.beatRunningAtComplete = append(f.beatRunningAtComplete, f.beating > 0)
	f.completeCalls++
	if f.completeCalls <= f.completeFails {
		return nil, errThrottled
	}
	if f.gone != nil {
		if f.gone[a.Token] {
			return nil, lifecycle.ErrNoActiveAction
		}
		f.gone[a.Token] = true
	}
	f.completed = append(f.completed, string(result))
	return f.afterComplete, nil
}

func (f *fakeLifecycle) KeepAlive(ctx context.Context, _ string, _ event.LifecycleAction, interval *lifecycle.Interval, until time.Time, beat func(error)) error {
	f.mu.Lock()
	f.untils = append(f.untils, until)
	f.beating++
	f.started++
	f.intervals = append(f.intervals, interval.Get())
	f.mu.Unlock()
	beat(nil)
	<-ctx.Done()
	f.mu.Lock()
	f.beating--
	f.mu.Unlock()
	return nil
}

func (f *fakeLifecycle) snapshot() fakeLifecycle {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fakeLifecycle{beating: f.beating, started: f.started, intervals: append([]time.Duration(nil), f.intervals...),
		beatRunningAtHook: append([]bool(nil), f.beatRunningAtHook...), beatRunningAtComplete: append([]bool(nil), f.beatRunningAtComplete...),
		completed: append([]string(nil), f.completed...), untils: append([]time.Time(nil), f.untils...),
		completeCalls: f.completeCalls, ownedCalls: f.ownedCalls}
}

func readyNode(name, instance string) *corev1.Node {
	n := node(name, instance)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return n
}

// startLifecycle starts a queue-mode controller with lc as Auto Scaling;
// holdDrains keeps every drain in flight until the test ends.
func startLifecycle(t *testing.T, lc *fakeLifecycle, rec record.EventRecorder, holdDrains bool, nodeList ...*corev1.Node) (*Controller, *metrics.Metrics, *fake.Clientset) {
	t.Helper()
	return startLifecycleWith(t, lc, rec, holdDrains, func(*Options) {}, nodeList...)
}

// startLifecycleWith is startLifecycle with the options changed by opt.
func startLifecycleWith(t *testing.T, lc *fakeLifecycle, rec record.EventRecorder, holdDrains bool, opt func(*Options), nodeList ...*corev1.Node) (*Controller, *metrics.Metrics, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset()
	for _, n := range nodeList {
		if _, err := client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	m := metrics.New()
	d := &fakeDrainer{cordons: map[string]int{}, drains: map[string]int{}, release: make(chan struct{})}
	if !holdDrains {
		close(d.release)
	}
	o := Options{Policy: plan.Policy{DrainKinds: []event.Kind{event.LifecycleTerminate}, CompleteLifecycle: true},
		LaunchReadyTimeout: time.Hour, LaunchTimeoutResult: "ABANDON", LifecycleTimeoutResult: "ABANDON", RetryBackoff: 20 * time.Millisecond}
	opt(&o)
	c := run(t, client, nodes.Options{}, Deps{Drainer: d, ASG: lc, Recorder: rec, Metrics: m}, o)
	return c, m, client
}

func lifecycleBody(transition, instance, token string) []byte {
	detailType := "EC2 Instance-terminate Lifecycle Action"
	if transition == event.TransitionLaunching {
		detailType = "EC2 Instance-launch Lifecycle Action"
	}
	return []byte(fmt.Sprintf(`{"version":"0","id":"%s","detail-type":%q,"source":"aws.autoscaling","account":"123456789012",
		"time":"2026-11-25T12:00:00Z","region":"us-east-1","resources":[],"detail":{"LifecycleActionToken":%q,"AutoScalingGroupName":"g",
		"LifecycleHookName":"h","EC2InstanceId":%q,"LifecycleTransition":%q,"Origin":"EC2","Destination":"AutoScalingGroup"}}`,
		token, detailType, token, instance, transition))
}

// Issue 14 item 12: a launch action is heartbeated from the moment its
// group is known to be this cluster's until it is completed: a slow read
// of the hook (it hangs here) neither delays the heartbeats nor the
// completion, which happens before the heartbeats stop.
func TestLaunchActionHeartbeatedWhileHookIsReadAndUntilCompleted(t *testing.T) {
	lc := &fakeLifecycle{owned: true, hookGate: make(chan struct{}), hook: lifecycle.Hook{HeartbeatTimeout: 30 * time.Second, GlobalTimeout: time.Hour}}
	c, _, client := startLifecycle(t, lc, nil, false)
	c.SubmitAction(events(t, lifecycleBody(event.TransitionLaunching, instA, "tok-launch"))[0], 1)
	waitFor(t, "heartbeats while the hook read hangs", func() bool { return lc.snapshot().beating > 0 })
	// The node joins: the action is completed while reading the hook
	// still hangs, under heartbeats.
	if _, err := client.CoreV1().Nodes().Create(context.Background(), readyNode("node-a", instA), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the completion while the hook read hangs", func() bool { return len(lc.snapshot().completed) > 0 })
	close(lc.hookGate)
	waitFor(t, "heartbeats to stop", func() bool { return lc.snapshot().beating == 0 })
	s := lc.snapshot()
	if len(s.beatRunningAtComplete) != 1 || !s.beatRunningAtComplete[0] || s.completed[0] != "CONTINUE" {
		t.Errorf("completed %v, heartbeats running at completion %v; want one CONTINUE, completed before heartbeats stopped", s.completed, s.beatRunningAtComplete)
	}
	if s.intervals[0] != lifecycle.UnknownHookInterval {
		t.Errorf("first heartbeat interval %v with the hook unknown; want %v", s.intervals[0], lifecycle.UnknownHookInterval)
	}
}

// Issue 22 defect 5: a launch action whose completion or ownership check
// fails once (throttled) is retried with backoff under heartbeats that
// never stop until it is completed; its message is settled Done, not
// handed back as failed with the action left to time out.
func TestLaunchActionRetriedUnderHeartbeatsAfterFailedCalls(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		completeFails, ownedFails int
	}{
		{"completion throttled twice", 2, 0},
		{"ownership check throttled twice", 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lc := &fakeLifecycle{owned: true, completeFails: tc.completeFails, ownedFails: tc.ownedFails,
				hook: lifecycle.Hook{HeartbeatTimeout: 30 * time.Second, GlobalTimeout: time.Hour}}
			c, _, _ := startLifecycle(t, lc, nil, false, readyNode("node-a", instA))
			c.SubmitAction(events(t, lifecycleBody(event.TransitionLaunching, instA, "tok-launch"))[0], 3)
			s := settled(t, c)
			waitFor(t, "a heartbeat loop", func() bool { return lc.snapshot().started > 0 })
			waitFor(t, "heartbeats to stop", func() bool { return lc.snapshot().beating == 0 })
			got := lc.snapshot()
			if s != (Settlement{Ticket: 3, Outcome: Done}) {
				t.Errorf("settled %+v, want ticket 3 done", s)
			}
			if fmt.Sprint(got.completed) != "[CONTINUE]" || got.completeCalls != tc.completeFails+1 {
				t.Errorf("completed %v in %d calls; want one CONTINUE after %d failed calls", got.completed, got.completeCalls, tc.completeFails)
			}
			for i, on := range got.beatRunningAtComplete {
				if i > 0 && !on { // the first call may race the loop's start
					t.Errorf("completion call %d made without heartbeats", i+1)
				}
			}
			if got.started != 1 {
				t.Errorf("%d heartbeat loops started; want 1, running from ownership until completion", got.started)
			}
		})
	}
}

// Issue 14 item 3: when the hook cannot be read, a terminate action is
// heartbeated anyway (conservative interval), the read is retried, and
// the failure is reported as a Warning Event and a metric.
func TestTerminateActionHeartbeatedWhenHookCannotBeRead(t *testing.T) {
	lc := &fakeLifecycle{owned: true, hookErr: errors.New("AccessDenied: not authorized to perform autoscaling:DescribeLifecycleHooks")}
	rec := record.NewFakeRecorder(100)
	c, m, _ := startLifecycle(t, lc, rec, true, readyNode("node-a", instA))
	c.Submit("node-a", instA, time.Time{}, events(t, lifecycleBody(event.TransitionTerminating, instA, "tok-term")), 1)
	waitFor(t, "heartbeats to start", func() bool { return lc.snapshot().started > 0 })
	waitFor(t, "the hook read to be retried", func() bool { return len(lc.snapshot().beatRunningAtHook) >= 3 })
	if s := lc.snapshot(); s.intervals[0] != lifecycle.UnknownHookInterval {
		t.Errorf("heartbeat interval %v with the hook unknown; want %v", s.intervals[0], lifecycle.UnknownHookInterval)
	}
	if n := counterValue(t, m.LifecycleCalls.WithLabelValues("describe-hook", "error")); n < 3 {
		t.Errorf("lifeboat_lifecycle_calls_total{call=describe-hook,result=error} = %v; want ≥ 3", n)
	}
	var warned bool
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.HasPrefix(e, "Warning LifecycleHookUnknown") {
			warned = true
		}
	}
	if !warned {
		t.Error("no Warning LifecycleHookUnknown Event on the node")
	}
}

// Issue 14 item 9: a terminate action of an instance that is not a node
// (the queue intake hands it over as an action) is completed with CONTINUE
// when its group is this cluster's, and handed back as foreign otherwise.
func TestTerminateActionOfInstanceWithoutNode(t *testing.T) {
	for _, tc := range []struct {
		name      string
		owned     bool
		completed []string
		outcome   Outcome
	}{
		{"group of this cluster: completed", true, []string{"CONTINUE"}, Done},
		{"another cluster's group: left for it", false, nil, Foreign},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lc := &fakeLifecycle{owned: tc.owned, hook: lifecycle.Hook{HeartbeatTimeout: 30 * time.Second, GlobalTimeout: time.Hour}}
			c, _, _ := startLifecycle(t, lc, nil, false, readyNode("node-a", instA))
			c.SubmitAction(events(t, lifecycleBody(event.TransitionTerminating, instB, "tok-orphan"))[0], 7)
			s := settled(t, c)
			if got := lc.snapshot(); fmt.Sprint(got.completed) != fmt.Sprint(tc.completed) {
				t.Errorf("completed %v, want %v", got.completed, tc.completed)
			}
			if s != (Settlement{Ticket: 7, Outcome: tc.outcome}) {
				t.Errorf("settled %+v, want ticket 7 %v", s, tc.outcome)
			}
		})
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue()
}
