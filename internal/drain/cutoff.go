package drain

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Cause says why a pod was still on the node when its drain ended.
type Cause string

const (
	// CauseMidShutdown: the pod was asked to leave (its eviction accepted,
	// or its namespace deleting it) and was still terminating: its
	// shutdown was cut short.
	CauseMidShutdown Cause = "mid-shutdown"
	// CauseNotStarted: the pod was never asked to leave: its eviction was
	// refused until then (a PodDisruptionBudget's 429, an admission
	// webhook's 403) or not accepted yet (the drain ended first, or did not
	// reach its priority group).
	CauseNotStarted Cause = "not-started"
	// CauseFinalizer: the pod was asked to leave and its grace period is
	// over, but finalizers hold its object.
	CauseFinalizer Cause = "finalizer"
)

// CutOffPod names a pod still on the node when its drain ended, and why.
type CutOffPod struct {
	Namespace, Name string
	Cause           Cause
	// Detail says more: the grace period it got, the refusal, the
	// finalizers.
	Detail string
	// Forced: deleted at the deadline (Options.ForceDeleteAtDeadline).
	Forced bool
}

// Key is the pod's namespace/name.
func (p CutOffPod) Key() string { return p.Namespace + "/" + p.Name }

// String is "namespace/name: cause (detail)".
func (p CutOffPod) String() string {
	s := p.Key() + ": " + string(p.Cause)
	if p.Detail != "" {
		s += " (" + p.Detail + ")"
	}
	return s
}

// notAccepted says why a pod whose eviction the API server never accepted
// is still there: its last refusal, if any.
func notAccepted(o evictOutcome) string {
	switch {
	case o.kind == evictRefused:
		return "eviction refused for good: " + o.reason
	case o.reason != "":
		return "eviction " + o.reason
	}
	return "its eviction was not accepted before the drain ended"
}

// newWaiting returns the pod to wait for as its eviction (outs, by UID)
// left it; a pod not in outs counts as asked to leave with the grace its
// eviction asks for.
func (d *Drainer) newWaiting(p corev1.Pod, outs map[types.UID]evictOutcome) *waitingPod {
	wp := &waitingPod{pod: p, asked: true, grace: d.acts.requestedGrace(&p)}
	if o, ok := outs[p.UID]; ok {
		switch {
		case o.kind == evictAccepted || o.kind == evictDeletedBlocked:
			wp.grace = o.grace
		case o.kind == evictCanceled && p.DeletionTimestamp != nil:
			// Canceled with its eviction's answer still on the way: the
			// pod is terminating, so the eviction was accepted (or
			// someone else deleted it). It is mid-shutdown, not
			// not-started (test/realnode TestInstanceDiesMidShutdown saw
			// the Node deleted while the accepted eviction's answer was
			// in flight).
			if p.DeletionGracePeriodSeconds != nil {
				wp.grace = *p.DeletionGracePeriodSeconds
			}
		case o.kind == evictDeadline || o.kind == evictRefused || o.kind == evictCanceled:
			wp.asked, wp.why = false, notAccepted(o)
		}
	}
	wp.grace = max(wp.grace, MinGrace)
	return wp
}

// cutOff says why a waited-for pod is still there at now.
func cutOff(wp *waitingPod, now time.Time) CutOffPod {
	p := &wp.pod
	c := CutOffPod{Namespace: p.Namespace, Name: p.Name}
	over := p.DeletionTimestamp != nil && !now.Before(p.DeletionTimestamp.Time)
	switch {
	case !wp.asked:
		c.Cause, c.Detail = CauseNotStarted, wp.why
	case over && len(p.Finalizers) > 0:
		c.Cause, c.Detail = CauseFinalizer, "its grace period is over; finalizers: "+strings.Join(p.Finalizers, ", ")
	default:
		c.Cause, c.Detail = CauseMidShutdown, fmt.Sprintf("evicted with a grace period of %d s, still terminating", wp.grace)
		if over {
			c.Detail += " after it (is its kubelet down?)"
		}
	}
	return c
}

// cutAll returns the pods of waiting cut off at now, sorted.
func cutAll(waiting map[types.UID]*waitingPod, now time.Time) []CutOffPod {
	var out []CutOffPod
	for _, wp := range waiting {
		out = append(out, cutOff(wp, now))
	}
	sortCut(out)
	return out
}

func sortCut(ps []CutOffPod) {
	slices.SortFunc(ps, func(a, b CutOffPod) int { return strings.Compare(a.Key(), b.Key()) })
}

// stillThereTimeout bounds the list stillThere makes after a cancel.
const stillThereTimeout = 5 * time.Second

// stillThere lists the node's pods once more, after ctx was canceled (a
// drain stopped during its evictions), so that only the pods still there
// are reported cut off: by UID, those whose containers have not all
// ended. listed is false if the list failed. The list goes through the
// pod-read lane: a leader stopping in a storm cancels a thousand drains at
// once, whose lists took the main client's tokens past stillThereTimeout
// (971 such warnings in a 1,000-node failover run).
func (d *Drainer) stillThere(ctx context.Context, node string) (there map[types.UID]*corev1.Pod, listed bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stillThereTimeout)
	defer cancel()
	list, err := NodePods(ctx, d.reads, node, "")
	if err != nil {
		d.log.Warn("listing the pods left by a canceled drain failed", "node", node, "error", err.Error())
		return nil, false
	}
	out := map[types.UID]*corev1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		if _, done := finishedReason(p); !done {
			out[p.UID] = p
		}
	}
	return out, true
}
