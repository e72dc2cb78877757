package drain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"lifeboat.dev/lifeboat/internal/drain"
)

// Issue 23 items 1 and 3: how a drain ends. A pod whose containers have
// all ended is off the node even while a finalizer holds its object; after
// the force deletion at the deadline nothing is waited for.
func TestHowADrainEnds(t *testing.T) {
	pdb := func(pod *corev1.Pod, _ int) error {
		return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	}
	tests := []struct {
		name         string
		pod          func() *corev1.Pod
		answer       func(c *fakeCluster) func(*corev1.Pod, int) error
		o            drain.Options
		deadline     time.Duration
		wantErr      error // nil: none
		wantBy       time.Duration
		wantFinished string // in Result.Finished's reason
		wantForced   int
	}{
		{name: "a pod that finished while a finalizer holds its object is not waited for",
			pod: func() *corev1.Pod {
				p := fakePod("job", 30)
				p.Finalizers = []string{"example.com/hold"}
				return p
			},
			answer: func(c *fakeCluster) func(*corev1.Pod, int) error {
				return func(p *corev1.Pod, _ int) error { // its containers end as it is evicted
					p.Status.Phase = corev1.PodSucceeded
					return c.client.Tracker().Update(podsGVR, p, p.Namespace)
				}
			},
			wantBy: 5 * time.Second, wantFinished: "finalizers: example.com/hold"},
		{name: "after the force deletion at the deadline nothing is waited for",
			pod: func() *corev1.Pod {
				p := fakePod("held", 30, labelStuck)
				p.Finalizers = []string{"example.com/never-removed"}
				return p
			},
			answer: func(*fakeCluster) func(*corev1.Pod, int) error { return pdb },
			o:      drain.Options{Margin: 5 * time.Second, ForceDeleteAtDeadline: true}, deadline: 20 * time.Second,
			wantBy: 21 * time.Second, wantForced: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeCluster(t, tt.pod())
			c.answer = tt.answer(c)
			start := c.clock.Now()
			var deadline time.Time
			if tt.deadline != 0 {
				deadline = start.Add(tt.deadline)
			}
			res, err := c.drain(tt.o, deadline)
			took := c.clock.Since(start)
			if (tt.wantErr == nil) != (err == nil) || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Drain error = %v, want %v", err, tt.wantErr)
			}
			if took > tt.wantBy {
				t.Errorf("drain ended %v after it started, want at most %v", took, tt.wantBy)
			}
			if len(res.Stuck) > 0 {
				t.Errorf("Result.Stuck = %+v, want none", res.Stuck)
			}
			if res.ForceDeleted != tt.wantForced {
				t.Errorf("force-deleted %d, want %d", res.ForceDeleted, tt.wantForced)
			}
			if tt.wantFinished == "" {
				return
			}
			if len(res.Finished) != 1 || !strings.Contains(res.Finished[0].Reason, tt.wantFinished) {
				t.Errorf("Result.Finished = %+v, want the pod, its reason naming %q", res.Finished, tt.wantFinished)
			}
		})
	}
}
