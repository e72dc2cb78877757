package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/plan"
)

// ownedTimeout bounds the one Auto Scaling call made before a lifecycle
// action is heartbeated (whether its group is this cluster's): it must
// leave room inside AWS's shortest heartbeat timeout (30 s).
const ownedTimeout = 15 * time.Second

// actionWork is one lifecycle action followed without a node's work: a
// launch, or a termination of an instance that is not a node.
type actionWork struct {
	e       event.Event
	tickets []Ticket
}

// startAction follows a lifecycle action that is not a node's work (F1
// launches, terminations of instances that never became nodes); copies of
// the same action join the one in flight.
func (c *Controller) startAction(e event.Event, t Ticket) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.launches[e.ID]; ok {
		l.tickets = append(l.tickets, t)
		return
	}
	l := &actionWork{e: e, tickets: []Ticket{t}}
	c.launches[e.ID] = l
	c.spawn(func() { c.runAction(c.ctx, l) })
}

func (c *Controller) runAction(ctx context.Context, l *actionWork) {
	e := l.e
	outcome := Done
	err := c.settleAction(ctx, e)
	switch {
	case err == nil:
	case errors.Is(err, errNotOurs):
		c.Metrics.UnknownInstance.Inc()
		outcome = Foreign
	case ctx.Err() != nil:
		outcome = Failed
	default:
		outcome = Failed
		c.Log.Warn("lifecycle action failed", "instanceID", e.InstanceID, "eventID", e.ID, "kind", e.Kind, "error", err.Error())
	}
	c.mu.Lock()
	delete(c.launches, e.ID)
	if outcome == Done {
		c.done[e.ID] = c.Clock.Now()
	}
	tickets := l.tickets
	c.mu.Unlock()
	if ctx.Err() != nil {
		return // shutdown: the source hands its messages back
	}
	for _, t := range tickets {
		c.settle(t, outcome)
	}
}

var errNotOurs = errors.New("auto scaling group is not this cluster's")

// settleAction completes a lifecycle action of a group lifeboat owns. From
// the moment ownership is known until the action is settled it is
// heartbeated: slow or retried Auto Scaling calls (reading the hook,
// completing) must not let it time out (with ABANDON, AWS would terminate a
// healthy new instance).
func (c *Controller) settleAction(ctx context.Context, e event.Event) error {
	if c.ASG == nil || e.Lifecycle == nil {
		return nil
	}
	a := *e.Lifecycle
	started := e.Time
	if started.IsZero() {
		started = c.Clock.Now()
	}
	log := c.Log.With("instanceID", e.InstanceID, "eventID", e.ID, "group", a.GroupName, "origin", a.Origin, "destination", a.Destination)
	owned, err := c.ownedRetried(ctx, log, e, started)
	if err != nil {
		return err
	}
	if !owned {
		return errNotOurs
	}
	b := c.keepAlive(ctx, nil, e.InstanceID, a, time.Time{}, nil)
	defer b.stop() // after the completion below, never before it
	return c.settleRetried(ctx, log, b, started, func() error {
		switch {
		case e.Kind == event.LifecycleTerminate:
			// The instance is not a node of this cluster (it never joined, or
			// its node is gone): nothing to drain, and holding the action
			// would hold scale-in or an instance refresh for its whole timeout.
			return c.completeAction(ctx, log, e, lifecycle.Continue, "the instance is not a node of this cluster")
		case a.Destination == event.PlaceWarmPool:
			// Into the warm pool: the instance does not join the cluster now.
			return c.completeAction(ctx, log, e, lifecycle.Continue, "entering the warm pool")
		}
		return c.awaitReady(ctx, log, e, b, started)
	})
}

// awaitReady completes a launch action into the group once the instance's
// Node is Ready, or with the timeout result when it is not Ready in time.
func (c *Controller) awaitReady(ctx context.Context, log *slog.Logger, e event.Event, b *beat, started time.Time) error {
	tick := c.Clock.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		deadline := started.Add(c.o.LaunchReadyTimeout)
		if h, ok := b.Hook(); ok {
			deadline = started.Add(min(c.o.LaunchReadyTimeout, h.GlobalTimeout))
		}
		if n, ok := c.Nodes.ByInstance(e.InstanceID); ok && nodes.Ready(n) {
			if n.Annotations[drain.AnnotationCordoned] == "true" {
				// Back from the warm pool: undo the cordon of its last exit.
				if _, err := c.Drainer.Uncordon(ctx, n.Name, plan.TaintPrefix, []string{drain.AnnotationEvents, AnnotationDrained}); err != nil {
					return err
				}
				c.report(c.actionNode(n.Name, e), corev1.EventTypeNormal, "Uncordoned", "uncordon", "instance returned from the warm pool")
			}
			return c.completeAction(ctx, log, e, lifecycle.Continue, "node "+n.Name+" is Ready")
		}
		if !c.Clock.Now().Before(deadline) {
			return c.completeAction(ctx, log, e, c.o.LaunchTimeoutResult, fmt.Sprintf("no Ready node after %s", deadline.Sub(started).Round(time.Second)))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C():
		}
	}
}

// completeAction completes a lifecycle action that is not a node's work.
// An action no longer active was lost (timed out: AWS applied the hook's
// default result, or completed by someone else): a Warning on its node, if
// it has one, and a metric.
func (c *Controller) completeAction(ctx context.Context, log *slog.Logger, e event.Event, result lifecycle.Result, why string) error {
	err := c.ASG.Complete(ctx, e.InstanceID, *e.Lifecycle, result)
	transition := "launch"
	if e.Kind == event.LifecycleTerminate {
		transition = "terminate"
	}
	node := ""
	if n, ok := c.Nodes.ByInstance(e.InstanceID); ok {
		node = n.Name
	}
	switch {
	case err == nil:
		c.Metrics.LifecycleCalls.WithLabelValues("complete", "ok").Inc()
		log.Info(transition+" lifecycle action completed", "result", result, "why", why)
		if e.Kind != event.LifecycleLaunch {
			node = "" // a terminate action here has no node to note it on
		}
		c.completed(ctx, *e.Lifecycle, result, node)
		return nil
	case errors.Is(err, lifecycle.ErrNoActiveAction) && c.completedByLifeboat(*e.Lifecycle, node):
		c.Metrics.LifecycleCalls.WithLabelValues("complete", "gone").Inc()
		log.Info(transition+" lifecycle action already completed by lifeboat", "why", why)
		return nil
	case errors.Is(err, lifecycle.ErrNoActiveAction):
		c.Metrics.LifecycleCalls.WithLabelValues("complete", "gone").Inc()
		c.Metrics.LifecycleLost.WithLabelValues(transition).Inc()
		msg := fmt.Sprintf("%s lifecycle action %s/%s was no longer active when lifeboat completed it (%s): it timed out, and AWS applied the hook's default result, or someone else completed it",
			transition, e.Lifecycle.GroupName, e.Lifecycle.HookName, why)
		if n, ok := c.Nodes.ByInstance(e.InstanceID); ok {
			c.report(c.actionNode(n.Name, e), corev1.EventTypeWarning, "LifecycleActionLost", "lifecycle-complete", msg)
		} else {
			log.Warn("LifecycleActionLost", "detail", msg)
		}
		return nil
	default:
		c.Metrics.LifecycleCalls.WithLabelValues("complete", "error").Inc()
		return err
	}
}

// actionNode is a node's identity for reports about an action that is not
// the node's work.
func (c *Controller) actionNode(name string, e event.Event) *nodeWork {
	return &nodeWork{name: name, instanceID: e.InstanceID, reported: map[string]bool{}}
}
