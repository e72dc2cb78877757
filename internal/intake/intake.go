// Package intake is queue mode's intake: it turns each message the SQS
// source receives into work for the controller, and acknowledges the
// message at the source once the controller has settled all of it.
//
// A message's journey: source (receive) → Handle (parse, resolve each
// instance's node, apply the unknown-instance policy, submit per node with
// a Ticket) → controller (the node's steps) → Settled → Run (delete the
// message, or hand it back). Nothing here calls back into the controller's
// work or the source's bookkeeping beyond Ack and Release.
//
// It owns the message bookkeeping. It must not plan, drain or call AWS
// beyond acknowledging messages.
package intake

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/message"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/source/sqs"
)

// Source is where messages are acknowledged.
type Source interface {
	Ack(ctx context.Context, r sqs.Receipt) error
	Release(ctx context.Context, r sqs.Receipt, delay time.Duration) error
}

// Controller takes the work and hands its tickets back.
type Controller interface {
	Submit(node, instanceID string, sent time.Time, evs []event.Event, t controller.Ticket)
	SubmitAction(e event.Event, t controller.Ticket)
	Settled() <-chan controller.Settlement
}

// Options configure an Intake.
type Options struct {
	// UnknownInstance: what to do with a message about an instance that is
	// not a node of this cluster (config.UnknownLeave or UnknownDelete).
	UnknownInstance config.UnknownPolicy
	// Lifecycle: lifecycle actions are completed (--complete-lifecycle), so
	// a terminate action of an instance that is not a node goes to the
	// controller, which completes it for groups this cluster owns.
	Lifecycle bool
	// Resolve finds the node name of an instance the providerID index does
	// not know (private DNS lookup); nil disables it.
	Resolve func(ctx context.Context, instanceID string) (string, error)
	// Managed, if set, reports whether an instance carries --managed-tag:
	// a node without it is not lifeboat's, and its events follow
	// UnknownInstance like those of an instance of no node. nil: every
	// node is lifeboat's.
	Managed func(ctx context.Context, instanceID string) (bool, error)
	// Observe, if set, is shown every event about a node of this cluster
	// that lifeboat acts on, before it is submitted (--out-of-service-taint
	// learns instance states from it). It must not block.
	Observe func(event.Event)
}

// Intake is queue mode's intake.
type Intake struct {
	nodes   *nodes.Index
	ctrl    Controller
	src     Source
	metrics *metrics.Metrics
	log     *slog.Logger
	o       Options

	mu      sync.Mutex
	next    controller.Ticket
	tickets map[controller.Ticket]*pending
	acks    sync.WaitGroup
}

// pending is one message whose work is not all settled.
type pending struct {
	msg     sqs.Message
	open    int  // tickets not yet handed back, +1 while Handle submits
	failed  bool // some work failed: the message comes back when its visibility ends
	foreign bool // some of it is another cluster's: hand it back for its owner
}

// New returns an Intake.
func New(index *nodes.Index, ctrl Controller, src Source, m *metrics.Metrics, log *slog.Logger, o Options) *Intake {
	return &Intake{nodes: index, ctrl: ctrl, src: src, metrics: m, log: log, o: o, tickets: map[controller.Ticket]*pending{}}
}

// Handle takes one received message: the source's handler. It returns once
// the work is submitted; the message is acknowledged when it is settled.
func (in *Intake) Handle(ctx context.Context, msg sqs.Message) {
	res, err := message.Parse(msg.Body)
	if err != nil {
		in.metrics.MessagesRejected.WithLabelValues(message.Reason(err)).Inc()
		in.log.Warn("deleting malformed message", "messageID", msg.MessageID, "reason", message.Reason(err), "error", err.Error())
		in.ack(ctx, msg.Receipt)
		return
	}
	if len(res.Events) == 0 {
		in.metrics.MessagesIgnored.WithLabelValues(res.Ignored).Inc()
		in.log.Debug("deleting irrelevant message", "messageID", msg.MessageID, "reason", res.Ignored)
		in.ack(ctx, msg.Receipt)
		return
	}
	p := &pending{msg: msg, open: 1}
	byNode := map[string][]event.Event{}
	instanceOf := map[string]string{}
	for _, e := range res.Events {
		in.metrics.EventsReceived.WithLabelValues(string(e.Source), string(e.Kind)).Inc()
		if e.Kind == event.LifecycleLaunch {
			in.ctrl.SubmitAction(e, in.ticket(p))
			continue
		}
		node, ok := in.resolve(ctx, e.InstanceID)
		switch {
		case ok && in.managed(ctx, e):
			if in.o.Observe != nil {
				in.o.Observe(e)
			}
			byNode[node] = append(byNode[node], e)
			instanceOf[node] = e.InstanceID
		case ok:
			// A node of this cluster without the managed tag: another
			// handler's (NTH's CHECK_TAG_BEFORE_DRAINING), lifecycle
			// action included.
			in.notOurs(p)
		case in.o.Lifecycle && e.Kind == event.LifecycleTerminate && e.Lifecycle != nil && e.Lifecycle.Token != "":
			// A terminate action of an instance that is not a node: the
			// controller completes it for groups this cluster owns.
			in.ctrl.SubmitAction(e, in.ticket(p))
		default:
			in.metrics.UnknownInstance.Inc()
			in.log.Info("event for an instance that is not a node of this cluster", "instanceID", e.InstanceID, "eventID", e.ID, "kind", e.Kind, "policy", in.o.UnknownInstance)
			in.notOurs(p)
		}
	}
	for node, evs := range byNode {
		in.ctrl.Submit(node, instanceOf[node], msg.SentAt, evs, in.ticket(p))
	}
	in.close(ctx, p, controller.Done)
}

// notOurs applies the unknown-instance policy to a piece of p that is not
// lifeboat's: leave hands the message back for its owner; delete lets it
// go with the rest.
func (in *Intake) notOurs(p *pending) {
	if in.o.UnknownInstance == config.UnknownLeave {
		in.mu.Lock()
		p.foreign = true
		in.mu.Unlock()
	}
}

// managedTimeout bounds one managed-tag lookup.
const managedTimeout = 5 * time.Second

// managed reports whether lifeboat acts on the instance of e: always
// without --managed-tag. When the tag cannot be read, it acts: the
// instance is a node of this cluster, and a Spot notice gives two minutes,
// less than the message's return after a failure would leave.
func (in *Intake) managed(ctx context.Context, e event.Event) bool {
	if in.o.Managed == nil {
		return true
	}
	mctx, cancel := context.WithTimeout(ctx, managedTimeout)
	defer cancel()
	ok, err := in.o.Managed(mctx, e.InstanceID)
	if err != nil {
		in.log.Warn("managed tag unreadable; acting on the node of this cluster", "instanceID", e.InstanceID, "eventID", e.ID, "error", err.Error())
		return true
	}
	if !ok {
		in.log.Info("event for a node without the managed tag: not lifeboat's", "instanceID", e.InstanceID, "eventID", e.ID, "kind", e.Kind, "policy", in.o.UnknownInstance)
	}
	return ok
}

// ticket opens a ticket for a piece of p's work.
func (in *Intake) ticket(p *pending) controller.Ticket {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.next++
	in.tickets[in.next] = p
	p.open++
	return in.next
}

// Run acknowledges messages as the controller settles their work, until ctx
// ends; then it waits for the acknowledgements under way.
func (in *Intake) Run(ctx context.Context) error {
	defer in.acks.Wait()
	for {
		select {
		case <-ctx.Done():
			return nil
		case s := <-in.ctrl.Settled():
			in.mu.Lock()
			p, ok := in.tickets[s.Ticket]
			delete(in.tickets, s.Ticket)
			in.mu.Unlock()
			if ok {
				in.close(ctx, p, s.Outcome)
			}
		}
	}
}

// close settles one piece of p's work; the last piece acknowledges the
// message: deleted when all of it was done, handed back when part of it is
// another cluster's, left to come back when some of it failed.
func (in *Intake) close(ctx context.Context, p *pending, o controller.Outcome) {
	in.mu.Lock()
	p.open--
	p.failed = p.failed || o == controller.Failed
	// Work about another cluster's group follows the unknown-instance policy.
	p.foreign = p.foreign || o == controller.Foreign && in.o.UnknownInstance == config.UnknownLeave
	last, failed, foreign := p.open == 0, p.failed, p.foreign
	in.mu.Unlock()
	if !last {
		return
	}
	in.acks.Add(1)
	go func() {
		defer in.acks.Done()
		switch {
		case failed:
			in.release(ctx, p.msg.Receipt, -1)
		case foreign:
			in.release(ctx, p.msg.Receipt, HandBackDelay(p.msg.ReceiveCount))
		default:
			in.ack(ctx, p.msg.Receipt)
		}
	}()
}

// resolve finds the node of an instance: providerID index first, then the
// configured private-DNS lookup.
func (in *Intake) resolve(ctx context.Context, instanceID string) (string, bool) {
	if n, ok := in.nodes.ByInstance(instanceID); ok {
		return n.Name, true
	}
	if in.o.Resolve == nil {
		return "", false
	}
	name, err := in.o.Resolve(ctx, instanceID)
	if err != nil || name == "" {
		return "", false
	}
	if _, ok := in.nodes.ByName(name); !ok {
		return "", false
	}
	return name, true
}

func (in *Intake) ack(ctx context.Context, r sqs.Receipt) {
	if err := in.src.Ack(ctx, r); err != nil {
		// The message comes back after its visibility timeout; its events
		// are recognised as done then.
		in.log.Warn("deleting message failed", "messageID", r.MessageID, "error", err.Error())
	}
}

func (in *Intake) release(ctx context.Context, r sqs.Receipt, delay time.Duration) {
	if err := in.src.Release(ctx, r, delay); err != nil {
		in.log.Warn("releasing message failed", "messageID", r.MessageID, "error", err.Error())
	}
}

// Handing a message back for another cluster (--unknown-instance=leave):
// at once (visibility 0) on the first receive, then after handBackFirst
// for each further receive up to the handBackFlat-th, then doubling up to
// handBackMax. Several clusters share a queue, and which consumer gets a
// message is a lottery each time it becomes visible: a doubling delay from
// the first hand-back would make the owner pay for every receive its
// neighbours won (8 s measured with two clusters), while a Spot notice
// gives two minutes (four default visibility timeouts). SQS counts
// visibility in whole seconds, so 1 s is the shortest delay that lets every
// consumer's long poll take part. A message no cluster claims settles at
// one receive every handBackMax until its retention ends: a few cheap
// requests a minute, never a hot loop.
const (
	handBackFirst = time.Second
	handBackFlat  = 10
	handBackMax   = 10 * time.Second
)

// HandBackDelay is how long a message for another cluster stays hidden
// after its receiveCount-th receive.
func HandBackDelay(receiveCount int) time.Duration {
	if receiveCount <= 1 {
		return 0
	}
	d := handBackFirst
	for i := handBackFlat; i < receiveCount && d < handBackMax; i++ {
		d *= 2
	}
	return min(d, handBackMax)
}
