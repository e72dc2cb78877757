package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/lbdrain"
)

// loadBalancers tells when no ELBv2 target group holds a node any more
// (package lbdrain/poll).
type loadBalancers interface {
	Note(ctx context.Context, node string)
	Forget(node string)
	Wait(ctx context.Context, node, instanceID string, until time.Time, waiting func(lbdrain.Decision)) (lbdrain.Outcome, error)
}

// loadBalancerWaitCap bounds the wait when AWS's deadline is not known
// (ELBv2's longest deregistration delay is an hour).
const loadBalancerWaitCap = time.Hour

// heldShown is how many held targets a message names.
const heldShown = 5

// awaitLoadBalancers holds a terminate action's CONTINUE until no ELBv2
// target group lists the node's instance or pod IPs as anything but unused,
// bounded by AWS's deadline less the margin (heartbeats keep the action
// alive meanwhile); when the bound comes first the action is completed
// anyway, with a Warning. It returns only ctx's error.
func (c *Controller) awaitLoadBalancers(ctx context.Context, w *nodeWork, deadline time.Time) error {
	if c.LoadBalancers == nil {
		return nil
	}
	defer c.LoadBalancers.Forget(w.name)
	start := c.Clock.Now()
	until := start.Add(loadBalancerWaitCap)
	if !deadline.IsZero() {
		until = deadline.Add(-c.o.DeadlineMargin)
	}
	o, err := c.LoadBalancers.Wait(ctx, w.name, w.instanceID, until, func(d lbdrain.Decision) {
		c.report(w, corev1.EventTypeNormal, "WaitingForLoadBalancers", "load-balancers",
			fmt.Sprintf("waiting up to %s for target groups %v to let %d targets go: %s",
				until.Sub(c.Clock.Now()).Round(time.Second), lbdrain.Groups(d.Held), len(d.Held), lbdrain.Describe(d.Held, heldShown)))
	})
	if err != nil {
		return err
	}
	c.Metrics.LoadBalancerWaits.WithLabelValues(string(o.Result)).Inc()
	switch o.Result {
	case lbdrain.Drained:
		c.report(w, corev1.EventTypeNormal, "LoadBalancersDrained", "load-balancers",
			fmt.Sprintf("no target group holds the node after %s", o.Waited.Round(time.Millisecond)))
	case lbdrain.NotDrained:
		msg := fmt.Sprintf("target groups %v still hold %d targets after %s (%s): completing anyway, AWS's deadline less the margin has come",
			lbdrain.Groups(o.Held), len(o.Held), o.Waited.Round(time.Millisecond), lbdrain.Describe(o.Held, heldShown))
		if o.Err != nil {
			msg += fmt.Sprintf("; the last look failed: %v", o.Err)
		}
		c.report(w, corev1.EventTypeWarning, "LoadBalancersNotDrained", "load-balancers", msg)
	case lbdrain.Unknown:
		c.report(w, corev1.EventTypeWarning, "LoadBalancersUnknown", "load-balancers",
			fmt.Sprintf("cannot read target groups (%v; elasticloadbalancing:DescribeTargetGroups and DescribeTargetHealth not allowed?): completing without waiting for load balancers", o.Err))
	}
	return nil
}
