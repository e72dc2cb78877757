package drain_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/kube/clientset"
)

// wantCut is a pod Result.CutOff must name.
type wantCut struct {
	name   string
	cause  drain.Cause
	detail string // in its Detail
	forced bool
}

// Issue 23 item 5: a drain that ends with pods on the node names each,
// with why: cut off mid-shutdown (evicted, still terminating), never
// started (eviction refused by a PodDisruptionBudget, or not reached), or
// held by a finalizer once its grace period is over. Before, the Result
// only counted them (Remaining).
func TestCutOffPodsAreNamed(t *testing.T) {
	pdb := func(pod *corev1.Pod, _ int) error {
		if pod.Name == "guarded" {
			return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
		}
		return nil
	}
	held := func() *corev1.Pod {
		p := fakePod("held", 30)
		p.Finalizers = []string{"example.com/hold"}
		return p
	}
	tests := []struct {
		name    string
		pods    func() []*corev1.Pod
		force   bool
		cancel  time.Duration // cancel the drain this long after it starts (0: never)
		wantErr error
		want    []wantCut // sorted by name
		wantRem int
	}{
		{name: "deadline passed: terminating, refused by a PDB, not reached",
			pods: func() []*corev1.Pod {
				return []*corev1.Pod{fakePod("slow", 30, labelStuck), fakePod("guarded", 30), fakePod("critical", 30, labelCritical)}
			},
			wantErr: drain.ErrDeadline, wantRem: 3,
			want: []wantCut{{name: "critical", cause: drain.CauseNotStarted, detail: "not reached"},
				{name: "guarded", cause: drain.CauseNotStarted, detail: "refused (429): Cannot evict pod as it would violate the pod's disruption budget"},
				{name: "slow", cause: drain.CauseMidShutdown, detail: "grace period of 30 s, still terminating"}}},
		{name: "deadline passed, force deletion: the deleted pods are cut off too",
			pods:  func() []*corev1.Pod { return []*corev1.Pod{fakePod("slow", 30, labelStuck), fakePod("guarded", 30)} },
			force: true,
			want: []wantCut{{name: "guarded", cause: drain.CauseNotStarted, detail: "429", forced: true},
				{name: "slow", cause: drain.CauseMidShutdown, forced: true}}},
		{name: "grace period over, a finalizer holds the pod",
			pods:    func() []*corev1.Pod { return []*corev1.Pod{held()} },
			wantErr: drain.ErrDeadline, wantRem: 1,
			want: []wantCut{{name: "held", cause: drain.CauseFinalizer, detail: "finalizers: example.com/hold"}}},
		{name: "canceled mid-drain: what was evicted, what is left",
			pods: func() []*corev1.Pod {
				return []*corev1.Pod{fakePod("quick", 30), fakePod("slow", 30, labelStuck), fakePod("guarded", 30)}
			},
			cancel:  20 * time.Second,
			wantErr: context.Canceled, wantRem: 2,
			want: []wantCut{{name: "guarded", cause: drain.CauseNotStarted, detail: "429"},
				{name: "slow", cause: drain.CauseMidShutdown}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeCluster(t, tt.pods()...)
			c.answer = pdb
			deadline := c.clock.Now().Add(time.Minute)
			var res drain.Result
			var err error
			if tt.cancel == 0 {
				res, err = c.drain(drain.Options{ForceDeleteAtDeadline: tt.force}, deadline)
			} else {
				res, err = c.drainCanceled(drain.Options{}, deadline, tt.cancel)
			}
			if (tt.wantErr == nil) != (err == nil) || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Drain error = %v, want %v", err, tt.wantErr)
			}
			if res.Remaining != tt.wantRem {
				t.Errorf("Remaining = %d, want %d", res.Remaining, tt.wantRem)
			}
			if len(res.CutOff) != len(tt.want) {
				t.Fatalf("CutOff = %+v, want %d pods", res.CutOff, len(tt.want))
			}
			for i, w := range tt.want {
				got := res.CutOff[i]
				if got.Name != w.name || got.Cause != w.cause || !strings.Contains(got.Detail, w.detail) || got.Forced != w.forced {
					t.Errorf("CutOff[%d] = %+v, want %s %s (detail with %q, forced %v)", i, got, w.name, w.cause, w.detail, w.forced)
				}
			}
			if !res.Listed {
				t.Error("Listed = false for a drain that listed the node's pods")
			}
			if tt.cancel != 0 && (res.Evicted != 2 || !strings.Contains(strings.Join(res.Pods, ","), "ns/quick")) {
				t.Errorf("canceled drain: Evicted %d %v, want quick and slow (their evictions were accepted)", res.Evicted, res.Pods)
			}
		})
	}
}

// A drain canceled before it listed the node's pods says so (Listed
// false): it saw nothing, so the pods an earlier drain cut off stand
// (drainreport.Work keeps them; test/realnode TestInstanceDiesMidShutdown
// lost one when a drain the Node's deletion canceled at once replaced
// them by none).
func TestDrainCanceledBeforeItsListSawNothing(t *testing.T) {
	c := newFakeCluster(t, fakePod("slow", 30, labelStuck))
	d := drain.New(clientset.New(c.client), c.clock, quiet, drain.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := d.Drain(ctx, fakeNode, drain.Deadline{At: c.clock.Now().Add(time.Minute)}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Drain error = %v, want context.Canceled", err)
	}
	if res.Listed || len(res.CutOff) != 0 || res.Remaining != 0 {
		t.Errorf("Result = %+v, want nothing seen (Listed false)", res)
	}
}

// A drain canceled as its wait's watch begins (the request fails with
// the canceled context) names the pod it evicted cut off, as a cancel at
// any other moment does. In test/realnode TestInstanceDiesMidShutdown
// that drain reported nothing left, and the pod, still terminating when
// its Node was deleted, was called evicted and gone.
func TestDrainCanceledAsItsWatchBeginsNamesThePodsLeft(t *testing.T) {
	c := newFakeCluster(t, fakePod("slow", 30, labelStuck))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.client.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		cancel()
		return true, nil, context.Canceled
	})
	d := drain.New(clientset.New(c.client), c.clock, quiet, drain.Options{})
	res, err := d.Drain(ctx, fakeNode, drain.Deadline{At: c.clock.Now().Add(time.Minute)}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Drain error = %v, want context.Canceled", err)
	}
	if len(res.CutOff) != 1 || res.CutOff[0].Name != "slow" || res.CutOff[0].Cause != drain.CauseMidShutdown {
		t.Errorf("CutOff = %+v, want slow mid-shutdown", res.CutOff)
	}
}

// drainCanceled is drain, canceled after cancelAfter of clock time.
func (c *fakeCluster) drainCanceled(o drain.Options, deadline time.Time, cancelAfter time.Duration) (drain.Result, error) {
	c.t.Helper()
	d := drain.New(clientset.New(c.client), c.clock, quiet, drain.Options{Backoff: 5 * time.Second, ForceDeleteAtDeadline: o.ForceDeleteAtDeadline})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type outcome struct {
		res drain.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := d.Drain(ctx, fakeNode, drain.Deadline{At: deadline}, nil)
		done <- outcome{res, err}
	}()
	start := c.clock.Now()
	for {
		select {
		case o := <-done:
			return o.res, o.err
		case <-time.After(time.Millisecond):
		}
		if c.clock.Since(start) >= cancelAfter {
			cancel()
			o := <-done
			return o.res, o.err
		}
		if c.clock.HasWaiters() {
			c.clock.Step(time.Second)
		}
	}
}
