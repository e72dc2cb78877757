// Package rebootwatch carries out the reboot rule (package rebootmark) in
// queue mode: no lifeboat pod restarts on the node after its reboot, so
// the leader watches the nodes instead. A node lifeboat cordoned for a
// reboot-type maintenance is uncordoned once the kubelet reports another
// boot ID than the one recorded at the cordon and the Node is Ready, and
// no lifeboat work is due on it.
//
// It owns that decision (Decide, pure) and the loop that applies it
// (Watcher), driven by the node cache's updates. It must not cordon or
// drain, and it writes to Nodes only through package drain.
package rebootwatch

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/plan"
	"lifeboat.dev/lifeboat/internal/rebootmark"
)

// Action is what Decide says to do with a node.
type Action int

const (
	// Keep: no reboot maintenance to end (no marker, not rebooted since the
	// cordon, boot IDs unknown, or already undone).
	Keep Action = iota
	// WaitReady: rebooted, but the Node is not Ready yet.
	WaitReady
	// WaitWork: rebooted, but lifeboat has work due on the node (the
	// maintenance's own drain, or another interruption): the cordon stays
	// while the controller acts.
	WaitWork
	// Undo: uncordon (if lifeboat cordoned it), remove lifeboat's taints,
	// mark the maintenance rebooted.
	Undo
)

func (a Action) String() string {
	switch a {
	case WaitReady:
		return "wait-ready"
	case WaitWork:
		return "wait-work"
	case Undo:
		return "undo"
	}
	return "keep"
}

// Decide applies the reboot rule to a node in queue mode at now, with the
// controller's policy p (to tell whether the events recorded on the node
// are due). Queue mode knows no host boot time: only boot IDs tell a
// reboot.
func Decide(n *corev1.Node, p plan.Policy, now time.Time) (rebootmark.Marker, Action) {
	m, v, _ := rebootmark.Decide(n.Annotations[rebootmark.Annotation], n.Status.NodeInfo.BootID, time.Time{})
	switch {
	case v != rebootmark.Undo:
		return m, Keep
	case !nodes.Ready(n):
		return m, WaitReady
	case workDue(n, p, now):
		return m, WaitWork
	}
	return m, Undo
}

// workDue reports whether the events lifeboat recorded on the node call
// for a cordon now. An unreadable record counts as due: lifeboat does not
// undo what it cannot read.
func workDue(n *corev1.Node, p plan.Policy, now time.Time) bool {
	raw := n.Annotations[drain.AnnotationEvents]
	if raw == "" {
		return false
	}
	var evs []event.Event
	if err := json.Unmarshal([]byte(raw), &evs); err != nil {
		return true
	}
	pl := plan.For(evs, p, now)
	return pl.Act && !pl.Undo
}

// ReasonUncordoned is the reason of the Event on the Node.
const ReasonUncordoned = "Uncordoned"

// nodeSource is the node cache (*nodes.Index).
type nodeSource interface {
	ByName(name string) (*corev1.Node, bool)
	AddHandler(h cache.ResourceEventHandler) (remove func(), err error)
	WaitSynced(ctx context.Context) error
}

// writer makes the undo (*drain.Drainer).
type writer interface {
	UncordonIf(ctx context.Context, node, taintPrefix string, decide func(n *corev1.Node) (map[string]string, bool)) (allowed, changed bool, err error)
}

var (
	_ nodeSource = (*nodes.Index)(nil)
	_ writer     = (*drain.Drainer)(nil)
)

// Deps are a Watcher's collaborators.
type Deps struct {
	Nodes    nodeSource
	Writer   writer
	Recorder kube.EventRecorder // nil: no Events
	Metrics  *metrics.Metrics
	Clock    clock.WithTicker
	Log      *slog.Logger
}

// Options configure a Watcher.
type Options struct {
	// Policy is the controller's (plan.Policy): it says whether work
	// recorded on a node is due.
	Policy plan.Policy
	// DryRun: the drainer writes nothing; the undo is reported once.
	DryRun bool
	// Retry is the pause after a failed write, doubled up to a minute (0: a
	// second).
	Retry time.Duration
}

// Watcher uncordons the nodes whose reboot maintenance is over.
type Watcher struct {
	Deps
	o    Options
	wake chan struct{}

	mu       sync.Mutex
	pending  map[string]retry // nodes to look at, by name
	reported map[string]bool  // dry run: maintenance event IDs reported
}

// retry is when a node is looked at again after a failed write.
type retry struct {
	at      time.Time
	backoff time.Duration
}

// New returns a Watcher.
func New(d Deps, o Options) *Watcher {
	if o.Retry <= 0 {
		o.Retry = time.Second
	}
	return &Watcher{Deps: d, o: o, wake: make(chan struct{}, 1), pending: map[string]retry{}, reported: map[string]bool{}}
}

// Run applies the rule to every node the cache adds or updates, until ctx
// ends. Only the leader runs it: it writes.
func (w *Watcher) Run(ctx context.Context) error {
	if err := w.Nodes.WaitSynced(ctx); err != nil {
		return err
	}
	remove, err := w.Nodes.AddHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.observe,
		UpdateFunc: func(_, obj any) { w.observe(obj) },
	})
	if err != nil {
		return err
	}
	defer remove()
	t := w.Clock.NewTicker(w.o.Retry)
	defer t.Stop()
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

// observe takes a node from the cache: one that has rebooted since its
// reboot maintenance's cordon is looked at (the others cost nothing).
func (w *Watcher) observe(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	if _, v, _ := rebootmark.Decide(n.Annotations[rebootmark.Annotation], n.Status.NodeInfo.BootID, time.Time{}); v != rebootmark.Undo {
		return
	}
	w.mu.Lock()
	if _, ok := w.pending[n.Name]; !ok {
		w.pending[n.Name] = retry{}
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// sync looks at the pending nodes whose retry time has come.
func (w *Watcher) sync(ctx context.Context) {
	now := w.Clock.Now()
	w.mu.Lock()
	var due []string
	for name, r := range w.pending {
		if !now.Before(r.at) {
			due = append(due, name)
		}
	}
	w.mu.Unlock()
	for _, name := range due {
		if ctx.Err() != nil {
			return
		}
		err := w.apply(ctx, name, now)
		w.mu.Lock()
		if err == nil {
			delete(w.pending, name)
		} else {
			r := w.pending[name]
			r.backoff = min(max(2*r.backoff, w.o.Retry), time.Minute)
			r.at = now.Add(r.backoff)
			w.pending[name] = r
		}
		w.mu.Unlock()
	}
}

// apply makes the undo of one node if Decide says so of the node as it is
// written. A node not ready or with work due is left: its next update
// brings it back.
func (w *Watcher) apply(ctx context.Context, name string, now time.Time) error {
	cached, ok := w.Nodes.ByName(name)
	if !ok {
		return nil
	}
	if _, act := Decide(cached, w.o.Policy, now); act != Undo {
		return nil
	}
	var m rebootmark.Marker
	var ours bool
	allowed, changed, err := w.Writer.UncordonIf(ctx, name, plan.TaintPrefix, func(n *corev1.Node) (map[string]string, bool) {
		mk, act := Decide(n, w.o.Policy, now)
		if act != Undo {
			return nil, false
		}
		m, ours = mk, n.Annotations[drain.AnnotationCordoned] == "true"
		mk.Rebooted = true
		return map[string]string{rebootmark.Annotation: mk.Encode()}, true
	})
	if errors.Is(err, drain.ErrNodeGone) {
		return nil
	}
	if err != nil {
		w.Metrics.Actions.WithLabelValues("uncordon", "error").Inc()
		w.Log.Warn("undoing the cordon of a reboot maintenance failed; retrying", "node", name, "error", err.Error())
		return err
	}
	if !allowed {
		return nil
	}
	msg := rebootmark.UndoMessage(m, ours)
	if w.o.DryRun {
		w.mu.Lock()
		again := w.reported[m.EventID]
		w.reported[m.EventID] = true
		w.mu.Unlock()
		if again {
			return nil
		}
		msg = "dry run: would have: " + msg
	}
	w.Metrics.Actions.WithLabelValues("uncordon", "ok").Inc()
	w.Log.Info(ReasonUncordoned, "node", name, "eventID", m.EventID, "kind", event.ScheduledChange, "changed", changed, "detail", msg)
	if w.Recorder != nil {
		w.Recorder.Event(&corev1.ObjectReference{Kind: "Node", Name: name, UID: types.UID(name)}, corev1.EventTypeNormal, ReasonUncordoned, msg)
	}
	return nil
}
