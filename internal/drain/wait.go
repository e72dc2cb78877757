package drain

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// relistBackoff spaces the list-and-watch rounds of waitGone when watches
// end at once (an API server or proxy that closes them, a 410 each time):
// 250 ms doubling up to 30 s, back to 250 ms after a watch that lasted
// relistReset.
var relistBackoff = wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 100, Cap: 30 * time.Second}

const relistReset = time.Minute

// waitResult is what waitGone saw.
type waitResult struct {
	// left counts pods still present when the deadline passed without
	// force deletion (waitGone then returns ErrDeadline).
	left int
	// forced counts pods force-deleted at the deadline.
	forced int
	// stuck lists pods still present past their bound.
	stuck []PodProblem
	// forcedStuck: some pods could not be force-deleted at the deadline.
	forcedStuck bool
	// finished lists pods whose containers had all ended (phase Succeeded
	// or Failed) while their objects stayed: off the node for the drain.
	finished []PodProblem
	// cut lists the pods still there when the wait ended at the deadline
	// or was canceled, and why.
	cut []CutOffPod
	// deletedBlocked lists the pods not asked to leave that were deleted
	// in time for their shutdown (Options.DeleteBlocked).
	deletedBlocked []PodProblem
}

// waitingPod is a pod waitGone waits for.
type waitingPod struct {
	pod corev1.Pod
	// until is when the pod counts as stuck (zero: not before the deadline).
	until time.Time
	// grace is the grace period, in seconds, the pod got (for a report).
	grace int64
	// asked: its eviction was accepted (or its namespace deletes it);
	// otherwise why says why not.
	asked bool
	why   string
	// deleteAt is when a pod not asked to leave is deleted before an
	// enforced deadline (BlockedDelete.At; zero: never).
	deleteAt time.Time
}

// waitGone watches the node's pods until none of pods (by UID) is left,
// within bounds: with a deadline, at the deadline the pods left are
// force-deleted (ForceDeleteAtDeadline) and not waited for, or left
// (ErrDeadline): nothing after the deadline delays the end of the drain. Without a deadline, each
// pod is waited for the grace period it got plus StuckAfter. A pod whose
// containers have all ended (phase Succeeded or Failed) is off the node for
// the drain even while its object stays (a finalizer): it is reported in
// finished, not waited for. A pod past its bound is reported stuck, not waited
// on. outs holds how each pod's eviction ended (newWaiting): the grace
// period it got, or why it was not accepted; a pod not in it counts as
// asked to leave with the grace its eviction asks for (Actions.PodGrace,
// else its own). A pod still there when the wait ends at the deadline or
// is canceled is reported cut off, with why (cutOff). Before an enforced
// deadline, a pod not asked to leave (its eviction refused for good) is
// deleted when its BlockedDelete is due (Options.DeleteBlocked).
//
// The first watch starts at fromRV, the resourceVersion of the list the
// pods came from, so every deletion since is seen without listing again
// (one request less per node in a burst); when a watch ends (410 Gone for
// an old version, a closed connection), it lists and watches anew after a
// backoff (relistBackoff), so watches that end at once do not spin.
func (d *Drainer) waitGone(ctx context.Context, node string, pods []corev1.Pod, outs map[types.UID]evictOutcome, fromRV string, dl Deadline, report func(func(*Progress))) (waitResult, error) {
	deadline := dl.At
	var res waitResult
	start := d.clock.Now()
	waiting := make(map[types.UID]*waitingPod, len(pods))
	for _, p := range pods {
		wp := d.newWaiting(p, outs)
		if deadline.IsZero() {
			// The grace ran from the eviction, which came before start:
			// this bound is never earlier than the kubelet's.
			wp.until = start.Add(time.Duration(wp.grace)*time.Second + d.stuckAfter)
		}
		if b, ok := d.blockedPlan(&p, dl); ok && !wp.asked {
			wp.deleteAt = b.ActAt()
		}
		waiting[p.UID] = wp
	}
	total := len(waiting)
	gone := func(uid types.UID) {
		if _, ok := waiting[uid]; ok {
			delete(waiting, uid)
			report(func(p *Progress) { p.Gone++ })
		}
	}
	// seen takes a waited-for pod's latest state: one whose containers
	// have all ended is off the node.
	seen := func(p *corev1.Pod) {
		wp, ok := waiting[p.UID]
		if !ok {
			return
		}
		refresh(&wp.pod, p)
		if reason, done := finishedReason(p); done {
			res.finished = append(res.finished, PodProblem{Namespace: p.Namespace, Name: p.Name, Reason: reason})
			gone(p.UID)
		}
	}
	// leftAt ends the wait at now with the pods still waiting: left, and
	// cut off with why.
	leftAt := func(now time.Time) { res.left, res.cut = len(waiting), cutAll(waiting, now) }
	sel := fields.OneTermEqualSelector("spec.nodeName", node).String()
	deadlineDone := deadline.IsZero()
	relist := relistBackoff
	rv := fromRV
	var w watch.Interface
	var watchStart time.Time
	var relistC <-chan time.Time
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()
	for len(waiting) > 0 {
		if w == nil && relistC == nil {
			if rv == "" {
				list, err := NodePods(ctx, d.reads, node, "") // consistent: see NodePods
				if err != nil {
					leftAt(d.clock.Now())
					return res, err
				}
				present := map[types.UID]*corev1.Pod{}
				for i := range list.Items {
					present[list.Items[i].UID] = &list.Items[i]
				}
				for uid := range waiting {
					if p, ok := present[uid]; ok {
						seen(p)
					} else {
						gone(uid)
					}
				}
				if len(waiting) == 0 {
					break
				}
				rv = list.ResourceVersion
			}
			var err error
			w, err = d.watchNode(ctx, node, sel, rv)
			rv = "" // after this watch, list again
			if err != nil {
				// Canceled here as anywhere else: the pods not seen gone
				// are still there (test/realnode TestInstanceDiesMidShutdown
				// saw a drain the Node's deletion canceled as its watch
				// began report its terminating pod evicted and gone).
				w = nil
				leftAt(d.clock.Now())
				return res, fmt.Errorf("watching pods of node %s: %w", node, err)
			}
			watchStart = d.clock.Now()
		}
		var events <-chan watch.Event
		if w != nil {
			events = w.ResultChan()
		}
		timer, timerC := d.timerUntil(nextWake(waiting, deadline, deadlineDone))
		select {
		case <-ctx.Done():
			stopTimer(timer)
			leftAt(d.clock.Now())
			return res, ctx.Err()
		case <-relistC:
			relistC = nil
		case <-timerC:
			now := d.clock.Now()
			if !deadlineDone && !now.Before(deadline) {
				deadlineDone = true
				if !d.force {
					leftAt(now)
					return res, fmt.Errorf("draining node %s: %d of %d pods still there: %w", node, len(waiting), total, ErrDeadline)
				}
				d.forceDeleteAll(ctx, waiting, now, &res)
				// Not waited for: AWS takes the instance now, and what
				// follows (the lifecycle completion) must not wait.
				return res, nil
			}
			d.deleteDue(ctx, waiting, dl, now, &res, gone)
			for uid, wp := range waiting {
				if !wp.until.IsZero() && !now.Before(wp.until) {
					delete(waiting, uid)
					res.stuck = append(res.stuck, d.stuckProblem(wp))
				}
			}
		case ev, ok := <-events:
			switch {
			case !ok || ev.Type == watch.Error:
				w.Stop()
				w = nil
				if d.clock.Since(watchStart) >= relistReset {
					relist = relistBackoff
				}
				relistC = d.clock.After(relist.Step())
			case ev.Type == watch.Deleted || ev.Type == watch.Modified:
				pod, isPod := ev.Object.(*corev1.Pod)
				if !isPod {
					break
				}
				if ev.Type == watch.Deleted {
					gone(pod.UID)
				} else {
					seen(pod)
				}
			}
		}
		stopTimer(timer)
	}
	return res, nil
}

// NodePodWatcher hands out a node's pod events from a shared watch
// (internal/podwatch.Hub): Added, Modified and Deleted after fromRV, with
// at least what refresh reads of each pod. ok is false when it cannot
// serve the node; its channel closes when the shared watch lost its
// place, as a per-node watch's does.
type NodePodWatcher interface {
	WatchNode(node, fromRV string) (w watch.Interface, ok bool)
}

// watchNode watches node's pods from rv: through the shared watch when
// there is one and it can, else with a watch of the node's own.
func (d *Drainer) watchNode(ctx context.Context, node, sel, rv string) (watch.Interface, error) {
	if d.watches != nil {
		if w, ok := d.watches.WatchNode(node, rv); ok {
			return w, nil
		}
	}
	return d.reads.Pods(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{
		FieldSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true,
	})
}

// refresh takes what the wait reports of a pod from its latest state
// (src, from a watch event): its deletion, finalizers and phase.
func refresh(dst, src *corev1.Pod) {
	dst.ResourceVersion, dst.Finalizers = src.ResourceVersion, src.Finalizers
	dst.DeletionTimestamp, dst.DeletionGracePeriodSeconds = src.DeletionTimestamp, src.DeletionGracePeriodSeconds
	dst.Status.Phase = src.Status.Phase
}

// deleteDue deletes the waiting pods whose BlockedDelete is due at now;
// each is then waited for as asked to leave with the grace it got. A
// deletion that fails is tried again after the backoff.
func (d *Drainer) deleteDue(ctx context.Context, waiting map[types.UID]*waitingPod, dl Deadline, now time.Time, res *waitResult, gone func(types.UID)) {
	for uid, wp := range waiting {
		if wp.deleteAt.IsZero() || now.Before(wp.deleteAt) {
			continue
		}
		b, _ := d.blockedPlan(&wp.pod, dl)
		pp, isGone, err := d.deleteBlockedPod(ctx, &wp.pod, b, dl, wp.why)
		switch {
		case isGone:
			gone(uid)
		case err != nil:
			wp.deleteAt = now.Add(d.backoff)
		default:
			wp.asked, wp.grace, wp.deleteAt = true, b.Grace, time.Time{}
			res.deletedBlocked = append(res.deletedBlocked, pp)
		}
	}
}

// forceDeleteAll force-deletes the waiting pods at the deadline (now):
// each is cut off. A pod whose deletion fails is reported stuck too.
func (d *Drainer) forceDeleteAll(ctx context.Context, waiting map[types.UID]*waitingPod, now time.Time, res *waitResult) {
	for uid, wp := range waiting {
		delete(waiting, uid)
		c := cutOff(wp, now)
		if err := d.forceDelete(ctx, &wp.pod); err != nil {
			res.stuck = append(res.stuck, PodProblem{Namespace: wp.pod.Namespace, Name: wp.pod.Name, Reason: err.Error()})
			res.forcedStuck = true
		} else {
			c.Forced = true
			res.forced++
		}
		res.cut = append(res.cut, c)
	}
	sortCut(res.cut)
}

// stuckProblem says why a pod counts as stuck.
func (d *Drainer) stuckProblem(wp *waitingPod) PodProblem {
	reason := fmt.Sprintf("still terminating %v after its %d s grace period (is its kubelet down?)", d.stuckAfter, wp.grace)
	if f := wp.pod.Finalizers; len(f) > 0 {
		reason += "; finalizers: " + strings.Join(f, ", ")
	}
	return PodProblem{Namespace: wp.pod.Namespace, Name: wp.pod.Name, Reason: reason}
}

// finishedReason says whether p's containers have all ended (phase
// Succeeded or Failed) and, if so, what still holds its object.
func finishedReason(p *corev1.Pod) (string, bool) {
	if !Finished(p) {
		return "", false
	}
	reason := "its containers ended (" + string(p.Status.Phase) + ")"
	switch {
	case len(p.Finalizers) > 0:
		reason += "; its object is held by finalizers: " + strings.Join(p.Finalizers, ", ")
	case p.DeletionTimestamp == nil:
		reason += "; its object was not deleted"
	}
	return reason, true
}

// nextWake is the next time waitGone must act without an event: the
// deadline, or the earliest bound or blocked deletion of a waiting pod. ok is false when there
// is none.
func nextWake(waiting map[types.UID]*waitingPod, deadline time.Time, deadlineDone bool) (t time.Time, ok bool) {
	if !deadlineDone {
		t, ok = deadline, true
	}
	for _, wp := range waiting {
		for _, at := range []time.Time{wp.until, wp.deleteAt} {
			if !at.IsZero() && (!ok || at.Before(t)) {
				t, ok = at, true
			}
		}
	}
	return t, ok
}

// timerUntil returns a timer firing at t (nil channel when !ok).
func (d *Drainer) timerUntil(t time.Time, ok bool) (clock.Timer, <-chan time.Time) {
	if !ok {
		return nil, nil
	}
	timer := d.clock.NewTimer(max(t.Sub(d.clock.Now()), 0))
	return timer, timer.C()
}

func stopTimer(t clock.Timer) {
	if t != nil {
		t.Stop()
	}
}
