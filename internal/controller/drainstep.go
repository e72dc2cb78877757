package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/drainreport"
	"lifeboat.dev/lifeboat/internal/dsstop"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/plan"
)

// drain runs the drain, restarting it when new events arrive, then
// completes the plan's lifecycle actions.
func (c *Controller) drain(ctx context.Context, w *nodeWork, p plan.Plan) error {
	start := c.Clock.Now()
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The forecast watches the drain until it ends (forecast.go).
	forecasting := c.startForecast(dctx, w, p)
	defer func() { cancel(); forecasting.stop() }()
	type outcome struct {
		res drain.Result
		err error
	}
	done := make(chan outcome, 1)
	// progress reports Draining with the number of pods once it is known,
	// and counts evictions a PodDisruptionBudget refused (it is called
	// from the drain's goroutines; its counts are cumulative).
	var pmu sync.Mutex
	blocked := 0
	draining := func(total int) {
		c.reportOnce(w, "Draining", corev1.EventTypeNormal, "drain", fmt.Sprintf("%s: draining %d pods (deadline %s)", p.Reason, total, fmtPlanDeadline(p)))
	}
	progress := func(pr drain.Progress) {
		pmu.Lock()
		d := pr.Blocked - blocked
		blocked = max(blocked, pr.Blocked)
		pmu.Unlock()
		if d > 0 {
			c.Metrics.Evictions.WithLabelValues("blocked").Add(float64(d))
		}
		forecasting.drainListed(pr.Pods)
		draining(pr.Total)
	}
	go func() {
		c.cordons.wait(dctx, c.Clock) // other nodes' cordons first
		res, err := c.Drainer.Drain(dctx, w.name, drain.Deadline{At: p.DrainEnd(c.o.DeadlineMargin), Enforced: p.Enforced,
			Announced: p.Deadline, Reason: string(p.Reason)}, progress)
		done <- outcome{res, err}
	}()
	var o outcome
	select {
	case o = <-done:
	case <-w.wake:
		cancel()
		o = <-done
		if ctx.Err() == nil && errors.Is(o.err, context.Canceled) {
			return c.cutShort(w, o.res) // runNode plans again
		}
		// It ended before the cancel: runNode plans the new events next.
	}
	draining(o.res.Evicted + o.res.ForceDeleted + o.res.Remaining) // no progress: nothing was to evict
	c.forecastOutcome(forecasting, o.res, o.err)
	end, ok := drainreport.EndingOf(o.err)
	if !ok {
		c.Metrics.Actions.WithLabelValues("drain", "error").Inc()
		return o.err
	}
	r := c.drainEnded(w, o.res, end)
	result := c.o.LifecycleTimeoutResult
	switch end {
	case drainreport.Finished:
		result = lifecycle.Continue
		c.Metrics.Actions.WithLabelValues("drain", "ok").Inc()
		c.Metrics.ActionDuration.WithLabelValues("drain").Observe(c.Clock.Since(start).Seconds())
		c.Metrics.ToDrained.WithLabelValues(string(p.Reason)).Observe(c.Clock.Since(w.firstSeen).Seconds())
	case drainreport.DeadlinePassed:
		c.Metrics.Actions.WithLabelValues("drain", "deadline").Inc()
	default:
		// Draining again would not help: the node is reported, not waited on.
		c.Metrics.Actions.WithLabelValues("drain", "incomplete").Inc()
	}
	c.report(w, r.Type, r.Reason, "drain", r.Message, r.LogAttrs()...)
	if result == lifecycle.Continue && len(p.Lifecycle) > 0 {
		if err := c.awaitVolumesDetached(ctx, w, p.Deadline); err != nil {
			return err
		}
		if err := c.awaitLoadBalancers(ctx, w, p.Deadline); err != nil {
			return err
		}
		if c.DaemonSets != nil { // DaemonSet pods last (dsstop)
			if _, err := c.DaemonSets.Stop(ctx, w.name, p.Deadline); err != nil {
				return err
			}
		}
	}
	if err := c.delayCompletion(ctx, w, p); err != nil {
		return err
	}
	return c.completeAll(ctx, w, p.Lifecycle, result)
}

// daemonSetStopper stops a node's opted-in DaemonSet pods (package
// dsstop) once the drain is done, before its terminate actions are
// completed with CONTINUE; it returns only ctx's error.
type daemonSetStopper interface {
	Stop(ctx context.Context, node string, deadline time.Time) (dsstop.Result, error)
}

// completeAll completes the lifecycle actions and stops their heartbeats.
func (c *Controller) completeAll(ctx context.Context, w *nodeWork, actions []event.LifecycleAction, result lifecycle.Result) error {
	if c.ASG == nil {
		return nil
	}
	for _, a := range actions {
		err := c.ASG.Complete(ctx, w.instanceIDFor(), a, result)
		switch {
		case err == nil:
			c.Metrics.LifecycleCalls.WithLabelValues("complete", "ok").Inc()
			c.report(w, corev1.EventTypeNormal, "LifecycleCompleted", "lifecycle-complete", fmt.Sprintf("lifecycle action %s/%s completed with %s", a.GroupName, a.HookName, result))
			c.completed(ctx, a, result, "")
			if err := c.Drainer.SetAnnotations(ctx, w.name, map[string]string{AnnotationLifecycle: lifecycleNote(a, result, c.Clock.Now())}); err != nil {
				c.Log.Debug("recording lifecycle completion failed", "node", w.name, "error", err.Error())
			}
		case errors.Is(err, lifecycle.ErrNoActiveAction) && c.completedByLifeboat(a, w.name):
			c.Metrics.LifecycleCalls.WithLabelValues("complete", "gone").Inc()
			c.report(w, corev1.EventTypeNormal, "LifecycleAlreadyCompleted", "lifecycle-complete", fmt.Sprintf("lifecycle action %s/%s was already completed by lifeboat", a.GroupName, a.HookName))
		case errors.Is(err, lifecycle.ErrNoActiveAction):
			c.Metrics.LifecycleCalls.WithLabelValues("complete", "gone").Inc()
			c.Metrics.LifecycleLost.WithLabelValues("terminate").Inc()
			c.report(w, corev1.EventTypeNormal, "LifecycleAlreadyCompleted", "lifecycle-complete", fmt.Sprintf("lifecycle action %s/%s was already completed or timed out", a.GroupName, a.HookName))
		default:
			c.Metrics.LifecycleCalls.WithLabelValues("complete", "error").Inc()
			return err
		}
		c.stopHeartbeats(w, a.Key())
	}
	return nil
}

func (w *nodeWork) instanceIDFor() string { return w.instanceID }

// undo reverts what lifeboat did for canceled scheduled changes.
func (c *Controller) undo(ctx context.Context, w *nodeWork) error {
	changed, err := c.Drainer.Uncordon(ctx, w.name, plan.TaintPrefix, append([]string{drain.AnnotationEvents}, c.o.UndoAnnotations...))
	if err != nil {
		c.Metrics.Actions.WithLabelValues("uncordon", "error").Inc()
		return err
	}
	if changed {
		c.Metrics.Actions.WithLabelValues("uncordon", "ok").Inc()
		c.report(w, corev1.EventTypeNormal, "Uncordoned", "uncordon", "scheduled change canceled or completed: uncordoned and lifeboat taints removed")
	}
	return nil
}

// dueEvents returns the events the plan covers.
func dueEvents(evs []event.Event, p plan.Plan) []event.Event {
	var due []event.Event
	for _, e := range evs {
		if slices.Contains(p.EventIDs, e.ID) {
			due = append(due, e)
		}
	}
	return due
}
