package controller

import (
	"context"
	"slices"
	"time"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/message"
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
	m := &messageWork{receipt: msg.Receipt, receiveCount: msg.ReceiveCount, pending: 1} // 1 until every event is handed off
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
			c.startAction(e, m)
			continue
		}
		node, ok := c.resolve(ctx, e.InstanceID)
		if !ok && e.Kind == event.LifecycleTerminate && e.Lifecycle != nil && e.Lifecycle.Token != "" && c.ASG != nil {
			// A terminate action of an instance that is not a node:
			// completed for groups this cluster owns, left otherwise.
			c.mu.Lock()
			m.pending++
			c.mu.Unlock()
			c.startAction(e, m)
			continue
		}
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
		delay := time.Duration(-1) // failed: back when its visibility ends
		if m.leave && !m.failed {
			delay = handBackDelay(m.receiveCount)
		}
		if c.Acker != nil {
			if err := c.Acker.Release(ctx, m.receipt, delay); err != nil {
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

// Handing a message back for another cluster (--unknown-instance=leave):
// after handBackFirst, doubling with each receive up to handBackMax. The
// other cluster's lifeboat gets a Spot notice within seconds, and a message
// no cluster claims does not loop hot until its retention ends.
const (
	handBackFirst = 2 * time.Second
	handBackMax   = 2 * time.Minute
)

func handBackDelay(receiveCount int) time.Duration {
	d := handBackFirst
	for i := 1; i < receiveCount && d < handBackMax; i++ {
		d *= 2
	}
	return min(d, handBackMax)
}
