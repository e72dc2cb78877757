package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/notify"
	"lifeboat.dev/lifeboat/internal/plan"
)

// delayCompletion waits CompleteLifecycleDelay after a drain before its
// terminate actions are completed (volumes detaching, out-of-cluster
// clean-up), as NTH's COMPLETE_LIFECYCLE_ACTION_DELAY_SECONDS does. The
// heartbeats keep running meanwhile. The wait never passes the plan's
// deadline less the margin: past it AWS acts on the instance anyway.
func (c *Controller) delayCompletion(ctx context.Context, w *nodeWork, p plan.Plan) error {
	if c.o.CompleteLifecycleDelay <= 0 || c.ASG == nil || len(p.Lifecycle) == 0 {
		return nil
	}
	now := c.Clock.Now()
	until := now.Add(c.o.CompleteLifecycleDelay)
	if !p.Deadline.IsZero() {
		if limit := p.Deadline.Add(-c.o.DeadlineMargin); limit.Before(until) {
			until = limit
		}
	}
	wait := until.Sub(now)
	if wait <= 0 {
		return nil
	}
	c.report(w, corev1.EventTypeNormal, "LifecycleDelayed", "lifecycle-complete", fmt.Sprintf("completing the lifecycle action in %s (--complete-lifecycle-action-delay)", wait.Round(time.Second)))
	t := c.Clock.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// heartbeatUntil is when the heartbeats of a terminate action stop at the
// latest (zero: no cap but the hook's global timeout): HeartbeatUntil after
// the action started (when it is known, so that a restart does not extend
// it), else after now.
func (c *Controller) heartbeatUntil(a event.LifecycleAction, evs []event.Event) time.Time {
	if c.o.HeartbeatUntil <= 0 {
		return time.Time{}
	}
	start := c.Clock.Now()
	for _, e := range evs {
		if e.Lifecycle != nil && e.Lifecycle.Key() == a.Key() && !e.Time.IsZero() {
			start = e.Time
		}
	}
	return start.Add(c.o.HeartbeatUntil)
}

// recordPods adds the pods a drain evicted to the node's work (a drain
// restarted by new events evicts the rest: the lists add up).
func (c *Controller) recordPods(w *nodeWork, pods []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range pods {
		if !slices.Contains(w.pods, p) {
			w.pods = append(w.pods, p)
		}
	}
}

// evictedPods are the pods a notification of phase names: the evicted
// ones, once the node is finished.
func evictedPods(c *Controller, w *nodeWork, phase notify.Phase) []string {
	if phase != notify.PhaseFinished {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(w.pods)
}
