package outofservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
)

const (
	// DefaultInterval is how long a node lifeboat handled waits for a
	// state-change notification before EC2 is asked about its instance,
	// and how often EC2 is asked again while the node stays.
	DefaultInterval = 30 * time.Second
	// defaultTick is how often the nodes are looked at; no AWS call is
	// made unless one is due.
	defaultTick = 2 * time.Second
	// forgetAfter is how long the state of an instance of no handled node
	// is kept: a notification may arrive before the cordon it causes is
	// in the node cache.
	forgetAfter = 10 * time.Minute
)

// Reasons of the Kubernetes Events on the Node.
const (
	ReasonTainted      = "OutOfServiceTainted"
	ReasonRemoved      = "OutOfServiceRemoved"
	ReasonGhost        = "GhostNode"
	ReasonGhostDeleted = "GhostNodeDeleted"
)

// nodeSource is the node cache (*nodes.Index).
type nodeSource interface {
	List() []*corev1.Node
	WaitSynced(ctx context.Context) error
}

// nodeWriter writes the taint and deletes ghost nodes (*drain.Drainer).
type nodeWriter interface {
	MarkOutOfService(ctx context.Context, node string) (bool, error)
	ClearOutOfService(ctx context.Context, node string) (bool, error)
	DeleteNode(ctx context.Context, node string, uid types.UID) error
}

var (
	_ nodeSource = (*nodes.Index)(nil)
	_ nodeWriter = (*drain.Drainer)(nil)
)

// Options configure a Watcher.
type Options struct {
	// Taint adds and removes the out-of-service taint
	// (--out-of-service-taint).
	Taint bool
	// GhostAfter: a handled node still there this long after EC2 said its
	// instance terminated is a ghost, reported (0: never).
	GhostAfter time.Duration
	// DeleteGhosts deletes a ghost node that is not Ready.
	DeleteGhosts bool
	// Interval: see DefaultInterval (0: DefaultInterval).
	Interval time.Duration
	// Tick: how often the nodes are looked at (0: 2 s).
	Tick time.Duration
}

// describes reports whether EC2 is asked about instances: only for the
// options that need confirmed states without a notification (the taint,
// the deletion), so that the default needs no ec2:DescribeInstances.
func (o Options) describes() bool { return o.Taint || o.DeleteGhosts }

// Deps are a Watcher's collaborators.
type Deps struct {
	Nodes    nodeSource
	Writer   nodeWriter
	EC2      describer
	Recorder kube.EventRecorder // nil: no Events
	Metrics  *metrics.Metrics
	Clock    clock.WithTicker
	Log      *slog.Logger
}

// Watcher keeps the out-of-service taint of the nodes lifeboat handled in
// step with their instances' states.
type Watcher struct {
	Deps
	o    Options
	wake chan struct{}

	mu    sync.Mutex
	seen  map[string]observation // by instance ID: the latest state known
	asked map[string]time.Time   // by instance ID: the last DescribeInstances
	nodes map[string]*tracked    // by node name: the nodes handled
}

// observation is an instance's state and when EC2 said it.
type observation struct {
	state string
	at    time.Time
}

// tracked is a node the Watcher looks after.
type tracked struct {
	uid      types.UID     // of the Node seen (a node registered again under its name is another)
	since    time.Time     // first seen handled
	retry    time.Time     // after a failed write: not before
	backoff  time.Duration // the last pause after a failed write
	reported bool          // reported as a ghost
	deleted  bool          // deleted as a ghost (the cache may still list it)
}

// candidate is a handled node as the cache shows it.
type candidate struct {
	node, instanceID string
	uid              types.UID
	tainted, ours    bool
	ready            bool
}

// New returns a Watcher.
func New(d Deps, o Options) *Watcher {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Tick <= 0 {
		o.Tick = defaultTick
	}
	return &Watcher{Deps: d, o: o, wake: make(chan struct{}, 1),
		seen: map[string]observation{}, asked: map[string]time.Time{}, nodes: map[string]*tracked{}}
}

// Observe takes an event from the queue: a state-change notification says
// what its instance's state was at the event's time. Other kinds are
// ignored. It never blocks.
func (w *Watcher) Observe(e event.Event) {
	if e.Kind != event.StateChange || e.InstanceID == "" || e.Action == "" {
		return
	}
	at := e.Time
	if at.IsZero() {
		at = w.Clock.Now()
	}
	w.mu.Lock()
	w.learn(e.InstanceID, e.Action, at)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run looks at the nodes every tick, and at once after a notification,
// until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	if err := w.Nodes.WaitSynced(ctx); err != nil {
		return err
	}
	t := w.Clock.NewTicker(w.o.Tick)
	defer t.Stop()
	defer w.Metrics.GhostNodes.Set(0) // a replica that stops leading counts none
	for {
		w.sync(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		case <-w.wake:
		}
	}
}

// sync is one look at the nodes: ask EC2 about the instances that are due,
// then add or remove each handled node's taint as Decide says, and report
// (and delete) the ghosts.
func (w *Watcher) sync(ctx context.Context) {
	now := w.Clock.Now()
	cands := w.candidates(now)
	if w.o.describes() {
		w.ask(ctx, w.due(cands, now), now)
	}
	ghosts := 0
	for _, c := range cands {
		if ctx.Err() != nil {
			return
		}
		if w.o.Taint {
			w.apply(ctx, c, now)
		}
		if w.ghost(ctx, c, now) {
			ghosts++
		}
	}
	w.Metrics.GhostNodes.Set(float64(ghosts))
}

// handled reports whether n is a node whose taint lifeboat looks after:
// one it cordoned for an interruption (work in progress or finished) and
// that is still cordoned, or one that carries lifeboat's taint.
func handled(n *corev1.Node) (candidate, bool) {
	c := candidate{node: n.Name, instanceID: nodes.InstanceID(n.Spec.ProviderID), uid: n.UID, ready: nodes.Ready(n)}
	c.ours = n.Annotations[drain.AnnotationOutOfService] == "true"
	c.tainted = slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == drain.TaintOutOfService })
	_, working := n.Annotations[drain.AnnotationEvents]
	_, drained := n.Annotations[controller.AnnotationDrained]
	ok := c.ours || n.Spec.Unschedulable && (working || drained)
	return c, ok && c.instanceID != ""
}

// candidates returns the handled nodes, tracking new ones from now and
// forgetting what concerns nodes no longer handled (deleted, uncordoned).
func (w *Watcher) candidates(now time.Time) []candidate {
	var cands []candidate
	keep := map[string]bool{}
	for _, n := range w.Nodes.List() {
		if c, ok := handled(n); ok {
			cands = append(cands, c)
			keep[c.instanceID] = true
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	names := map[string]bool{}
	for _, c := range cands {
		names[c.node] = true
		if t, ok := w.nodes[c.node]; !ok || t.uid != c.uid {
			w.nodes[c.node] = &tracked{uid: c.uid, since: now}
		}
	}
	for name := range w.nodes {
		if !names[name] {
			delete(w.nodes, name)
		}
	}
	for id, o := range w.seen {
		if !keep[id] && now.Sub(o.at) > forgetAfter {
			delete(w.seen, id)
		}
	}
	for id, at := range w.asked {
		if !keep[id] && now.Sub(at) > forgetAfter {
			delete(w.asked, id)
		}
	}
	return cands
}

// learn records state at when it is news: newer than what is known, or
// terminated, which an instance never leaves (so it is news however late
// it comes, and nothing after it is). Called with w.mu held.
func (w *Watcher) learn(instanceID, state string, at time.Time) {
	if old, ok := w.seen[instanceID]; ok && (final(old.state) || at.Before(old.at) && !final(state)) {
		return
	}
	w.seen[instanceID] = observation{state: state, at: at}
}

// observation returns what is known of an instance (zero: nothing).
func (w *Watcher) observation(instanceID string) observation {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen[instanceID]
}

// state is what is known of an instance's state now: "" when nothing is,
// or only something older than two intervals (the instance may have
// changed since; a notification that waited in the queue is not news).
func (w *Watcher) state(instanceID string, now time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	o, ok := w.seen[instanceID]
	if !ok || !final(o.state) && now.Sub(o.at) > 2*w.o.Interval {
		return ""
	}
	return o.state
}

// due returns the instances to ask EC2 about: those of nodes handled for
// an interval at least, about which nothing was learned for an interval,
// and that are not known terminated.
func (w *Watcher) due(cands []candidate, now time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ids []string
	for _, c := range cands {
		o := w.seen[c.instanceID]
		if final(o.state) || now.Sub(w.nodes[c.node].since) < w.o.Interval {
			continue
		}
		last := o.at
		if a := w.asked[c.instanceID]; a.After(last) {
			last = a
		}
		if now.Sub(last) >= w.o.Interval && !slices.Contains(ids, c.instanceID) {
			ids = append(ids, c.instanceID)
		}
	}
	return ids
}

// apply adds or removes the node's taint as Decide says. A failed write is
// tried again after a pause that doubles from a tick up to an interval.
func (w *Watcher) apply(ctx context.Context, c candidate, now time.Time) {
	w.mu.Lock()
	t := w.nodes[c.node]
	wait := now.Before(t.retry)
	w.mu.Unlock()
	if wait {
		return
	}
	state := w.state(c.instanceID, now)
	act := Decide(state, c.tainted, c.ours)
	var changed bool
	var err error
	switch act {
	case Add:
		changed, err = w.Writer.MarkOutOfService(ctx, c.node)
	case Remove:
		changed, err = w.Writer.ClearOutOfService(ctx, c.node)
	default:
		return
	}
	metric := "out-of-service-taint"
	if act == Remove {
		metric = "out-of-service-untaint"
	}
	if errors.Is(err, drain.ErrNodeGone) {
		return // the taint went with the node
	}
	w.pause(t, err, now)
	if err != nil {
		w.Metrics.Actions.WithLabelValues(metric, "error").Inc()
		w.Log.Warn("out-of-service taint not written", "node", c.node, "instanceID", c.instanceID, "action", act.String(), "state", state, "error", err.Error())
		return
	}
	if !changed {
		return
	}
	w.Metrics.Actions.WithLabelValues(metric, "ok").Inc()
	if act == Add {
		w.report(c, ReasonTainted, fmt.Sprintf("instance %s is %s: tainted %s=%s:NoExecute, so the pods left are deleted and their volumes detached",
			c.instanceID, state, drain.TaintOutOfService, drain.OutOfServiceValue))
	} else {
		w.report(c, ReasonRemoved, fmt.Sprintf("instance %s is %s again: %s taint removed", c.instanceID, state, drain.TaintOutOfService))
	}
}

// pause records the outcome of a write to t's node: after a failure the
// next one waits, doubling from a tick up to an interval.
func (w *Watcher) pause(t *tracked, err error, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		t.backoff = min(max(2*t.backoff, w.o.Tick), w.o.Interval)
		t.retry = now.Add(t.backoff)
	} else {
		t.backoff, t.retry = 0, time.Time{}
	}
}

// report logs an outcome and records it as a Normal Event on the Node.
func (w *Watcher) report(c candidate, reason, msg string) {
	w.reportType(c, corev1.EventTypeNormal, reason, msg)
}

func (w *Watcher) reportType(c candidate, typ, reason, msg string) {
	log := w.Log.Info
	if typ == corev1.EventTypeWarning {
		log = w.Log.Warn
	}
	log(reason, "node", c.node, "instanceID", c.instanceID, "detail", msg)
	if w.Recorder != nil {
		ref := &corev1.ObjectReference{Kind: "Node", Name: c.node, UID: types.UID(c.node)}
		w.Recorder.Event(ref, typ, reason, msg)
	}
}
