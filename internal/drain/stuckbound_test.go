package drain_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/drain"
)

// Issue 22, defect 6: without a deadline, a pod that does not leave is
// reported stuck Options.StuckAfter past the end of the grace period it
// actually got: Actions.PodGrace when set (--pod-grace-period), the pod's
// own otherwise, and the pod's own when the namespace controller deletes it
// (an eviction cannot be created in a namespace being deleted). Before the
// fix the bound was the pod's own grace plus StuckAfter whatever the
// eviction asked for, so with --pod-grace-period 300s and a pod's own 30 s
// the pod was reported stuck 90 s after its eviction, 210 s inside the
// grace lifeboat had given it.
func TestStuckBoundStartsFromTheGraceThePodGot(t *testing.T) {
	tests := []struct {
		name     string
		podGrace time.Duration // --pod-grace-period; 0: unset
		own      int64         // the pod's terminationGracePeriodSeconds
		nsGone   bool          // its namespace is being deleted
		want     int64         // the grace the pod got, in seconds
	}{
		{name: "pod's own grace", own: 30, want: 30},
		{name: "--pod-grace-period longer than the pod's own", podGrace: 300 * time.Second, own: 30, want: 300},
		{name: "--pod-grace-period shorter than the pod's own", podGrace: 10 * time.Second, own: 300, want: 10},
		{name: "namespace being deleted: the pod's own grace", podGrace: 10 * time.Second, own: 300, nsGone: true, want: 300},
	}
	const stuckAfter = time.Minute // the default
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fakePod("stuck", tt.own, labelStuck)
			c := newFakeCluster(t, p)
			if tt.nsGone {
				c.answer = func(pod *corev1.Pod, _ int) error {
					// The namespace controller deletes the pod with its own grace.
					if err := c.startDeletion(pod.Namespace, pod.Name, nil, nil); err != nil {
						return err
					}
					return namespaceTerminating(pod.Name)
				}
			}
			res, err := c.drain(drain.Options{Actions: drain.Actions{PodGrace: tt.podGrace}}, time.Time{})
			end := c.clock.Now()
			evs := c.evictionsOf("stuck")
			if len(evs) == 0 {
				t.Fatal("no eviction was sent")
			}
			if !tt.nsGone {
				if got := graceOf(evs[0], p); got != tt.want {
					t.Fatalf("eviction asked for %d s, want %d s (the case is wrong)", got, tt.want)
				}
			}
			if !errors.Is(err, drain.ErrStuck) {
				t.Errorf("Drain error = %v, want ErrStuck", err)
			}
			bound := time.Duration(tt.want)*time.Second + stuckAfter
			if took := end.Sub(evs[0].at); took < bound || took > bound+5*time.Second {
				t.Errorf("pod reported stuck %v after its eviction, want %v (its %d s grace + %v)", took, bound, tt.want, stuckAfter)
			}
			if len(res.Stuck) != 1 || !strings.Contains(res.Stuck[0].Reason, fmt.Sprintf("%d s grace", tt.want)) {
				t.Errorf("Result.Stuck = %+v, want the pod with a reason naming its %d s grace", res.Stuck, tt.want)
			}
		})
	}
}
