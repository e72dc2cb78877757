// Package controller carries out plans: for each node it serializes the
// work (one drain in flight per node, whatever arrives), cordons and taints,
// drains, heartbeats and completes lifecycle actions, and reports every
// outcome in one place. Whoever submits work may attach an opaque Ticket;
// the controller hands it back on Settled once that work is settled (the
// queue intake then acknowledges its message).
//
// It owns the per-node state machine. It must not parse messages (package
// message), know about queues (package intake), decide policy (package
// plan) or call APIs directly (packages drain and asg do).
package controller

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notify"
	"lifeboat.dev/lifeboat/internal/plan"
)

// Node annotations besides those of package drain.
const (
	// AnnotationDrained records when lifeboat finished a node.
	AnnotationDrained = "lifeboat.io/drained"
	// AnnotationDoneEvents holds the JSON list of the IDs of the last events
	// lifeboat finished on the node (at most maxDoneEvents), so that a
	// message redelivered after a restart (lifeboat died between finishing
	// the node and deleting the message) is recognised as done.
	AnnotationDoneEvents = "lifeboat.io/done-events"
)

type nodeDrainer interface {
	Cordon(ctx context.Context, node string, taintKeys []string, reason string, annotations map[string]string) (bool, error)
	Uncordon(ctx context.Context, node, taintPrefix string, annotations []string) (bool, error)
	Drain(ctx context.Context, node string, deadline drain.Deadline, progress func(drain.Progress)) (drain.Result, error)
	SetAnnotations(ctx context.Context, node string, annotations map[string]string) error
	// UpdateAnnotations and ExpireCordon decide on the object they write
	// (a read-modify-write with a resourceVersion precondition).
	UpdateAnnotations(ctx context.Context, node string, update func(current map[string]string) map[string]string) error
	ExpireCordon(ctx context.Context, node, taintPrefix, key string, annotations []string) (other string, changed bool, err error)
}

type lifecycleAPI interface {
	Hook(ctx context.Context, group, hook string) (lifecycle.Hook, error)
	Complete(ctx context.Context, instanceID string, a event.LifecycleAction, result lifecycle.Result) error
	KeepAlive(ctx context.Context, instanceID string, a event.LifecycleAction, interval *lifecycle.Interval, until time.Time, beat func(error)) error
	Owned(ctx context.Context, group string) (bool, error)
}

// notifier is told, without blocking, about each node's interruption once
// when it is received and once when it is finished.
type notifier interface {
	Notify(n notify.Notification)
}

// Ticket identifies submitted work to whoever submitted it; the controller
// only hands it back (Settled). NoTicket: nothing to hand back.
type Ticket uint64

// NoTicket is the zero Ticket: work nobody waits for (IMDS mode, work
// resumed from a node's annotations).
const NoTicket Ticket = 0

// Outcome says how submitted work ended.
type Outcome int

const (
	// Done: carried out, or nothing was left to do.
	Done Outcome = iota + 1
	// Failed: not carried out; it is retried when it is submitted again.
	Failed
	// Foreign: about a group of another cluster; leave it to its owner.
	Foreign
)

func (o Outcome) String() string {
	switch o {
	case Done:
		return "done"
	case Failed:
		return "failed"
	case Foreign:
		return "foreign"
	}
	return "unknown"
}

// Settlement hands a Ticket back with the outcome of its work.
type Settlement struct {
	Ticket  Ticket
	Outcome Outcome
}

// settledBuffer bounds the settlements not yet read before the controller
// waits for its reader.
const settledBuffer = 1024

// Options configure a Controller.
type Options struct {
	Policy                 plan.Policy
	HeartbeatInterval      time.Duration
	DeadlineMargin         time.Duration
	LifecycleTimeoutResult lifecycle.Result
	LaunchReadyTimeout     time.Duration
	LaunchTimeoutResult    lifecycle.Result
	// RetryBackoff is the first delay before a failed node step is retried.
	RetryBackoff time.Duration
	// CompleteLifecycleDelay is waited after a drain before its terminate
	// actions are completed (0: none).
	CompleteLifecycleDelay time.Duration
	// RebalanceCordonExpiry, if positive, uncordons a node cordoned for a
	// rebalance recommendation that long after, unless an interruption
	// followed.
	RebalanceCordonExpiry time.Duration
	// HeartbeatUntil caps the heartbeats of a terminate action, counted
	// from the action's start (0: until the hook's global timeout).
	HeartbeatUntil time.Duration
	// CordonAnnotations, if set, returns annotations to set on the node
	// together with the cordon, given the events the plan acts on (IMDS
	// mode: the reboot-maintenance marker); nil: none.
	CordonAnnotations func(node string, due []event.Event) map[string]string
	// UndoAnnotations are removed from the node, with the events
	// annotation, when a cancellation undoes lifeboat's cordon (the
	// reboot-maintenance marker: that maintenance will not happen); nil:
	// none.
	UndoAnnotations []string
	// VolumeDetachTimeout bounds the wait for a node's VolumeAttachments to
	// go before its terminate actions are completed with CONTINUE (0: no
	// wait; Deps.Volumes nil: no wait).
	VolumeDetachTimeout time.Duration
}

// Deps are the collaborators of a Controller.
type Deps struct {
	Nodes    *nodes.Index
	Drainer  nodeDrainer
	ASG      lifecycleAPI // nil: lifecycle actions are not touched
	Recorder kube.EventRecorder
	Notifier notifier          // nil: no notifications
	Forecast forecastSource    // nil: no drain forecast
	Volumes  volumeAttachments // nil: terminate actions are completed without waiting for volumes
	// LoadBalancers, if set, holds terminate actions until no ELBv2 target
	// group holds the node (--wait-for-load-balancers).
	LoadBalancers loadBalancers
	Kubelet       kubeletShutdown // nil: drains work to AWS's deadline (--plan-with-kubelet-shutdown off)
	Metrics       *metrics.Metrics
	Clock         clock.WithTicker
	Log           *slog.Logger

	// DaemonSets, after a drain for terminate actions, stops the node's
	// opted-in DaemonSet pods before CONTINUE; nil: they are left.
	DaemonSets daemonSetStopper
}

// Controller is lifeboat's per-node state machine.
type Controller struct {
	Deps
	o Options

	mu          sync.Mutex
	ctx         context.Context
	spawn       func(func())
	started     chan struct{}
	work        map[string]*nodeWork   // by node name
	launches    map[string]*actionWork // by event ID (launches, terminations of non-nodes)
	done        map[string]time.Time   // finished event IDs
	clamped     map[string]bool        // hooks whose too long heartbeat interval was reported
	completions completions            // lifecycle actions this process completed
	settled     chan Settlement
	cordons     *cordonGate
	wg          sync.WaitGroup
}

// New returns a Controller; call Run before submitting work.
func New(d Deps, o Options) *Controller {
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = time.Second
	}
	return &Controller{Deps: d, o: o, started: make(chan struct{}), settled: make(chan Settlement, settledBuffer), cordons: newCordonGate(),
		work: map[string]*nodeWork{}, launches: map[string]*actionWork{}, done: map[string]time.Time{}, clamped: map[string]bool{}}
}

// Run starts the controller: it waits for the node cache, resumes the work
// recorded on nodes by an earlier run, and returns when ctx ends and all
// node work has stopped.
func (c *Controller) Run(ctx context.Context) error {
	if err := c.Nodes.WaitSynced(ctx); err != nil {
		return err
	}
	unwatch, err := c.watchNodeDeletions()
	if err != nil {
		return err
	}
	defer unwatch()
	c.mu.Lock()
	c.ctx = ctx
	c.spawn = func(f func()) {
		c.wg.Add(1)
		go func() { defer c.wg.Done(); f() }()
	}
	c.mu.Unlock()
	c.resume()
	c.resumeExpiries()
	close(c.started)
	<-ctx.Done()
	c.wg.Wait()
	return nil
}

// Started is closed once Run has resumed earlier work and accepts new work.
func (c *Controller) Started() <-chan struct{} { return c.started }

// Settled hands back the Tickets of submitted work as it is settled. Read
// it while work is submitted with Tickets: the controller waits when
// settledBuffer settlements are unread.
func (c *Controller) Settled() <-chan Settlement { return c.settled }

// settle hands a ticket back (not on shutdown: what is unsettled then is
// submitted again by whoever submitted it).
func (c *Controller) settle(t Ticket, o Outcome) {
	if t == NoTicket {
		return
	}
	select {
	case c.settled <- Settlement{Ticket: t, Outcome: o}:
	case <-c.ctx.Done():
	}
}

// resume restarts the work recorded in node annotations (after a crash or
// a leader change).
func (c *Controller) resume() {
	for _, n := range c.Nodes.List() {
		raw := n.Annotations[drain.AnnotationEvents]
		if raw == "" {
			continue
		}
		var evs []event.Event
		if err := json.Unmarshal([]byte(raw), &evs); err != nil {
			c.Log.Warn("ignoring unreadable events annotation", "node", n.Name, "error", err.Error())
			continue
		}
		c.Log.Info("resuming work recorded on node", "node", n.Name, "events", len(evs))
		c.submit(n.Name, nodes.InstanceID(n.Spec.ProviderID), time.Time{}, evs, NoTicket)
	}
}

// SubmitNode hands events about one node (IMDS mode) to the controller.
// Events already finished are ignored, like a redelivered message: those
// this process finished, and those recorded done on the node by an earlier
// one (the metadata still lists a rebalance recommendation after a restart;
// acting again would undo an operator's uncordon).
func (c *Controller) SubmitNode(node string, evs []event.Event) {
	for _, e := range evs {
		c.Metrics.EventsReceived.WithLabelValues(string(e.Source), string(e.Kind)).Inc()
	}
	if len(evs) > 0 {
		c.Submit(node, evs[0].InstanceID, time.Time{}, evs, NoTicket)
	}
}

// Submit hands events about one node to the controller, which works on them
// in the node's goroutine; sent, if not zero, is when the signal was sent.
// Events already finished are dropped: those this process finished, and
// those recorded done on the node by an earlier one. t is handed back on
// Settled when the node's work is done (at once when nothing is left).
func (c *Controller) Submit(node, instanceID string, sent time.Time, evs []event.Event, t Ticket) {
	<-c.started
	doneOnNode := c.doneOnNode(node)
	fresh := make([]event.Event, 0, len(evs))
	for _, e := range evs {
		if !c.isDone(e.ID) && !slices.Contains(doneOnNode, e.ID) {
			fresh = append(fresh, e)
		}
	}
	if len(fresh) == 0 {
		c.settle(t, Done)
		return
	}
	c.submit(node, instanceID, sent, fresh, t)
}

// SubmitAction hands the controller a lifecycle action that is no node's
// work: a launch (F1), or a termination of an instance that is not a node.
// t is handed back on Settled when it is settled.
func (c *Controller) SubmitAction(e event.Event, t Ticket) {
	<-c.started
	if c.isDone(e.ID) {
		c.settle(t, Done)
		return
	}
	c.startAction(e, t)
}

func (c *Controller) isDone(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.done[id]
	return ok
}

// submit merges events into the node's work and starts or wakes its
// goroutine.
func (c *Controller) submit(node, instanceID string, sent time.Time, evs []event.Event, t Ticket) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.work[node]
	if !ok {
		w = &nodeWork{name: node, instanceID: instanceID, events: map[string]event.Event{}, firstSeen: c.Clock.Now(),
			wake: make(chan struct{}, 1), beats: map[string]*beat{}, reported: map[string]bool{},
			notified: map[notify.Phase]bool{}, heartbeats: c.heartbeatsOnNode(node)}
		c.work[node] = w
		w.gated = true
		c.cordons.add()
		c.Metrics.NodesInFlight.Inc()
		c.spawn(func() { c.runNode(c.ctx, w) })
	}
	if t != NoTicket {
		w.tickets = append(w.tickets, t)
	}
	if !sent.IsZero() && sent.Before(w.firstSeen) {
		w.firstSeen = sent
	}
	changed := false
	for _, e := range evs {
		if _, known := w.events[e.ID]; !known {
			w.events[e.ID] = e
			changed = true
		}
	}
	if changed {
		wake(w)
	}
}

func (e errWait) Error() string { return "waiting until " + e.until.String() }
