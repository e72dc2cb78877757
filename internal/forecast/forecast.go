// Package forecast predicts whether a node's drain can finish before AWS's
// deadline, from what is known when the work starts: the deadline, the pods
// left (grace period, preStop hook, drain order), and the
// PodDisruptionBudgets covering them with the disruptions they allow now.
// The grace periods and the deadline are those the drain works with:
// --pod-grace-period replaces each pod's own, --node-grace-period caps the
// deadline (drain.EvictionGrace, drain.DrainDeadline).
//
// It is pure: no I/O, no clock (the caller passes now). The prediction is
// a bound, not a simulation: a pod is assumed to take its whole grace
// period once asked to leave (a preStop hook usually does; kubelet allows
// no more), and a budget's allowed disruptions are assumed not to grow
// before the deadline (a replacement pod becoming ready would free one,
// which lifeboat cannot know in advance). That worst case names every pod
// that may miss; most stop sooner. Each miss also says whether it is
// certain: the pod cannot be gone whatever it does (certain.go).
package forecast

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"lifeboat.dev/lifeboat/internal/drain"
)

// Reason says why a pod will not be gone before the deadline.
type Reason string

const (
	// PDBBlocks: a PodDisruptionBudget covering the pod allows no
	// disruption (now, or after the evictions before it): its eviction is
	// refused until the deadline.
	PDBBlocks Reason = "PDBBlocks"
	// GraceExceedsTimeLeft: the pod's grace period is longer than the time
	// left before the deadline even if it were asked to leave now: the
	// drain cuts it, and its shutdown (preStop hook) is cut short.
	GraceExceedsTimeLeft Reason = "GraceExceedsTimeLeft"
	// OrderedTooLate: the pod's grace period would fit from now, but the
	// drain order (system-critical pods after the others) asks it to
	// leave too late, or never before the deadline when a pod drained
	// before it is blocked.
	OrderedTooLate Reason = "OrderedTooLate"
)

// defaultGrace is Kubernetes' terminationGracePeriodSeconds default.
const defaultGrace = 30 * time.Second

// Input is what a forecast is computed from.
type Input struct {
	Now time.Time
	// Deadline is when AWS acts on the instance; zero: no deadline, and
	// nothing can miss it.
	Deadline time.Time
	// Margin is kept in reserve before the deadline: the drainer caps
	// grace periods to end Margin before it.
	Margin time.Duration
	// Pods are the pods the drain still has to remove (drain.PodsToEvict).
	Pods []corev1.Pod
	// PDBs are the PodDisruptionBudgets of the cluster (or at least of the
	// pods' namespaces), with their status as it is now.
	PDBs []policyv1.PodDisruptionBudget
	// PodGrace, if positive, is the grace period every eviction asks for
	// instead of the pod's own (--pod-grace-period, drain.Actions.PodGrace).
	PodGrace time.Duration
	// NodeGrace, if positive, caps the drain: its deadline is the earlier
	// of Deadline and NodeGrace after Started (--node-grace-period,
	// drain.Actions.NodeGrace).
	NodeGrace time.Duration
	// Started is when the drain started (zero: Now).
	Started time.Time
	// DeleteBlocked: the deadline is one AWS enforces and the drain
	// deletes a pod a budget still blocks at the deadline less its grace
	// period less Margin (drain.Options.DeleteBlocked,
	// drain.PlanBlockedDelete): such a pod leaves by then, its shutdown
	// whole when its grace fits, instead of never.
	DeleteBlocked bool
}

// Miss is a pod that will not be gone before the deadline.
type Miss struct {
	Namespace, Name string
	UID             types.UID
	Reason          Reason
	// Detail is a sentence for people: the budget, the grace period and
	// the time left (and, for a certain miss, why it is certain).
	Detail string
	// Certain: the pod cannot be gone (or its preStop hook end) before
	// the deadline whatever it does: a budget that allows no disruption
	// and expects no replacement, a preStop sleep longer than the time the
	// pod can have, or a place in the drain order behind such a pod.
	// Otherwise the miss is only possible: it needs the pod to use its
	// whole grace period, or a budget to stay closed while a pod it
	// expects may still become ready.
	Certain bool
}

func (m Miss) String() string {
	return m.Namespace + "/" + m.Name + " (" + string(m.Reason) + ": " + m.Detail + ")"
}

// Forecast is the prediction for one node.
type Forecast struct {
	// Pods counts the pods left to drain.
	Pods int
	// TimeLeft is the time until AWS's deadline, Input.Deadline (zero
	// without one). Misses are counted against the drain's deadline, which
	// Input.NodeGrace may make earlier; their details say so.
	TimeLeft time.Duration
	// ToEmpty is the expected time until the last pod is gone (grace
	// periods cut to the deadline as the drainer cuts them); Bounded is
	// false when a pod is blocked by a budget (it leaves only when the
	// budget allows, which cannot be predicted).
	ToEmpty time.Duration
	Bounded bool
	// Misses are the pods that will not be gone before the deadline, in
	// drain order.
	Misses []Miss
}

// Missed reports whether the drain is expected to miss the deadline in the
// worst case.
func (f Forecast) Missed() bool { return len(f.Misses) > 0 }

// CertainMisses returns the misses that are certain, in drain order.
func (f Forecast) CertainMisses() []Miss {
	var out []Miss
	for _, m := range f.Misses {
		if m.Certain {
			out = append(out, m)
		}
	}
	return out
}

// Class sums a forecast up: a miss is certain, only possible, or none.
type Class string

const (
	// CertainMiss: at least one pod certainly misses the deadline.
	CertainMiss Class = "certain-miss"
	// PossibleMiss: pods miss it only in the worst case.
	PossibleMiss Class = "possible-miss"
	// Clear: every pod is gone before the deadline even in the worst case.
	Clear Class = "clear"
)

// Class is the forecast's class.
func (f Forecast) Class() Class {
	switch {
	case len(f.CertainMisses()) > 0:
		return CertainMiss
	case f.Missed():
		return PossibleMiss
	}
	return Clear
}

// For forecasts one node's drain.
func For(in Input) Forecast {
	f := Forecast{Pods: len(in.Pods), Bounded: true}
	if !in.Deadline.IsZero() {
		f.TimeLeft = max(in.Deadline.Sub(in.Now), 0)
	}
	started := in.Started
	if started.IsZero() {
		started = in.Now
	}
	// deadline is the drain's: AWS's, or NodeGrace after its start.
	deadline := drain.DrainDeadline(in.Deadline, started, in.NodeGrace)
	hasDeadline := !deadline.IsZero()
	before := "the deadline"
	if !deadline.Equal(in.Deadline) {
		before = fmt.Sprintf("the drain's deadline %s (--node-grace-period %s after its start)", deadline.UTC().Format(time.RFC3339), in.NodeGrace)
	}
	// usable is how long pods may take from now: the drainer caps grace
	// periods to end Margin before the deadline.
	var usable time.Duration
	if hasDeadline {
		usable = max(deadline.Sub(in.Now)-in.Margin, 0)
	}
	allowed := make([]int32, len(in.PDBs))
	onNode := make([]int, len(in.PDBs)) // pods of each budget left to evict
	for i, b := range in.PDBs {
		allowed[i] = b.Status.DisruptionsAllowed
		for j := range in.Pods {
			if in.Pods[j].DeletionTimestamp == nil && covers(&in.PDBs[i], &in.Pods[j]) {
				onNode[i]++
			}
		}
	}
	miss := func(p *corev1.Pod, r Reason, detail, certain string) {
		if !hasDeadline {
			return
		}
		m := Miss{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Reason: r, Detail: detail, Certain: certain != ""}
		if m.Certain {
			m.Detail += "; certain: " + certain
		}
		f.Misses = append(f.Misses, m)
	}
	// start is when the current group's evictions begin (from now) in the
	// worst case, soonest in the best (every pod leaves as soon as it
	// can); blocked means an earlier group never empties before the
	// deadline, surely when surelyBlocked.
	var start, soonest time.Duration
	blocked, surelyBlocked := false, false
	for gi, group := range drain.Order(in.Pods) {
		end, soonestEnd := start, soonest
		groupBlocked, groupSurelyBlocked := false, false
		for i := range group {
			p := &group[i]
			grace := drain.EvictionGrace(p, in.PodGrace)
			// cut says why the pod's preStop hook is surely cut, if it is.
			cut := preStopCut(p, grace, usable-soonest)
			graceNote := ""
			if in.PodGrace > 0 {
				graceNote = " (--pod-grace-period)"
			}
			if p.DeletionTimestamp != nil {
				// Already asked to leave: gone by its deletion timestamp
				// (now plus the grace period it was given).
				// When it stops is unknown: never a certain miss.
				left := max(p.DeletionTimestamp.Sub(in.Now), 0)
				end = max(end, left)
				if hasDeadline && left > usable {
					miss(p, GraceExceedsTimeLeft, fmt.Sprintf("terminating until %s, after %s", p.DeletionTimestamp.UTC().Format(time.RFC3339), before), "")
				}
				continue
			}
			if blocked {
				certain := ""
				if surelyBlocked {
					certain = "a pod drained before it can never leave"
				}
				miss(p, OrderedTooLate, fmt.Sprintf("drained in group %d, after a pod a PodDisruptionBudget blocks until the deadline", gi+1), certain)
				continue
			}
			at := start // when the pod is asked to leave, from now
			idx := blocking(p, in.PDBs, allowed)
			if len(idx) > 0 && in.DeleteBlocked && hasDeadline {
				// Deleted when its BlockedDelete is due, counted from
				// AWS's deadline (at once, its grace cut, when that has
				// passed), if the drain still runs then.
				at = max(start, in.Deadline.Sub(in.Now)-in.Margin-grace)
			}
			if len(idx) > 0 && (!in.DeleteBlocked || !hasDeadline || at >= usable) {
				groupBlocked = true
				f.Bounded = false
				certain := closedFor(p, in.PDBs, idx)
				groupSurelyBlocked = groupSurelyBlocked || certain != ""
				miss(p, PDBBlocks, blockedDetail(in.PDBs, idx, onNode), certain)
				continue
			}
			consume(p, in.PDBs, allowed)
			soonestEnd = max(soonestEnd, soonestGone(p, grace, soonest, usable, hasDeadline))
			if !hasDeadline || at+grace <= usable {
				end = max(end, at+grace)
				continue
			}
			// The drainer cuts the grace period to the time left (never
			// below a second): the pod is gone then, its shutdown cut.
			end = max(end, max(usable, at+time.Second))
			hook := "no preStop hook"
			if HasPreStop(p) {
				hook = "its preStop hook is cut short"
			}
			if grace <= usable {
				miss(p, OrderedTooLate, fmt.Sprintf("asked to leave %s from now (group %d, system-critical pods last) with a grace period of %s%s; %s left before %s: %s",
					at.Round(time.Second), gi+1, grace, graceNote, usable.Round(time.Second), before, hook), cut)
			} else {
				miss(p, GraceExceedsTimeLeft, fmt.Sprintf("grace period %s%s, %s left before %s: %s", grace, graceNote, usable.Round(time.Second), before, hook), cut)
			}
		}
		blocked = blocked || groupBlocked
		surelyBlocked = surelyBlocked || groupSurelyBlocked
		start, soonest = end, soonestEnd
	}
	if f.Bounded {
		f.ToEmpty = start
	}
	return f
}

// GraceOf is the pod's termination grace period (30 s when unset, as
// the API server defaults it).
func GraceOf(p *corev1.Pod) time.Duration {
	if p.Spec.TerminationGracePeriodSeconds == nil {
		return defaultGrace
	}
	return time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second
}

// HasPreStop reports whether a container of the pod has a preStop hook.
func HasPreStop(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
			return true
		}
	}
	return false
}

// blocking returns the indexes of the budgets covering p that allow no
// more disruption.
func blocking(p *corev1.Pod, pdbs []policyv1.PodDisruptionBudget, allowed []int32) []int {
	var idx []int
	for i := range pdbs {
		if covers(&pdbs[i], p) && allowed[i] <= 0 {
			idx = append(idx, i)
		}
	}
	return idx
}

// blockedDetail says why the budgets idx refuse a pod's eviction: none
// allows a disruption now, or fewer than its pods on the node. In the
// second case the evictions race (they run at once): which pods wait is
// not known, only how many; they wait for replacements to become ready.
func blockedDetail(pdbs []policyv1.PodDisruptionBudget, idx []int, onNode []int) string {
	var parts []string
	for _, i := range idx {
		n := pdbs[i].Status.DisruptionsAllowed
		if n <= 0 {
			parts = append(parts, "PodDisruptionBudget "+pdbs[i].Name+" allows no disruption")
			continue
		}
		parts = append(parts, fmt.Sprintf("PodDisruptionBudget %s allows %d disruptions now for %d of its pods on this node: %d of them (whichever are evicted last) wait for replacements to become ready",
			pdbs[i].Name, n, onNode[i], onNode[i]-int(n)))
	}
	return strings.Join(parts, "; ")
}

// consume takes one disruption from every budget covering p: the API
// server's eviction does the same.
func consume(p *corev1.Pod, pdbs []policyv1.PodDisruptionBudget, allowed []int32) {
	for i := range pdbs {
		if covers(&pdbs[i], p) {
			allowed[i]--
		}
	}
}

// Covers reports whether a budget covers a pod: same namespace, and the
// selector matches its labels (policy/v1: an empty selector matches every
// pod of the namespace, a missing one none).
func Covers(b *policyv1.PodDisruptionBudget, p *corev1.Pod) bool { return covers(b, p) }

func covers(b *policyv1.PodDisruptionBudget, p *corev1.Pod) bool {
	if b.Namespace != p.Namespace || b.Spec.Selector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(p.Labels))
}
