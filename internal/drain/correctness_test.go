package drain_test

// Drain correctness (issue 14, items 2, 4, 5 and 6) on client-go's fake
// clientset: its reactors answer evictions the way the API server does in
// the cases a real testbed cannot produce on demand (a 409 from a
// PodDisruptionBudget status conflict, a kubelet that never finishes), and
// a fake clock makes the deadline, the backoffs and the bounds exact.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testclock "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/kube/clientset"
)

const fakeNode = "node-a"

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// Pod labels the fake kubelet reads.
const (
	// labelStuck: the kubelet never finishes the pod's deletion (it is dead).
	labelStuck = "test.lifeboat.io/stuck"
	// labelCritical gives the pod system-cluster-critical priority.
	labelCritical = "test.lifeboat.io/critical"
)

// fakePod is a running pod on fakeNode; grace < 0 leaves
// terminationGracePeriodSeconds unset.
func fakePod(name string, grace int64, labels ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Labels: map[string]string{}},
		Spec:       corev1.PodSpec{NodeName: fakeNode},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if grace >= 0 {
		p.Spec.TerminationGracePeriodSeconds = &grace
	}
	for _, l := range labels {
		p.Labels[l] = "true"
		if l == labelCritical {
			p.Spec.PriorityClassName = "system-cluster-critical"
		}
	}
	return p
}

// evictionCall is one eviction the fake API server received.
type evictionCall struct {
	pod   string
	grace *int64
	at    time.Time
	// uid is a delete's UID precondition ("": none).
	uid types.UID
}

// fakeCluster is a fake clientset whose pods/eviction and pods DELETE
// behave like the API server's with a kubelet behind it: an accepted
// eviction or a graceful delete starts the pod's deletion, which the fake
// kubelet finishes at once unless the pod is labelStuck; a pod with
// finalizers stays (deletionTimestamp set) until they are removed.
type fakeCluster struct {
	t      *testing.T
	client *fake.Clientset
	clock  *testclock.FakeClock

	mu        sync.Mutex
	evictions []evictionCall
	deletes   []evictionCall
	watches   int
	// answer decides an eviction before it is accepted: nil accepts it.
	// attempt counts this pod's evictions from 1.
	answer func(pod *corev1.Pod, attempt int) error
	// progress, if set, receives the drain's progress reports.
	progress func(drain.Progress)
}

func newFakeCluster(t *testing.T, pods ...*corev1.Pod) *fakeCluster {
	t.Helper()
	objs := make([]runtime.Object, len(pods))
	for i, p := range pods {
		objs[i] = p
	}
	c := &fakeCluster{t: t, client: fake.NewClientset(objs...), clock: testclock.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))}
	c.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		return true, nil, c.evict(ev)
	})
	c.client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteActionImpl)
		c.mu.Lock()
		call := evictionCall{pod: d.Name, grace: d.DeleteOptions.GracePeriodSeconds, at: c.clock.Now()}
		if pre := d.DeleteOptions.Preconditions; pre != nil && pre.UID != nil {
			call.uid = *pre.UID
		}
		c.deletes = append(c.deletes, call)
		c.mu.Unlock()
		return true, nil, c.startDeletion(d.Namespace, d.Name, d.DeleteOptions.Preconditions, d.DeleteOptions.GracePeriodSeconds)
	})
	c.client.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		c.mu.Lock()
		c.watches++
		c.mu.Unlock()
		return false, nil, nil
	})
	return c
}

func (c *fakeCluster) evict(ev *policyv1.Eviction) error {
	c.mu.Lock()
	var grace *int64
	if ev.DeleteOptions != nil {
		grace = ev.DeleteOptions.GracePeriodSeconds
	}
	c.evictions = append(c.evictions, evictionCall{pod: ev.Name, grace: grace, at: c.clock.Now()})
	attempt := 0
	for _, e := range c.evictions {
		if e.pod == ev.Name {
			attempt++
		}
	}
	answer := c.answer
	c.mu.Unlock()
	pod, err := c.pod(ev.Namespace, ev.Name)
	if err != nil {
		return err
	}
	if answer != nil {
		if err := answer(pod, attempt); err != nil {
			return err
		}
	}
	var pre *metav1.Preconditions
	if ev.DeleteOptions != nil {
		pre = ev.DeleteOptions.Preconditions
	}
	return c.startDeletion(ev.Namespace, ev.Name, pre, grace)
}

// startDeletion deletes a pod as the API server does: grace 0 removes it
// at once (unless finalizers hold it), otherwise its deletion starts and
// the fake kubelet finishes it at once, unless the pod is labelStuck.
func (c *fakeCluster) startDeletion(ns, name string, pre *metav1.Preconditions, grace *int64) error {
	pod, err := c.pod(ns, name)
	if err != nil {
		return err
	}
	if pre != nil && pre.UID != nil && *pre.UID != pod.UID {
		return apierrors.NewConflict(podsGVR.GroupResource(), name, errors.New("Precondition failed: UID in precondition does not match"))
	}
	g := int64(30)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	if grace != nil {
		g = *grace
	}
	if len(pod.Finalizers) == 0 && (g == 0 || pod.Labels[labelStuck] == "") {
		return c.client.Tracker().Delete(podsGVR, ns, name)
	}
	if pod.DeletionTimestamp == nil || g == 0 {
		at := metav1.NewTime(c.clock.Now().Add(time.Duration(g) * time.Second))
		pod.DeletionTimestamp = &at
		pod.DeletionGracePeriodSeconds = &g
		return c.client.Tracker().Update(podsGVR, pod, ns)
	}
	return nil
}

func (c *fakeCluster) pod(ns, name string) (*corev1.Pod, error) {
	obj, err := c.client.Tracker().Get(podsGVR, ns, name)
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Pod).DeepCopy(), nil
}

func (c *fakeCluster) exists(p *corev1.Pod) bool {
	got, err := c.pod(p.Namespace, p.Name)
	return err == nil && got.UID == p.UID
}

func (c *fakeCluster) evictionsOf(pod string) []evictionCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []evictionCall
	for _, e := range c.evictions {
		if e.pod == pod {
			out = append(out, e)
		}
	}
	return out
}

func (c *fakeCluster) deletesOf(pod string) []evictionCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []evictionCall
	for _, e := range c.deletes {
		if e.pod == pod {
			out = append(out, e)
		}
	}
	return out
}

// clockLimit ends a drain that is still running after this much clock
// time (it would wait forever).
const clockLimit = 6 * time.Hour

// drain runs a drain of fakeNode and moves the fake clock on whenever the
// drain waits on it (1 s at a time), or by a minute after it has been idle
// without a clock wait. A drain still running after clockLimit of clock time is
// canceled and the test fails (it would have waited forever); drain then
// returns what the canceled drain returned.
func (c *fakeCluster) drain(o drain.Options, deadline time.Time) (drain.Result, error) {
	c.t.Helper()
	return c.drainTo(o, drain.Deadline{At: deadline})
}

// drainTo is drain with a deadline that may be enforced.
func (c *fakeCluster) drainTo(o drain.Options, dl drain.Deadline) (drain.Result, error) {
	c.t.Helper()
	if o.Backoff == 0 {
		o.Backoff = 5 * time.Second
	}
	d := drain.New(clientset.New(c.client), c.clock, quiet, o)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type outcome struct {
		res drain.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := d.Drain(ctx, fakeNode, dl, c.progress)
		done <- outcome{res, err}
	}()
	start := c.clock.Now()
	idle := 0
	for {
		select {
		case o := <-done:
			return o.res, o.err
		case <-time.After(time.Millisecond):
		}
		if c.clock.Since(start) > clockLimit {
			cancel()
			o := <-done
			c.t.Errorf("drain still running after %v of clock time (it would wait forever); ended by cancel: %+v, %v", clockLimit, o.res, o.err)
			return o.res, o.err
		}
		idle++
		switch {
		case c.clock.HasWaiters():
			c.clock.Step(time.Second)
			idle = 0
		case idle > 20:
			c.clock.Step(time.Minute)
			idle = 0
		}
	}
}

// graceOf is the grace period an eviction asked for, the pod's own when
// it asked for none.
func graceOf(e evictionCall, pod *corev1.Pod) int64 {
	if e.grace != nil {
		return *e.grace
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return corev1.DefaultTerminationGracePeriodSeconds
}

// Item 2: an eviction never asks for grace 0 (the API server would remove
// the pod object at once while its containers still run): the minimum is
// 1 s, as kubectl's. Only the deadline's force deletion sends 0, and only
// when it was asked for.
func TestEvictionGraceNeverZero(t *testing.T) {
	tests := []struct {
		name     string
		own      int64 // -1: unset (30 s)
		deadline time.Duration
		margin   time.Duration
		want     int64
		wantNil  bool // the pod's own grace period (nothing sent)
	}{
		{name: "half a second before the deadline", own: 30, deadline: 500 * time.Millisecond, want: 1},
		{name: "deadline passed (instance state change, late message)", own: 30, deadline: -10 * time.Second, want: 1},
		{name: "margin larger than the time left", own: 30, deadline: 3 * time.Second, margin: 5 * time.Second, want: 1},
		{name: "pod's own grace 0, no deadline", own: 0, want: 1},
		{name: "pod's own grace 0, deadline far", own: 0, deadline: time.Hour, want: 1},
		{name: "capped above one second", own: 30, deadline: 10500 * time.Millisecond, want: 10},
		{name: "own grace fits", own: -1, deadline: time.Hour, want: 30, wantNil: true},
		{name: "no deadline", own: 45, want: 45, wantNil: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fakePod("app", tt.own)
			c := newFakeCluster(t, p)
			var deadline time.Time
			if tt.deadline != 0 {
				deadline = c.clock.Now().Add(tt.deadline)
			}
			_, _ = c.drain(drain.Options{Margin: tt.margin}, deadline)
			evs := c.evictionsOf("app")
			if len(evs) == 0 {
				t.Fatal("no eviction was sent")
			}
			for _, e := range evs {
				if got := graceOf(e, p); got != tt.want || (e.grace == nil) != tt.wantNil {
					t.Errorf("eviction asked for grace %v (effective %d s), want %d s (own grace: %v)", fmtGrace(e.grace), got, tt.want, tt.wantNil)
				}
			}
			if ds := c.deletesOf("app"); len(ds) > 0 {
				t.Errorf("pod deleted %d times without --force-delete-at-deadline", len(ds))
			}
		})
	}
}

func fmtGrace(g *int64) string {
	if g == nil {
		return "none"
	}
	return time.Duration(*g * int64(time.Second)).String()
}

// pdbConflict is the 409 the eviction subresource answers when the
// PodDisruptionBudget's status update keeps conflicting under parallel
// evictions (retry.RetryOnConflict gave up).
func pdbConflict() error {
	return apierrors.NewConflict(schema.GroupResource{Group: "policy", Resource: "poddisruptionbudgets"}, "guard",
		errors.New("the object has been modified; please apply your changes to the latest version and try again"))
}

// Item 4: a 409 is not always "pod gone". A PodDisruptionBudget status
// conflict is retried with backoff; a UID precondition that failed (the
// pod was replaced under the same name) or a pod that is gone ends that
// pod's eviction.
func TestEvictionConflict(t *testing.T) {
	tests := []struct {
		name          string
		answer        func(c *fakeCluster, pod *corev1.Pod, attempt int) error
		wantEvictions int
		wantReplaced  bool // a new pod under the same name, not evicted
	}{
		{
			name: "PodDisruptionBudget status conflict, twice",
			answer: func(_ *fakeCluster, _ *corev1.Pod, attempt int) error {
				if attempt <= 2 {
					return pdbConflict()
				}
				return nil
			},
			wantEvictions: 3,
		},
		{
			name: "pod replaced under the same name (UID precondition failed)",
			answer: func(c *fakeCluster, pod *corev1.Pod, _ int) error {
				if err := c.client.Tracker().Delete(podsGVR, pod.Namespace, pod.Name); err != nil {
					return err
				}
				repl := fakePod(pod.Name, 30)
				repl.UID = "uid-replacement"
				if err := c.client.Tracker().Create(podsGVR, repl, pod.Namespace); err != nil {
					return err
				}
				return apierrors.NewConflict(podsGVR.GroupResource(), pod.Name, errors.New("Precondition failed: UID in precondition: uid-app, UID in object meta: uid-replacement"))
			},
			wantEvictions: 1,
			wantReplaced:  true,
		},
		{
			name: "pod gone meanwhile",
			answer: func(c *fakeCluster, pod *corev1.Pod, _ int) error {
				if err := c.client.Tracker().Delete(podsGVR, pod.Namespace, pod.Name); err != nil {
					return err
				}
				return apierrors.NewConflict(podsGVR.GroupResource(), pod.Name, errors.New("Precondition failed"))
			},
			wantEvictions: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fakePod("app", 30)
			c := newFakeCluster(t, p)
			c.answer = func(pod *corev1.Pod, attempt int) error { return tt.answer(c, pod, attempt) }
			deadline := c.clock.Now().Add(time.Hour)
			res, err := c.drain(drain.Options{}, deadline)
			if err != nil {
				t.Errorf("Drain = %+v, %v; want no error (the pod was evictable)", res, err)
			}
			if got := len(c.evictionsOf("app")); got != tt.wantEvictions {
				t.Errorf("%d evictions, want %d", got, tt.wantEvictions)
			}
			if c.exists(p) {
				t.Error("the pod is still there")
			}
			if tt.wantReplaced {
				r, err := c.pod("ns", "app")
				if err != nil || r.UID != "uid-replacement" || r.DeletionTimestamp != nil {
					t.Errorf("the replacement pod (same name, another UID) is gone or being deleted (%v); it is not the pod lifeboat meant to evict", err)
				}
			}
		})
	}
}

// webhookDenied is what the API server answers when a validating admission
// webhook denies the eviction.
func webhookDenied(pod string) error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: "pods/eviction"}, pod,
		errors.New(`admission webhook "deny.example.com" denied the request: this pod must not be evicted`))
}

// namespaceTerminating is the NamespaceLifecycle admission's answer to an
// eviction (a create) in a namespace being deleted.
func namespaceTerminating(pod string) error {
	err := apierrors.NewForbidden(schema.GroupResource{Resource: "pods/eviction"}, pod,
		errors.New("unable to create new content in namespace ns because it is being terminated"))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Message: "namespace ns is being terminated"})
	return err
}

// Item 5: an eviction refused for good (403 from an admission webhook, 400,
// 422) does not stop the drain: that pod is reported, the others and later
// priority groups are evicted, and the deadline's rules still hold (force
// deletion when enabled, ErrDeadline otherwise).
func TestRefusedEvictionKeepsDraining(t *testing.T) {
	tests := []struct {
		name      string
		refusal   func(pod string) error
		deadline  time.Duration
		force     bool
		wantErr   error // nil: none
		wantGone  bool  // the refused pod is gone at the end
		wantForce int
		reported  bool // listed in Result.NotEvicted
	}{
		{name: "403 from a webhook, no deadline", refusal: webhookDenied, wantErr: drain.ErrNotEvicted, reported: true},
		{name: "422", refusal: func(pod string) error {
			return apierrors.NewInvalid(schema.GroupKind{Group: "policy", Kind: "Eviction"}, pod, nil)
		}, wantErr: drain.ErrNotEvicted, reported: true},
		{name: "400", refusal: func(string) error { return apierrors.NewBadRequest("bad eviction") }, wantErr: drain.ErrNotEvicted, reported: true},
		{name: "403 from a webhook, deadline, force-delete", refusal: webhookDenied, deadline: 10 * time.Minute, force: true, wantGone: true, wantForce: 1, reported: true},
		{name: "403 from a webhook, deadline, no force", refusal: webhookDenied, deadline: 10 * time.Minute, wantErr: drain.ErrDeadline, reported: true},
		{name: "namespace terminating: its pods are being deleted", refusal: namespaceTerminating, wantGone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refused := fakePod("refused", 30)
			other := fakePod("other", 30)
			critical := fakePod("critical", 30, labelCritical)
			c := newFakeCluster(t, refused, other, critical)
			c.answer = func(pod *corev1.Pod, _ int) error {
				if pod.Name != "refused" {
					return nil
				}
				err := tt.refusal(pod.Name)
				if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
					// The namespace controller deletes the namespace's pods.
					if err := c.startDeletion(pod.Namespace, pod.Name, nil, nil); err != nil {
						return err
					}
				}
				return err
			}
			var deadline time.Time
			if tt.deadline != 0 {
				deadline = c.clock.Now().Add(tt.deadline)
			}
			res, err := c.drain(drain.Options{ForceDeleteAtDeadline: tt.force}, deadline)
			switch {
			case tt.wantErr == nil && err != nil, tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("Drain error = %v, want %v", err, tt.wantErr)
			}
			if c.exists(other) || c.exists(critical) {
				t.Errorf("other pod there: %v, critical pod (a later priority group) there: %v; want both evicted", c.exists(other), c.exists(critical))
			}
			if c.exists(refused) == tt.wantGone {
				t.Errorf("refused pod still there: %v, want %v", c.exists(refused), !tt.wantGone)
			}
			if res.ForceDeleted != tt.wantForce {
				t.Errorf("force-deleted %d, want %d", res.ForceDeleted, tt.wantForce)
			}
			if tt.force {
				for _, d := range c.deletesOf("refused") {
					if d.at.Before(deadline) {
						t.Errorf("refused pod force-deleted at %v, before the deadline %v", d.at, deadline)
					}
				}
			}
			reported := len(res.NotEvicted) == 1 && res.NotEvicted[0].Name == "refused" && res.NotEvicted[0].Reason != ""
			if reported != tt.reported {
				t.Errorf("Result.NotEvicted = %+v; want the refused pod listed with its reason: %v", res.NotEvicted, tt.reported)
			}
			if tt.wantErr != nil && err != nil && tt.reported && !strings.Contains(err.Error(), "refused") {
				t.Errorf("error %q does not name the refused pod", err)
			}
			if n := len(c.evictionsOf("refused")); tt.reported && n != 1 {
				t.Errorf("refused pod's eviction sent %d times, want once (the refusal is final)", n)
			}
		})
	}
}

// Item 6: every wait has a bound. Without a deadline, a pod stuck
// terminating (the kubelet is dead) is reported once its grace period plus
// Options.StuckAfter has passed, without keeping the drain open, and later
// priority groups are still evicted. (A pod force-deleted at the deadline
// is not waited for at all: TestHowADrainEnds.)
func TestStuckPodsAreReportedNotWaitedOn(t *testing.T) {
	tests := []struct {
		name       string
		stuckAfter time.Duration
		deadline   time.Duration
		finalizer  bool
		pdb        bool // every eviction of the stuck pod answers 429
		wantErrs   []error
		wantBy     time.Duration // the drain ended at the latest this long after it started
	}{
		{name: "terminating on a dead kubelet, no deadline, default bound", wantErrs: []error{drain.ErrStuck}, wantBy: 30*time.Second + time.Minute + 5*time.Second},
		{name: "terminating on a dead kubelet, no deadline, StuckAfter 10s", stuckAfter: 10 * time.Second, wantErrs: []error{drain.ErrStuck}, wantBy: 45 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stuck := fakePod("stuck", 30, labelStuck)
			if tt.finalizer {
				stuck.Finalizers = []string{"example.com/never-removed"}
			}
			critical := fakePod("critical", 30, labelCritical)
			c := newFakeCluster(t, stuck, critical)
			if tt.pdb {
				c.answer = func(pod *corev1.Pod, _ int) error {
					if pod.Name == "stuck" {
						return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
					}
					return nil
				}
			}
			var deadline time.Time
			start := c.clock.Now()
			if tt.deadline != 0 {
				deadline = start.Add(tt.deadline)
			}
			res, err := c.drain(drain.Options{StuckAfter: tt.stuckAfter, ForceDeleteAtDeadline: !deadline.IsZero()}, deadline)
			took := c.clock.Since(start)
			for _, want := range tt.wantErrs {
				if !errors.Is(err, want) {
					t.Errorf("Drain error = %v, want %v", err, want)
				}
			}
			if took > tt.wantBy {
				t.Errorf("drain ended %v after it started, want at most %v", took, tt.wantBy)
			}
			if len(res.Stuck) != 1 || res.Stuck[0].Name != "stuck" || res.Stuck[0].Reason == "" {
				t.Errorf("Result.Stuck = %+v, want the stuck pod with a reason", res.Stuck)
			}
			if c.exists(critical) {
				t.Error("the critical pod (later priority group) was not evicted")
			}
		})
	}
}

// Item 6: when watches close at once (a proxy or API server that ends
// every watch), waiting for pods backs off instead of spinning.
func TestWaitBacksOffWhenWatchesCloseAtOnce(t *testing.T) {
	p := fakePod("slow", 30, labelStuck)
	c := newFakeCluster(t, p)
	var at []time.Time // clock time of each watch
	c.client.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		c.mu.Lock()
		c.watches++
		n := c.watches
		at = append(at, c.clock.Now())
		c.mu.Unlock()
		if n > 10000 {
			// Enough to show the spin; a blocking watch lets the test end.
			return true, watch.NewFake(), nil
		}
		return true, watch.NewEmptyWatch(), nil
	})
	start := c.clock.Now()
	_, err := c.drain(drain.Options{StuckAfter: 2 * time.Minute}, time.Time{})
	took := c.clock.Since(start)
	c.mu.Lock()
	watches := c.watches
	first := 0 // in the first second
	for _, a := range at {
		if a.Sub(start) < time.Second {
			first++
		}
	}
	c.mu.Unlock()
	// 30 s grace + 2 m: with a backoff from 250 ms doubling up to 30 s,
	// about a dozen watches; a spin makes thousands at once.
	if watches > 25 || first > 3 {
		t.Errorf("%d watches in %v of clock time, %d of them in the first second: the wait loop does not back off", watches, took, first)
	}
	if !errors.Is(err, drain.ErrStuck) {
		t.Errorf("Drain error = %v, want ErrStuck", err)
	}
}
