package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/asg"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/message"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/plan"
	"lifeboat.dev/lifeboat/internal/source/sqs"
)

// HandleMessage is the queue-mode intake: it parses a message, resolves each
// event's node, deduplicates, and hands the work to the node goroutines. It
// returns quickly; the message is acknowledged when all its work is done.
func (c *Controller) HandleMessage(ctx context.Context, msg sqs.Message) {
	<-c.started
	res, err := message.Parse(msg.Body)
	if err != nil {
		c.Metrics.MessagesRejected.WithLabelValues(message.Reason(err)).Inc()
		c.Log.Warn("deleting malformed message", "messageID", msg.MessageID, "reason", message.Reason(err), "error", err.Error())
		c.ack(ctx, msg.Receipt)
		return
	}
	if len(res.Events) == 0 {
		c.Metrics.MessagesIgnored.WithLabelValues(res.Ignored).Inc()
		c.Log.Debug("deleting irrelevant message", "messageID", msg.MessageID, "reason", res.Ignored)
		c.ack(ctx, msg.Receipt)
		return
	}
	m := &messageWork{receipt: msg.Receipt, pending: 1} // 1 until every event is handed off
	byNode := map[string][]event.Event{}
	instanceOf := map[string]string{}
	for _, e := range res.Events {
		c.Metrics.EventsReceived.WithLabelValues(string(e.Source), string(e.Kind)).Inc()
		if c.isDone(e.ID) {
			continue
		}
		if e.Kind == event.LifecycleLaunch {
			c.mu.Lock()
			m.pending++
			c.mu.Unlock()
			c.startLaunch(e, m)
			continue
		}
		node, ok := c.resolve(ctx, e.InstanceID)
		if !ok {
			c.Metrics.UnknownInstance.Inc()
			c.Log.Info("event for an instance that is not a node of this cluster", "instanceID", e.InstanceID, "eventID", e.ID, "kind", e.Kind, "policy", c.o.UnknownInstance)
			if c.o.UnknownInstance == config.UnknownLeave {
				m.leave = true
			}
			continue
		}
		if slices.Contains(c.doneOnNode(node), e.ID) {
			continue // finished by an earlier run; its message outlived it
		}
		byNode[node] = append(byNode[node], e)
		instanceOf[node] = e.InstanceID
	}
	for node, evs := range byNode {
		c.mu.Lock()
		m.pending++
		c.mu.Unlock()
		c.submit(node, instanceOf[node], evs, m)
	}
	c.messageDone(ctx, m, false)
}

// resolve finds the node of an instance: providerID index first, then the
// configured private-DNS lookup.
func (c *Controller) resolve(ctx context.Context, instanceID string) (string, bool) {
	if n, ok := c.Nodes.ByInstance(instanceID); ok {
		return n.Name, true
	}
	if c.o.Resolve == nil {
		return "", false
	}
	name, err := c.o.Resolve(ctx, instanceID)
	if err != nil || name == "" {
		return "", false
	}
	if _, ok := c.Nodes.ByName(name); !ok {
		return "", false
	}
	return name, true
}

func (c *Controller) isDone(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.done[id]
	return ok
}

// messageDone counts one piece of a message's work as finished; the last
// piece deletes the message (or releases it, when it must be left for
// another cluster or some work failed).
func (c *Controller) messageDone(ctx context.Context, m *messageWork, failed bool) {
	c.mu.Lock()
	m.pending--
	m.failed = m.failed || failed
	last := m.pending == 0
	c.mu.Unlock()
	if !last {
		return
	}
	if m.leave || m.failed {
		if c.Acker != nil {
			if err := c.Acker.Release(ctx, m.receipt, -1); err != nil {
				c.Log.Warn("releasing message failed", "messageID", m.receipt.MessageID, "error", err.Error())
			}
		}
		return
	}
	c.ack(ctx, m.receipt)
}

func (c *Controller) ack(ctx context.Context, r sqs.Receipt) {
	if c.Acker == nil || r.ReceiptHandle == "" {
		return
	}
	if err := c.Acker.Ack(ctx, r); err != nil {
		// The message comes back after its visibility timeout; its events
		// are recognised as done then.
		c.Log.Warn("deleting message failed", "messageID", r.MessageID, "error", err.Error())
	}
}

// launchWork is one launch lifecycle action being followed.
type launchWork struct {
	e    event.Event
	msgs []*messageWork
}

// startLaunch follows a launch lifecycle action (F1): into the warm pool it
// is completed at once; into the group it is completed once the instance's
// Node is Ready, with heartbeats meanwhile, or gets the timeout result.
func (c *Controller) startLaunch(e event.Event, m *messageWork) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.launches[e.ID]; ok {
		l.msgs = append(l.msgs, m)
		return
	}
	l := &launchWork{e: e, msgs: []*messageWork{m}}
	c.launches[e.ID] = l
	c.spawn(func() { c.runLaunch(c.ctx, l) })
}

func (c *Controller) runLaunch(ctx context.Context, l *launchWork) {
	e := l.e
	failed, leave := false, false
	err := c.launch(ctx, e)
	switch {
	case err == nil:
	case errors.Is(err, errNotOurs):
		c.Metrics.UnknownInstance.Inc()
		leave = c.o.UnknownInstance == config.UnknownLeave
	case ctx.Err() != nil:
		failed = true
	default:
		failed = true
		c.Log.Warn("launch lifecycle action failed", "instanceID", e.InstanceID, "eventID", e.ID, "error", err.Error())
	}
	c.mu.Lock()
	delete(c.launches, e.ID)
	if !failed && !leave {
		c.done[e.ID] = c.Clock.Now()
	}
	msgs := l.msgs
	for _, m := range msgs {
		m.leave = m.leave || leave
	}
	c.mu.Unlock()
	for _, m := range msgs {
		c.messageDone(ctx, m, failed)
	}
}

var errNotOurs = errors.New("auto scaling group is not this cluster's")

func (c *Controller) launch(ctx context.Context, e event.Event) error {
	if c.ASG == nil || e.Lifecycle == nil {
		return nil
	}
	a := *e.Lifecycle
	owned, err := c.ASG.Owned(ctx, a.GroupName)
	if err != nil {
		return err
	}
	if !owned {
		return errNotOurs
	}
	log := c.Log.With("instanceID", e.InstanceID, "eventID", e.ID, "group", a.GroupName, "origin", a.Origin, "destination", a.Destination)
	if a.Destination == event.PlaceWarmPool {
		// Into the warm pool: the instance does not join the cluster now.
		return c.completeLaunch(ctx, log, e, "CONTINUE", "entering the warm pool")
	}
	h, err := c.ASG.Hook(ctx, a.GroupName, a.HookName)
	if err != nil {
		return err
	}
	started := e.Time
	if started.IsZero() {
		started = c.Clock.Now()
	}
	deadline := started.Add(min(c.o.LaunchReadyTimeout, h.GlobalTimeout))
	bctx, stop := context.WithCancel(ctx)
	defer stop()
	c.spawn(func() {
		_ = c.ASG.KeepAlive(bctx, e.InstanceID, a, asg.HeartbeatInterval(c.o.HeartbeatInterval, h), deadline, c.countHeartbeat)
	})
	tick := c.Clock.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if n, ok := c.Nodes.ByInstance(e.InstanceID); ok && nodes.Ready(n) {
			stop()
			if n.Annotations[drain.AnnotationCordoned] == "true" {
				// Back from the warm pool: undo the cordon of its last exit.
				if _, err := c.Drainer.Uncordon(ctx, n.Name, plan.TaintPrefix, []string{drain.AnnotationEvents, AnnotationDrained}); err != nil {
					return err
				}
				c.report(&nodeWork{name: n.Name, instanceID: e.InstanceID, reported: map[string]bool{}}, corev1.EventTypeNormal, "Uncordoned", "uncordon", "instance returned from the warm pool")
			}
			return c.completeLaunch(ctx, log, e, "CONTINUE", "node "+n.Name+" is Ready")
		}
		if !c.Clock.Now().Before(deadline) {
			stop()
			return c.completeLaunch(ctx, log, e, c.o.LaunchTimeoutResult, fmt.Sprintf("no Ready node after %s", deadline.Sub(started).Round(time.Second)))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C():
		}
	}
}

func (c *Controller) completeLaunch(ctx context.Context, log interface {
	Info(string, ...any)
}, e event.Event, result, why string) error {
	err := c.ASG.Complete(ctx, e.InstanceID, *e.Lifecycle, result)
	switch {
	case err == nil:
		c.Metrics.LifecycleCalls.WithLabelValues("complete", "ok").Inc()
		log.Info("launch lifecycle action completed", "result", result, "why", why)
		return nil
	case errors.Is(err, asg.ErrNoActiveAction):
		c.Metrics.LifecycleCalls.WithLabelValues("complete", "gone").Inc()
		log.Info("launch lifecycle action already completed or timed out", "why", why)
		return nil
	default:
		c.Metrics.LifecycleCalls.WithLabelValues("complete", "error").Inc()
		return err
	}
}
