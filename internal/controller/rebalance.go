package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/plan"
)

// AnnotationRebalanceExpires records when the cordon of a rebalance
// recommendation expires (RFC 3339, --rebalance-cordon-expiry): the node
// is uncordoned then unless an interruption followed. It is on the Node so
// that a restarted lifeboat (or a new leader) keeps the appointment.
const AnnotationRebalanceExpires = "lifeboat.io/rebalance-cordon-expires"

// rebalanceTaint is the taint a rebalance recommendation sets.
var rebalanceTaint = plan.TaintPrefix + string(event.RebalanceRecommendation)

// rebalanceExpiry returns when the cordon set for evs expires: zero
// unless expiry is configured and evs only cordoned for a rebalance
// recommendation.
func (c *Controller) rebalanceExpiry(evs []event.Event, now time.Time) time.Time {
	if c.o.RebalanceCordonExpiry <= 0 || len(evs) == 0 {
		return time.Time{}
	}
	p := plan.For(evs, c.o.Policy, now)
	if p.Reason != event.RebalanceRecommendation || p.Drain || p.Undo {
		return time.Time{}
	}
	return now.Add(c.o.RebalanceCordonExpiry)
}

// resumeExpiries keeps the appointments recorded on the nodes by an
// earlier run.
func (c *Controller) resumeExpiries() {
	for _, n := range c.Nodes.List() {
		if raw := n.Annotations[AnnotationRebalanceExpires]; raw != "" {
			at, err := time.Parse(time.RFC3339, raw)
			if err != nil {
				c.Log.Warn("ignoring unreadable rebalance expiry annotation", "node", n.Name, "value", raw)
				continue
			}
			name := n.Name
			c.spawn(func() { c.expireRebalance(c.ctx, name, at) })
		}
	}
}

// expireRebalance uncordons node at at (and removes lifeboat's taint and
// the annotation), unless meanwhile the node has other lifeboat work: an
// interruption or termination followed, whose cordon stays.
func (c *Controller) expireRebalance(ctx context.Context, node string, at time.Time) {
	missing := 0
	for {
		t := c.Clock.NewTimer(max(at.Sub(c.Clock.Now()), 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		n, ok := c.Nodes.ByName(node)
		if !ok {
			return // the node is gone
		}
		now := c.Clock.Now()
		recorded, err := time.Parse(time.RFC3339, n.Annotations[AnnotationRebalanceExpires])
		switch {
		case err != nil && missing < 3:
			// Not in the cache yet (just written), or removed: look again.
			missing++
			at = now.Add(time.Second)
			continue
		case err != nil:
			return // removed: the appointment was canceled
		case recorded.After(now):
			at = recorded // a later recommendation moved it
			continue
		}
		c.mu.Lock()
		_, busy := c.work[node]
		c.mu.Unlock()
		if busy {
			at = now.Add(c.o.RetryBackoff) // new events: check again once they are handled
			continue
		}
		w := &nodeWork{name: node, instanceID: n.Spec.ProviderID, reported: map[string]bool{}}
		// Decided on the node as it is written, not on the cache: a
		// cordon that landed meanwhile (an interruption followed) stays.
		other, changed, err := c.Drainer.ExpireCordon(ctx, node, plan.TaintPrefix, rebalanceTaint, []string{AnnotationRebalanceExpires})
		switch {
		case err != nil:
			c.Metrics.Actions.WithLabelValues("uncordon", "error").Inc()
			c.Log.Warn("uncordoning after the rebalance cordon expired failed", "node", node, "error", err.Error())
			at = now.Add(c.o.RetryBackoff)
			continue
		case other != "":
			c.Log.Info("rebalance cordon not expired: another interruption followed", "node", node, "taint", other)
		case changed:
			c.Metrics.Actions.WithLabelValues("uncordon", "ok").Inc()
			c.report(w, corev1.EventTypeNormal, "RebalanceCordonExpired", "uncordon",
				fmt.Sprintf("no interruption followed the rebalance recommendation within %s: uncordoned and lifeboat taints removed", c.o.RebalanceCordonExpiry))
		}
		return
	}
}
