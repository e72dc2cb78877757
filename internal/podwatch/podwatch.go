// Package podwatch shares one watch of every pod among the drains in
// flight (queue mode). A drain waits for its evicted pods to go by watching
// its node's pods from the resourceVersion of its list. A thousand drains at
// once were a thousand watches, each starting by replaying, through its own
// filter, every pod event since its list (7.6 % of the API server's CPU in
// a 1,000-node burst), and every other pod watcher (kubelets, controllers)
// saw the storm's pod events seconds later (docs/benchmarks.md, "Where a
// storm's time goes"). The Hub runs one watch of all pods while any drain
// is subscribed and hands each drain its node's events, from the
// resourceVersion of that drain's list.
//
// A client-go informer would do the sharing but keeps every pod of the
// cluster in memory (100,000 pods at 5,000 nodes); the Hub keeps only the
// last maxRecent events, slimmed to what a drain reads, for the drains whose
// lists are older than the hub's watch position.
package podwatch

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// WatchFunc opens a watch of every pod (the pod-read lane's
// Pods("").Watch).
type WatchFunc func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)

const (
	// maxRecent bounds the events kept for drains whose list is older
	// than the hub's position: a few seconds of a storm (8,192 slim pods,
	// about 2 MiB).
	maxRecent = 8192
	// linger is how long the watch stays open with nobody subscribed: the
	// drains of a storm come and go, and reopening costs an event replay.
	linger = 30 * time.Second
)

// rewatchBackoff spaces the hub's watch reopenings after it ends.
var rewatchBackoff = wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 100, Cap: 10 * time.Second}

// Hub is one shared watch of every pod. The zero value is not usable; New
// makes one. It is safe for concurrent use.
type Hub struct {
	watch WatchFunc
	clock clock.WithDelayedExecution
	log   *slog.Logger

	mu sync.Mutex
	// run is the current watch's generation (nil: none running); cancel
	// stops it.
	run    *struct{}
	cancel context.CancelFunc
	subs   map[string]map[*Sub]struct{} // by node name
	// recent holds the last events; every event after covered is in
	// recent or still to come.
	recent  ring
	covered uint64
	idle    clock.Timer // stops the watch linger after the last Stop
	// at is how far the watch has come (CaughtUp).
	at position
}

// event is one pod event as the hub keeps it.
type event struct {
	typ  watch.EventType
	rv   uint64
	node string
	pod  *corev1.Pod // slim
}

// New returns a Hub that watches through watch.
func New(watch WatchFunc, clk clock.WithDelayedExecution, log *slog.Logger) *Hub {
	return &Hub{watch: watch, clock: clk, log: log, subs: map[string]map[*Sub]struct{}{}}
}

// WatchNode returns the events of node's pods after resourceVersion fromRV
// (that of the drain's list), as a per-node watch would: Added, Modified
// and Deleted with slim pods (slim), in order. ok is false when the hub
// cannot serve it (fromRV is not a number, or older than the events it
// kept): the caller watches the node itself. The result channel closes
// when the hub's watch lost its place (410 Gone): the caller lists again
// and asks anew, as after a per-node watch's end.
func (h *Hub) WatchNode(node, fromRV string) (watch.Interface, bool) {
	from, err := strconv.ParseUint(fromRV, 10, 64)
	if err != nil || from == 0 {
		return nil, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.run == nil {
		h.start(from)
	}
	if from < h.covered {
		return nil, false
	}
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	s := newSub(h, node, from)
	h.recent.each(s.offer)
	if h.subs[node] == nil {
		h.subs[node] = map[*Sub]struct{}{}
	}
	h.subs[node][s] = struct{}{}
	return s, true
}

// start opens the shared watch at from; h.mu held.
func (h *Hub) start(from uint64) {
	ctx, cancel := context.WithCancel(context.Background())
	run := &struct{}{}
	h.run, h.cancel, h.covered, h.recent = run, cancel, from, ring{}
	go h.loop(ctx, run, from)
}

// loop keeps the shared watch open from the last version it saw, until
// ctx ends or the API server says that version is gone (410): then every
// subscriber is closed, to list again.
func (h *Hub) loop(ctx context.Context, run *struct{}, rv uint64) {
	backoff := rewatchBackoff
	for ctx.Err() == nil {
		w, err := h.watch(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatUint(rv, 10), AllowWatchBookmarks: true})
		if err != nil {
			if gone(err) {
				h.reset(run, "the shared pod watch's resourceVersion is gone")
				return
			}
			if ctx.Err() == nil {
				h.log.Warn("opening the shared pod watch failed", "error", err.Error())
			}
		} else {
			var lost bool
			rv, lost = h.consume(ctx, run, w, rv)
			w.Stop()
			if lost {
				h.reset(run, "the shared pod watch's resourceVersion is gone")
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-h.clock.After(backoff.Step()):
		}
	}
}

// consume hands w's events out until w ends; it returns the last version
// seen and whether w ended with 410 Gone.
func (h *Hub) consume(ctx context.Context, run *struct{}, w watch.Interface, rv uint64) (uint64, bool) {
	for {
		select {
		case <-ctx.Done():
			return rv, false
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv, false
			}
			switch ev.Type {
			case watch.Error:
				return rv, gone(apierrors.FromObject(ev.Object))
			case watch.Bookmark, watch.Added, watch.Modified, watch.Deleted:
				pod, isPod := ev.Object.(*corev1.Pod)
				if !isPod {
					continue
				}
				v, err := strconv.ParseUint(pod.ResourceVersion, 10, 64)
				if err != nil {
					continue
				}
				rv = max(rv, v)
				if ev.Type == watch.Bookmark {
					h.advance(run, rv)
				} else {
					h.dispatch(run, event{typ: ev.Type, rv: v, node: pod.Spec.NodeName, pod: slim(pod)})
				}
			}
		}
	}
}

// gone reports whether err says the version the watch asked for is no
// longer there (410 Gone, or Expired).
func gone(err error) bool { return apierrors.IsGone(err) || apierrors.IsResourceExpired(err) }

// dispatch keeps e, hands it to its node's subscribers and records the
// watch's position (CaughtUp), under one lock.
func (h *Hub) dispatch(run *struct{}, e event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.run != run {
		return
	}
	h.advanceLocked(e.rv)
	if dropped, ok := h.recent.push(e); ok {
		h.covered = dropped.rv
	}
	for s := range h.subs[e.node] {
		s.offer(e)
	}
}

// reset ends the current watch: every subscriber's channel closes.
func (h *Hub) reset(run *struct{}, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.run != run {
		return
	}
	h.log.Info("closing the shared pod watch's subscribers to list again", "reason", why)
	h.stopLocked()
}

// stopLocked stops the watch and closes every subscriber; h.mu held.
func (h *Hub) stopLocked() {
	h.cancel()
	h.run, h.cancel, h.recent = nil, nil, ring{}
	h.at.reset()
	for _, set := range h.subs {
		for s := range set {
			s.close()
		}
	}
	h.subs = map[string]map[*Sub]struct{}{}
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
}

// remove unsubscribes s; the watch stops linger after the last one.
func (h *Hub) remove(s *Sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if set := h.subs[s.node]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(h.subs, s.node)
		}
	}
	if len(h.subs) > 0 || h.run == nil || h.idle != nil {
		return
	}
	run := h.run
	var t clock.Timer
	t = h.clock.AfterFunc(linger, func() {
		h.mu.Lock() // after t is assigned: remove holds h.mu until then
		defer h.mu.Unlock()
		if h.idle != t {
			return // stopped by a new subscriber, or the hub reset
		}
		h.idle = nil // not stopped from inside its own callback
		if h.run == run && len(h.subs) == 0 {
			h.stopLocked()
		}
	})
	h.idle = t
}

// slim is the part of a pod a drain's wait reads: its identity, deletion,
// finalizers, node and phase. The hub keeps and hands out only this.
func slim(p *corev1.Pod) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Finalizers: p.Finalizers, DeletionTimestamp: p.DeletionTimestamp, DeletionGracePeriodSeconds: p.DeletionGracePeriodSeconds},
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}
}

// ring is the last maxRecent events, oldest first.
type ring struct {
	buf        []event
	head, size int
}

// push appends e, dropping the oldest event when full (returned, with ok).
func (r *ring) push(e event) (dropped event, ok bool) {
	if r.buf == nil {
		r.buf = make([]event, maxRecent)
	}
	if r.size == len(r.buf) {
		dropped, ok = r.buf[r.head], true
		r.buf[r.head] = e
		r.head = (r.head + 1) % len(r.buf)
		return dropped, ok
	}
	r.buf[(r.head+r.size)%len(r.buf)] = e
	r.size++
	return event{}, false
}

// each calls f on every event, oldest first.
func (r *ring) each(f func(event)) {
	for i := range r.size {
		f(r.buf[(r.head+i)%len(r.buf)])
	}
}
