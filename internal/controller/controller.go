// Package controller carries out plans: for each node it serializes the
// work (one drain in flight per node, whatever arrives), cordons and taints,
// drains, heartbeats and completes lifecycle actions, acknowledges the
// messages that asked for it, and reports every outcome in one place.
//
// It owns the per-node state machine and the queue-message bookkeeping. It
// must not parse messages (package message), decide policy (package plan) or
// call APIs directly (packages drain, asg and the sources do).
package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/asg"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notify"
	"lifeboat.dev/lifeboat/internal/plan"
	"lifeboat.dev/lifeboat/internal/source/sqs"
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

// maxDoneEvents bounds the event IDs kept in AnnotationDoneEvents.
const maxDoneEvents = 32

// failedNotifyAfter: a node whose step has failed until the retry backoff
// reached this (about five failures in a row) gets a "failed" notification.
const failedNotifyAfter = 30 * time.Second

// maxPersistedEvents bounds the events kept in a node's annotation.
const maxPersistedEvents = 32

type nodeDrainer interface {
	Cordon(ctx context.Context, node string, taintKeys []string, reason string, annotations map[string]string) (bool, error)
	Uncordon(ctx context.Context, node, taintPrefix string, annotations []string) (bool, error)
	Drain(ctx context.Context, node string, deadline time.Time, progress func(drain.Progress)) (drain.Result, error)
	SetAnnotations(ctx context.Context, node string, annotations map[string]string) error
}

type lifecycleAPI interface {
	Hook(ctx context.Context, group, hook string) (asg.Hook, error)
	Complete(ctx context.Context, instanceID string, a event.LifecycleAction, result string) error
	KeepAlive(ctx context.Context, instanceID string, a event.LifecycleAction, interval *asg.Interval, until time.Time, beat func(error)) error
	Owned(ctx context.Context, group string) (bool, error)
}

// notifier is told, without blocking, about each node's interruption once
// when it is received and once when it is finished.
type notifier interface {
	Notify(n notify.Notification)
}

type acker interface {
	Ack(ctx context.Context, r sqs.Receipt) error
	Release(ctx context.Context, r sqs.Receipt, delay time.Duration) error
}

// Options configure a Controller.
type Options struct {
	Policy                 plan.Policy
	UnknownInstance        string // leave | delete
	HeartbeatInterval      time.Duration
	DeadlineMargin         time.Duration
	LifecycleTimeoutResult string
	LaunchReadyTimeout     time.Duration
	LaunchTimeoutResult    string
	// RetryBackoff is the first delay before a failed node step is retried.
	RetryBackoff time.Duration
	// Resolve finds the node name of an instance the providerID index does
	// not know (private DNS lookup); nil disables it.
	Resolve func(ctx context.Context, instanceID string) (string, error)
	// CordonAnnotations, if set, returns annotations to set on the node
	// together with the cordon, given the events the plan acts on (IMDS
	// mode: the reboot-maintenance marker); nil: none.
	CordonAnnotations func(node string, due []event.Event) map[string]string
}

// Deps are the collaborators of a Controller.
type Deps struct {
	Nodes    *nodes.Index
	Drainer  nodeDrainer
	ASG      lifecycleAPI // nil: lifecycle actions are not touched
	Acker    acker        // nil in IMDS mode
	Recorder record.EventRecorder
	Notifier notifier // nil: no notifications
	Metrics  *metrics.Metrics
	Clock    clock.WithTicker
	Log      *slog.Logger
}

// Controller is lifeboat's per-node state machine.
type Controller struct {
	Deps
	o Options

	mu       sync.Mutex
	ctx      context.Context
	spawn    func(func())
	started  chan struct{}
	work     map[string]*nodeWork   // by node name
	launches map[string]*actionWork // by event ID (launches, terminations of non-nodes)
	done     map[string]time.Time   // finished event IDs
	clamped  map[string]bool        // hooks whose too long heartbeat interval was reported
	wg       sync.WaitGroup
}

// New returns a Controller; call Run before submitting work.
func New(d Deps, o Options) *Controller {
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = time.Second
	}
	return &Controller{Deps: d, o: o, started: make(chan struct{}),
		work: map[string]*nodeWork{}, launches: map[string]*actionWork{}, done: map[string]time.Time{}, clamped: map[string]bool{}}
}

// nodeWork is the state of one node lifeboat is working on.
type nodeWork struct {
	name       string
	instanceID string
	events     map[string]event.Event
	msgs       []*messageWork
	firstSeen  time.Time
	wake       chan struct{}
	beats      map[string]*beat // heartbeat loops by token
	reported   map[string]bool  // Event reasons already reported
	notified   map[notify.Phase]bool
}

// messageWork tracks one queue message across the nodes it names.
type messageWork struct {
	receipt      sqs.Receipt
	receiveCount int
	pending      int
	failed       bool
	// leave: the message also names instances of other clusters; release
	// it for its owner instead of deleting it.
	leave bool
}

// Run starts the controller: it waits for the node cache, resumes the work
// recorded on nodes by an earlier run, and returns when ctx ends and all
// node work has stopped.
func (c *Controller) Run(ctx context.Context) error {
	if err := c.Nodes.WaitSynced(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	c.ctx = ctx
	c.spawn = func(f func()) {
		c.wg.Add(1)
		go func() { defer c.wg.Done(); f() }()
	}
	c.mu.Unlock()
	c.resume()
	close(c.started)
	<-ctx.Done()
	c.wg.Wait()
	return nil
}

// Started is closed once Run has resumed earlier work and accepts new work.
func (c *Controller) Started() <-chan struct{} { return c.started }

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
		c.submit(n.Name, nodes.InstanceID(n.Spec.ProviderID), evs, nil)
	}
}

// SubmitNode hands events about one node (IMDS mode) to the controller.
// Events already finished are ignored, like a redelivered message: those
// this process finished, and those recorded done on the node by an earlier
// one (the metadata still lists a rebalance recommendation after a restart;
// acting again would undo an operator's uncordon).
func (c *Controller) SubmitNode(node string, evs []event.Event) {
	<-c.started
	doneOnNode := c.doneOnNode(node)
	fresh := make([]event.Event, 0, len(evs))
	for _, e := range evs {
		c.Metrics.EventsReceived.WithLabelValues(string(e.Source), string(e.Kind)).Inc()
		if !c.isDone(e.ID) && !slices.Contains(doneOnNode, e.ID) {
			fresh = append(fresh, e)
		}
	}
	if len(fresh) > 0 {
		c.submit(node, fresh[0].InstanceID, fresh, nil)
	}
}

// submit merges events into the node's work and starts or wakes its
// goroutine. m, if not nil, is acknowledged when the work is done.
func (c *Controller) submit(node, instanceID string, evs []event.Event, m *messageWork) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.work[node]
	if !ok {
		w = &nodeWork{name: node, instanceID: instanceID, events: map[string]event.Event{}, firstSeen: c.Clock.Now(),
			wake: make(chan struct{}, 1), beats: map[string]*beat{}, reported: map[string]bool{},
			notified: map[notify.Phase]bool{}}
		c.work[node] = w
		c.Metrics.NodesInFlight.Inc()
		c.spawn(func() { c.runNode(c.ctx, w) })
	}
	if m != nil {
		w.msgs = append(w.msgs, m)
		if !m.receipt.SentAt.IsZero() && m.receipt.SentAt.Before(w.firstSeen) {
			w.firstSeen = m.receipt.SentAt
		}
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

// snapshot returns the node's events (sorted by ID for determinism).
func (c *Controller) snapshot(w *nodeWork) []event.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
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

func (e errWait) Error() string { return "waiting until " + e.until.String() }

// runNode is the only goroutine that acts on a node: one plan, one drain in
// flight at a time. New events wake it; it retries failures with backoff
// until it succeeds or the controller stops.
func (c *Controller) runNode(ctx context.Context, w *nodeWork) {
	backoff := c.o.RetryBackoff
	for {
		select {
		case <-w.wake: // consume the wake of the events we are about to plan
		default:
		}
		evs := c.snapshot(w)
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
// drain, and retrying would hold its messages forever. Its terminate
// lifecycle actions are completed with CONTINUE (a repeat answers "No
// active Lifecycle Action", which counts as done).
func (c *Controller) nodeGone(ctx context.Context, w *nodeWork, evs []event.Event) error {
	p := plan.For(evs, c.o.Policy, c.Clock.Now())
	c.reportOnce(w, "NodeGone", corev1.EventTypeNormal, "drain", "node no longer exists: nothing left to drain")
	return c.completeAll(ctx, w, p.Lifecycle, "CONTINUE")
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
		return p.Waiting, c.undo(ctx, w)
	}
	c.reportOnce(w, "InterruptionReceived", corev1.EventTypeNormal, "receive", received(evs, p))
	start := c.Clock.Now()
	annotations := map[string]string{drain.AnnotationEvents: persisted}
	if c.o.CordonAnnotations != nil {
		maps.Copy(annotations, c.o.CordonAnnotations(w.name, dueEvents(evs, p)))
	}
	changed, err := c.Drainer.Cordon(ctx, w.name, p.TaintKeys, string(p.Reason), annotations)
	if err != nil {
		c.Metrics.Actions.WithLabelValues("cordon", "error").Inc()
		return nil, err
	}
	if changed {
		c.Metrics.Actions.WithLabelValues("cordon", "ok").Inc()
		c.Metrics.ActionDuration.WithLabelValues("cordon").Observe(c.Clock.Since(start).Seconds())
		c.Metrics.ToCordoned.WithLabelValues(string(p.Reason)).Observe(c.Clock.Since(w.firstSeen).Seconds())
		c.report(w, corev1.EventTypeNormal, "Cordoned", "cordon", fmt.Sprintf("%s: cordoned and tainted %v", p.Reason, p.TaintKeys))
	}
	c.notifyOnce(w, notify.PhaseReceived, p, "")
	if !p.Drain {
		return p.Waiting, nil
	}
	return p.Waiting, c.drain(ctx, w, p)
}

// drain runs the drain, restarting it when new events arrive, then
// completes the plan's lifecycle actions.
func (c *Controller) drain(ctx context.Context, w *nodeWork, p plan.Plan) error {
	start := c.Clock.Now()
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
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
		c.reportOnce(w, "Draining", corev1.EventTypeNormal, "drain", fmt.Sprintf("%s: draining %d pods (deadline %s)", p.Reason, total, fmtDeadline(p.Deadline)))
	}
	progress := func(pr drain.Progress) {
		pmu.Lock()
		d := pr.Blocked - blocked
		blocked = max(blocked, pr.Blocked)
		pmu.Unlock()
		if d > 0 {
			c.Metrics.Evictions.WithLabelValues("blocked").Add(float64(d))
		}
		draining(pr.Total)
	}
	go func() {
		res, err := c.Drainer.Drain(dctx, w.name, p.Deadline, progress)
		done <- outcome{res, err}
	}()
	var o outcome
	select {
	case o = <-done:
	case <-w.wake:
		cancel()
		<-done
		// Put the wake back for runNode's snapshot and plan again.
		return errRestart
	}
	draining(o.res.Evicted + o.res.ForceDeleted + o.res.Remaining) // no progress: nothing was to evict
	c.Metrics.Evictions.WithLabelValues("evicted").Add(float64(o.res.Evicted))
	c.Metrics.Evictions.WithLabelValues("grace-capped").Add(float64(o.res.GraceCapped))
	c.Metrics.Evictions.WithLabelValues("force-deleted").Add(float64(o.res.ForceDeleted))
	result := c.o.LifecycleTimeoutResult
	switch {
	case o.err == nil:
		result = "CONTINUE"
		c.Metrics.Actions.WithLabelValues("drain", "ok").Inc()
		c.Metrics.ActionDuration.WithLabelValues("drain").Observe(c.Clock.Since(start).Seconds())
		c.Metrics.ToDrained.WithLabelValues(string(p.Reason)).Observe(c.Clock.Since(w.firstSeen).Seconds())
		msg := fmt.Sprintf("drained: %d pods evicted", o.res.Evicted)
		if o.res.GraceCapped > 0 {
			msg += fmt.Sprintf(", %d with grace cut to AWS's deadline", o.res.GraceCapped)
		}
		if o.res.ForceDeleted > 0 {
			msg += fmt.Sprintf(", %d deleted at the deadline (AWS would have killed them)", o.res.ForceDeleted)
		}
		c.report(w, corev1.EventTypeNormal, "Drained", "drain", msg)
	case errors.Is(o.err, drain.ErrDeadline):
		c.Metrics.Actions.WithLabelValues("drain", "deadline").Inc()
		c.report(w, corev1.EventTypeWarning, "DeadlinePassed", "drain", fmt.Sprintf("%v; %d pods remain", o.err, o.res.Remaining))
	default:
		c.Metrics.Actions.WithLabelValues("drain", "error").Inc()
		return o.err
	}
	return c.completeAll(ctx, w, p.Lifecycle, result)
}

// completeAll completes the lifecycle actions and stops their heartbeats.
func (c *Controller) completeAll(ctx context.Context, w *nodeWork, actions []event.LifecycleAction, result string) error {
	if c.ASG == nil {
		return nil
	}
	for _, a := range actions {
		err := c.ASG.Complete(ctx, w.instanceIDFor(), a, result)
		switch {
		case err == nil:
			c.Metrics.LifecycleCalls.WithLabelValues("complete", "ok").Inc()
			c.report(w, corev1.EventTypeNormal, "LifecycleCompleted", "lifecycle-complete", fmt.Sprintf("lifecycle action %s/%s completed with %s", a.GroupName, a.HookName, result))
		case errors.Is(err, asg.ErrNoActiveAction):
			c.Metrics.LifecycleCalls.WithLabelValues("complete", "gone").Inc()
			c.Metrics.LifecycleLost.WithLabelValues("terminate").Inc()
			c.report(w, corev1.EventTypeNormal, "LifecycleAlreadyCompleted", "lifecycle-complete", fmt.Sprintf("lifecycle action %s/%s was already completed or timed out", a.GroupName, a.HookName))
		default:
			c.Metrics.LifecycleCalls.WithLabelValues("complete", "error").Inc()
			return err
		}
		c.stopHeartbeats(w, a.Token)
	}
	return nil
}

func (w *nodeWork) instanceIDFor() string { return w.instanceID }

// undo reverts what lifeboat did for canceled scheduled changes.
func (c *Controller) undo(ctx context.Context, w *nodeWork) error {
	changed, err := c.Drainer.Uncordon(ctx, w.name, plan.TaintPrefix, []string{drain.AnnotationEvents})
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
		c.settle(ctx, w, evs, waiting, now)
		return false
	}
	for _, e := range evs {
		c.done[e.ID] = now
	}
	c.pruneDone(now)
	delete(c.work, w.name)
	for _, b := range w.beats {
		b.stop()
	}
	msgs := w.msgs
	c.mu.Unlock()
	c.Metrics.NodesInFlight.Dec()
	if len(evs) > 0 {
		// The node is done: forget its events, keep the cordon and taints.
		err := c.Drainer.SetAnnotations(ctx, w.name, map[string]string{drain.AnnotationEvents: "", AnnotationDrained: now.UTC().Format(time.RFC3339),
			AnnotationDoneEvents: c.doneEvents(w.name, evs)})
		if err != nil && !errors.Is(err, drain.ErrNodeGone) {
			c.Log.Warn("clearing node events annotation failed", "node", w.name, "error", err.Error())
		}
	}
	if w.notified[notify.PhaseReceived] {
		c.notifyOnce(w, notify.PhaseFinished, plan.For(evs, c.o.Policy, now), "")
	}
	for _, m := range msgs {
		c.messageDone(ctx, m, false)
	}
	return true
}

// settle records the events a reconcile carried out as done while others
// wait for their time (a scheduled change ahead): those stay the node's
// work, and what is reported for them is reported afresh when they come
// due. Called with c.mu held; it releases it.
func (c *Controller) settle(ctx context.Context, w *nodeWork, evs []event.Event, waiting []string, now time.Time) {
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
	c.mu.Unlock()
	if len(settled) == 0 {
		return
	}
	if err := c.Drainer.SetAnnotations(ctx, w.name, map[string]string{AnnotationDoneEvents: c.doneEvents(w.name, settled)}); err != nil && !errors.Is(err, drain.ErrNodeGone) {
		c.Log.Warn("recording done events failed", "node", w.name, "error", err.Error())
	}
}

// doneEvents returns the node's done-events annotation with evs added
// (oldest dropped beyond maxDoneEvents).
func (c *Controller) doneEvents(node string, evs []event.Event) string {
	ids := c.doneOnNode(node)
	for _, e := range evs {
		if !slices.Contains(ids, e.ID) {
			ids = append(ids, e.ID)
		}
	}
	if len(ids) > maxDoneEvents {
		ids = ids[len(ids)-maxDoneEvents:]
	}
	b, err := json.Marshal(ids)
	if err != nil {
		return ""
	}
	return string(b)
}

// doneOnNode returns the IDs of the events recorded as done on a node.
func (c *Controller) doneOnNode(node string) []string {
	n, ok := c.Nodes.ByName(node)
	if !ok {
		return nil
	}
	var ids []string
	if raw := n.Annotations[AnnotationDoneEvents]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &ids); err != nil {
			return nil
		}
	}
	return ids
}

// notifyOnce sends one notification per phase per node work.
func (c *Controller) notifyOnce(w *nodeWork, phase notify.Phase, p plan.Plan, detail string) {
	c.mu.Lock()
	seen := w.notified[phase]
	w.notified[phase] = true
	action := ""
	for _, e := range w.events {
		if e.Kind == p.Reason && e.Action != "" {
			action = e.Action
			break
		}
	}
	c.mu.Unlock()
	if seen || c.Notifier == nil {
		return
	}
	n := notify.Notification{Phase: phase, Node: w.name, InstanceID: w.instanceID, Kind: p.Reason, Action: action, Deadline: p.Deadline, Detail: detail, Time: c.Clock.Now()}
	c.Notifier.Notify(n)
}

// abandon drops a node's work on shutdown: its messages are released for
// redelivery (they stop being extended) and its events stay on the node.
func (c *Controller) abandon(w *nodeWork) {
	c.mu.Lock()
	delete(c.work, w.name)
	for _, b := range w.beats {
		b.stop()
	}
	c.mu.Unlock()
	c.Metrics.NodesInFlight.Dec()
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

// reportOnce reports a reason only the first time for this work.
func (c *Controller) reportOnce(w *nodeWork, reason, typ, action, msg string) {
	c.mu.Lock()
	seen := w.reported[reason]
	w.reported[reason] = true
	c.mu.Unlock()
	if !seen {
		c.report(w, typ, reason, action, msg)
	}
}

// report is the one place outcomes go: a structured log line, a Kubernetes
// Event on the Node (the recorder deduplicates repeats).
func (c *Controller) report(w *nodeWork, typ, reason, action, msg string) {
	c.mu.Lock()
	w.reported[reason] = true
	c.mu.Unlock()
	level := slog.LevelInfo
	if typ == corev1.EventTypeWarning {
		level = slog.LevelWarn
	}
	c.Log.Log(context.Background(), level, reason, "node", w.name, "instanceID", w.instanceID, "action", action, "detail", msg)
	if c.Recorder != nil {
		ref := &corev1.ObjectReference{Kind: "Node", Name: w.name, UID: types.UID(w.name)}
		c.Recorder.Event(ref, typ, reason, msg)
	}
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

// received describes what arrived for a node and what lifeboat will do.
func received(evs []event.Event, p plan.Plan) string {
	what := string(p.Reason)
	for _, e := range evs {
		if e.Kind == p.Reason && e.Action != "" {
			what += " (" + e.Action + ")"
			break
		}
	}
	do := "cordoning"
	if p.Drain {
		do = "cordoning and draining"
	}
	return fmt.Sprintf("%s received; AWS deadline %s; %s", what, fmtDeadline(p.Deadline), do)
}

func fmtDeadline(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return t.UTC().Format(time.RFC3339)
}
