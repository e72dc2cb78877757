package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/drainreport"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/notify"
	"lifeboat.dev/lifeboat/internal/plan"
)

// nodeWork is the state of one node lifeboat is working on.
type nodeWork struct {
	name       string
	instanceID string
	events     map[string]event.Event
	tickets    []Ticket
	firstSeen  time.Time
	wake       chan struct{}
	beats      map[string]*beat // heartbeat loops by action (event.LifecycleAction.Key)
	reported   map[string]bool  // Event reasons already reported
	notified   map[notify.Phase]bool
	gated      bool       // counted in c.cordons until its first cordon is done
	heartbeats int        // lifecycle heartbeats that got through (lifeboat status)
	noteMu     sync.Mutex // serializes the writes of heartbeats to the node
	pods       []string   // pods the drains evicted (namespace/name), for the finished notification
	// drains is the account of the work's drains (only its goroutine
	// touches it): a drain cut short and the next one add up.
	drains drainreport.Work
}

// cordoned releases the node's place in the cordon gate (once).
func (c *Controller) cordoned(w *nodeWork) {
	c.mu.Lock()
	gated := w.gated
	w.gated = false
	c.mu.Unlock()
	if gated {
		c.cordons.done()
	}
}

// snapshot returns the node's events (sorted by ID for determinism) and
// takes their wake under the lock submit adds events and wakes under: a
// wake left after it is for events it did not take.
func (c *Controller) snapshot(w *nodeWork) []event.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-w.wake:
	default:
	}
	evs := make([]event.Event, 0, len(w.events))
	for _, e := range w.events {
		evs = append(evs, e)
	}
	slices.SortFunc(evs, func(a, b event.Event) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return evs
}

// errWait means the node has nothing due before the given time.
type errWait struct{ until time.Time }

// runNode is the only goroutine that acts on a node: one plan, one drain in
// flight at a time. New events wake it; it retries failures with backoff
// until it succeeds or the controller stops.
func (c *Controller) runNode(ctx context.Context, w *nodeWork) {
	backoff := c.o.RetryBackoff
	for {
		evs := c.snapshot(w) // with their wake
		waiting, err := c.reconcile(ctx, w, evs)
		var wait errWait
		switch {
		case err == nil:
			if c.finish(ctx, w, evs, waiting) {
				return
			}
			continue // new events arrived meanwhile, or some wait for their time
		case ctx.Err() != nil:
			c.abandon(w)
			return
		case errors.As(err, &wait):
			t := c.Clock.NewTimer(max(wait.until.Sub(c.Clock.Now()), 0))
			select {
			case <-ctx.Done():
				t.Stop()
				c.abandon(w)
				return
			case <-w.wake:
			case <-t.C():
			}
			t.Stop()
			continue
		case errors.Is(err, errRestart):
			continue
		case errors.Is(err, drain.ErrNodeGone):
			if err = c.nodeGone(ctx, w, evs); err == nil {
				if c.finish(ctx, w, evs, nil) {
					return
				}
				continue
			}
		}
		c.report(w, corev1.EventTypeWarning, "Failed", "failed", fmt.Sprintf("will retry in %s: %v", backoff, err))
		if backoff >= failedNotifyAfter {
			// Still retried, but it has been failing for a while: tell people once.
			c.notifyOnce(w, notify.PhaseFailed, plan.For(evs, c.o.Policy, c.Clock.Now()), err.Error())
		}
		select {
		case <-ctx.Done():
			c.abandon(w)
			return
		case <-w.wake:
		case <-c.Clock.After(backoff):
		}
		backoff = min(2*backoff, time.Minute)
	}
}

// nodeGone ends the work of a node that no longer exists (deleted when its
// instance terminated, or by someone else): nothing is left to cordon or
// drain, and retrying would hold its messages forever. The pods a drain
// cut short left on it died with the instance: a Warning names them. Its
// terminate lifecycle actions are completed with CONTINUE (a repeat
// answers "No active Lifecycle Action", which counts as done).
func (c *Controller) nodeGone(ctx context.Context, w *nodeWork, evs []event.Event) error {
	p := plan.For(evs, c.o.Policy, c.Clock.Now())
	c.countEvictions(w.drains.End())
	r := drainreport.Compose(drainreport.NodeGone, w.drains.Result())
	c.reportOnce(w, r.Reason, r.Type, "drain", r.Message, r.LogAttrs()...)
	return c.completeAll(ctx, w, p.Lifecycle, lifecycle.Continue)
}

// errRestart means new events arrived mid-drain: plan again.
var errRestart = errors.New("new events arrived: planning again")

// reconcile carries out the plan for the node's events once. It returns the
// IDs of the events the plan left waiting for their time: carrying it out
// settled every other event.
func (c *Controller) reconcile(ctx context.Context, w *nodeWork, evs []event.Event) ([]string, error) {
	// Heartbeats first: nothing below may leave a lifecycle action without
	// them. They also learn the hook's deadline the plan needs.
	for _, a := range plan.For(evs, c.o.Policy, c.Clock.Now()).Lifecycle {
		c.startHeartbeats(ctx, w, a, evs)
	}
	evs = c.withLifecycleDeadlines(w, evs)
	now := c.Clock.Now()
	p := plan.For(evs, c.o.Policy, now)
	persisted, err := persist(evs)
	if err != nil {
		return nil, err
	}
	if !p.Act || p.Undo {
		c.cordoned(w) // nothing to cordon now
	}
	if !p.Act {
		if p.NotBefore.IsZero() {
			return nil, nil
		}
		// Remember the future change on the node: the message that
		// announced it will not outlive the queue's retention.
		if err := c.Drainer.SetAnnotations(ctx, w.name, map[string]string{drain.AnnotationEvents: persisted}); err != nil {
			return nil, err
		}
		c.reportOnce(w, "ChangeScheduled", corev1.EventTypeNormal, "schedule", fmt.Sprintf("scheduled change: acting at %s", fmtDeadline(p.NotBefore)))
		return nil, errWait{until: p.NotBefore}
	}
	if p.Undo {
		c.mu.Lock()
		delete(w.reported, reasonCordoned) // a cordon after the undo is reported again
		c.mu.Unlock()
		return p.Waiting, c.undo(ctx, w)
	}
	c.reportOnce(w, "InterruptionReceived", corev1.EventTypeNormal, "receive", received(evs, p))
	start := c.Clock.Now()
	annotations := map[string]string{drain.AnnotationEvents: persisted}
	if c.o.CordonAnnotations != nil {
		maps.Copy(annotations, c.o.CordonAnnotations(w.name, dueEvents(evs, p)))
	}
	if !c.cordons.begin(ctx) {
		return nil, ctx.Err()
	}
	changed, err := c.Drainer.Cordon(ctx, w.name, p.TaintKeys, string(p.Reason), annotations)
	c.cordons.end()
	c.cordoned(w)
	if err != nil {
		c.Metrics.Actions.WithLabelValues("cordon", "error").Inc()
		return nil, err
	}
	if changed {
		c.cordonChanged(w, p, start)
	}
	c.notifyOnce(w, notify.PhaseReceived, p, "")
	if !p.Drain {
		return p.Waiting, nil
	}
	if c.LoadBalancers != nil && len(p.Lifecycle) > 0 {
		c.LoadBalancers.Note(ctx, w.name) // IP targets are the IPs of the pods the drain evicts
	}
	return p.Waiting, c.drain(ctx, w, c.withKubeletShutdown(ctx, w, evs, p))
}

// reasonCordoned is the Event reason of a node cordoned and tainted.
const reasonCordoned = "Cordoned"

// cordonChanged records a cordon write that changed the node. The first
// of a piece of work is the cordon: counted, timed and reported
// (Cordoned). A plan made again for the same work (a new event mid-drain)
// writes again when it adds a taint or changes the events annotation:
// that is logged only, with the taints the node now has from lifeboat.
func (c *Controller) cordonChanged(w *nodeWork, p plan.Plan, start time.Time) {
	c.mu.Lock()
	again := w.reported[reasonCordoned]
	c.mu.Unlock()
	if again {
		c.Log.Info("cordon updated", "node", w.name, "instanceID", w.instanceID, "reason", string(p.Reason), "taints", p.TaintKeys)
		return
	}
	c.Metrics.Actions.WithLabelValues("cordon", "ok").Inc()
	c.Metrics.ActionDuration.WithLabelValues("cordon").Observe(c.Clock.Since(start).Seconds())
	c.Metrics.ToCordoned.WithLabelValues(string(p.Reason)).Observe(c.Clock.Since(w.firstSeen).Seconds())
	c.report(w, corev1.EventTypeNormal, reasonCordoned, "cordon", fmt.Sprintf("%s: cordoned and tainted %v", p.Reason, p.TaintKeys))
}

// finish records a successful reconcile: the events it settled (all but
// those waiting for their time) are done. If no new event arrived meanwhile
// and none waits, it retires the node's work, acknowledges its messages and
// reports true.
func (c *Controller) finish(ctx context.Context, w *nodeWork, evs []event.Event, waiting []string) bool {
	c.mu.Lock()
	if len(w.events) != len(evs) {
		c.mu.Unlock()
		return false
	}
	now := c.Clock.Now()
	if len(waiting) > 0 {
		c.settleEvents(ctx, w, evs, waiting, now)
		return false
	}
	c.mu.Unlock()
	// The node's record is written while this goroutine still owns the
	// node: work submitted meanwhile joins w (and is planned again below),
	// never starts beside it to have its record cleared by this write.
	expires := c.rebalanceExpiry(evs, now)
	written := c.recordFinished(ctx, w, evs, now, expires)
	c.mu.Lock()
	if len(w.events) != len(evs) {
		c.mu.Unlock()
		return false // new events: the next plan records them again
	}
	for _, e := range evs {
		c.done[e.ID] = now
	}
	c.pruneDone(now)
	delete(c.work, w.name)
	for _, b := range w.beats {
		b.stop()
	}
	tickets := w.tickets
	c.mu.Unlock()
	c.Metrics.NodesInFlight.Dec()
	c.cordoned(w)
	if written && !expires.IsZero() {
		c.spawn(func() { c.expireRebalance(c.ctx, w.name, expires) })
	}
	if w.notified[notify.PhaseReceived] {
		c.notifyOnce(w, notify.PhaseFinished, plan.For(evs, c.o.Policy, now), "")
	}
	for _, t := range tickets {
		c.settle(t, Done)
	}
	return true
}

// recordFinished records on the node that evs are done: it forgets their
// events (the cordon and taints stay), adds their IDs to the done list
// (read from the node written, not the cache) and keeps the rebalance
// expiry appointment, if any. It reports whether the write succeeded.
func (c *Controller) recordFinished(ctx context.Context, w *nodeWork, evs []event.Event, now, expires time.Time) bool {
	if len(evs) == 0 {
		return false
	}
	err := c.Drainer.UpdateAnnotations(ctx, w.name, func(cur map[string]string) map[string]string {
		ann := map[string]string{drain.AnnotationEvents: "", AnnotationDrained: now.UTC().Format(time.RFC3339),
			AnnotationDoneEvents: doneList(cur, evs)}
		if !expires.IsZero() {
			ann[AnnotationRebalanceExpires] = expires.UTC().Format(time.RFC3339)
		}
		return ann
	})
	if err != nil && !errors.Is(err, drain.ErrNodeGone) {
		c.Log.Warn("clearing node events annotation failed", "node", w.name, "error", err.Error())
	}
	return err == nil
}

// settleEvents records the events a reconcile carried out as done while others
// wait for their time (a scheduled change ahead): those stay the node's
// work, and what is reported for them is reported afresh when they come
// due. Called with c.mu held; it releases it.
func (c *Controller) settleEvents(ctx context.Context, w *nodeWork, evs []event.Event, waiting []string, now time.Time) {
	var settled []event.Event
	for _, e := range evs {
		if !slices.Contains(waiting, e.ID) {
			settled = append(settled, e)
			c.done[e.ID] = now
			delete(w.events, e.ID)
		}
	}
	notified := w.notified[notify.PhaseReceived]
	c.mu.Unlock()
	if notified {
		c.notifyOnce(w, notify.PhaseFinished, plan.For(settled, c.o.Policy, now), "")
	}
	c.mu.Lock()
	w.reported, w.notified = map[string]bool{}, map[notify.Phase]bool{}
	w.drains = drainreport.Work{}
	c.mu.Unlock()
	if len(settled) == 0 {
		return
	}
	err := c.Drainer.UpdateAnnotations(ctx, w.name, func(cur map[string]string) map[string]string {
		return map[string]string{AnnotationDoneEvents: doneList(cur, settled)}
	})
	if err != nil && !errors.Is(err, drain.ErrNodeGone) {
		c.Log.Warn("recording done events failed", "node", w.name, "error", err.Error())
	}
}

// abandon drops a node's work on shutdown: its events stay on the node
// (the next run resumes them) and its tickets are not handed back (the
// queue source hands unsettled messages back when it stops).
func (c *Controller) abandon(w *nodeWork) {
	c.mu.Lock()
	delete(c.work, w.name)
	for _, b := range w.beats {
		b.stop()
	}
	c.mu.Unlock()
	c.Metrics.NodesInFlight.Dec()
	c.cordoned(w)
}

// pruneDone forgets finished events after a day. Called with c.mu held.
func (c *Controller) pruneDone(now time.Time) {
	if len(c.done) < 10000 {
		return
	}
	for id, t := range c.done {
		if now.Sub(t) > 24*time.Hour {
			delete(c.done, id)
		}
	}
}

// persist encodes the events lifeboat must remember across restarts.
func persist(evs []event.Event) (string, error) {
	keep := make([]event.Event, 0, len(evs))
	for _, e := range evs {
		if e.Kind != event.LifecycleLaunch {
			keep = append(keep, e)
		}
	}
	if len(keep) > maxPersistedEvents {
		keep = keep[len(keep)-maxPersistedEvents:]
	}
	b, err := json.Marshal(keep)
	if err != nil {
		return "", fmt.Errorf("encoding node events: %w", err)
	}
	return string(b), nil
}

// maxPersistedEvents bounds the events kept in a node's annotation.
const maxPersistedEvents = 32

// failedNotifyAfter: a node whose step has failed until the retry backoff
// reached this (about five failures in a row) gets a "failed" notification.
const failedNotifyAfter = 30 * time.Second
