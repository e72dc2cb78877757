package drain

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Node actions aws-node-termination-handler's users rely on, besides
// cordon, taint and drain.
const (
	// LabelExcludeFromLB takes a node out of external load balancers
	// (the service controller honours it).
	LabelExcludeFromLB = "node.kubernetes.io/exclude-from-external-load-balancers"
	// ExcludeFromLBValue marks the label as lifeboat's: Uncordon removes
	// only a label with this value, never one an operator set.
	ExcludeFromLBValue = "lifeboat"
	// TaintOutOfService tells Kubernetes the node is shut down: pods
	// without a toleration are deleted and their volumes detached at once.
	// It is safe only on a node whose instance no longer runs: package
	// outofservice decides when (MarkOutOfService, ClearOutOfService).
	TaintOutOfService = "node.kubernetes.io/out-of-service"
	// OutOfServiceValue is the taint's value (the one Kubernetes documents).
	OutOfServiceValue = "nodeshutdown"
	// AnnotationOutOfService is set when lifeboat added the out-of-service
	// taint, so that Uncordon removes only a taint lifeboat added.
	AnnotationOutOfService = "lifeboat.io/out-of-service"
)

// Actions are the optional node actions of a Drainer. The zero value is
// lifeboat's default: pods' own grace periods, no cap on a drain but AWS's
// deadline, NoSchedule taints, no label.
type Actions struct {
	// PodGrace, if positive, is the grace period every eviction asks for
	// instead of the pod's own (still cut to fit a deadline).
	PodGrace time.Duration
	// NodeGrace, if positive, caps a whole drain: its deadline is the
	// earlier of AWS's and NodeGrace after the drain starts.
	NodeGrace time.Duration
	// TaintEffect is the effect of lifeboat's taints; empty: NoSchedule.
	TaintEffect corev1.TaintEffect
	// ExcludeFromLB labels cordoned nodes LabelExcludeFromLB.
	ExcludeFromLB bool
}

func (a Actions) taintEffect() corev1.TaintEffect {
	if a.TaintEffect == "" {
		return corev1.TaintEffectNoSchedule
	}
	return a.TaintEffect
}

// capDeadline returns the drain's deadline: AWS's (zero: none) or, when
// earlier, NodeGrace after now.
func (a Actions) capDeadline(deadline, now time.Time) time.Time {
	if a.NodeGrace <= 0 {
		return deadline
	}
	limit := now.Add(a.NodeGrace)
	if deadline.IsZero() || limit.Before(deadline) {
		return limit
	}
	return deadline
}

// requestedGrace is the grace period an eviction asks for before any
// deadline: PodGrace when set, else the pod's own.
func (a Actions) requestedGrace(pod *corev1.Pod) int64 {
	if a.PodGrace > 0 {
		return max(int64(a.PodGrace/time.Second), MinGrace)
	}
	return ownGrace(pod)
}

// markCordoned applies the optional cordon actions to n (the label); it
// reports whether n changed.
func (a Actions) markCordoned(n *corev1.Node) bool {
	if !a.ExcludeFromLB {
		return false
	}
	if _, ok := n.Labels[LabelExcludeFromLB]; ok {
		return false // ours already, or an operator's: leave it as it is
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[LabelExcludeFromLB] = ExcludeFromLBValue
	return true
}

// unmarkCordoned removes what markCordoned and the out-of-service taint
// added, and only that; it reports whether n changed. It runs whatever the
// options are now: a node labelled by an earlier configuration is cleaned
// up too.
func unmarkCordoned(n *corev1.Node) bool {
	changed := false
	if n.Labels[LabelExcludeFromLB] == ExcludeFromLBValue {
		delete(n.Labels, LabelExcludeFromLB)
		changed = true
	}
	return unmarkOutOfService(n) || changed
}

// unmarkOutOfService removes the out-of-service taint and its annotation
// if lifeboat added them; it reports whether n changed.
func unmarkOutOfService(n *corev1.Node) bool {
	if n.Annotations[AnnotationOutOfService] != "true" {
		return false
	}
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == TaintOutOfService })
	delete(n.Annotations, AnnotationOutOfService)
	return true
}

// Drain evicts every pod on node that lifeboat may evict, ordinary pods
// first and system-critical pods last, and waits until they are gone. With a
// non-zero deadline (AWS's, dl.At, or Actions.NodeGrace from now when earlier),
// grace periods are capped to the time left (never below 1 s); when AWS
// enforces it (dl.Enforced), pods still blocked are deleted in time for
// their shutdown (Options.DeleteBlocked, PlanBlockedDelete). Before the
// first eviction, the pods to evict learn AWS's deadline (dl.Announced,
// Options.AnnotatePods) and the node gets ConditionTerminating. Every wait
// is bounded: by the deadline, or by Options.StuckAfter. It never adds the
// out-of-service taint: the instance may still be running when the drain
// ends. progress may be nil. A drain that ends with pods still on the
// node, at the deadline or canceled (ctx; its error is then ctx's), names
// them in Result.CutOff with why; canceled, its Result is what it did
// until then.
func (d *Drainer) Drain(ctx context.Context, node string, dl Deadline, progress func(Progress)) (Result, error) {
	dl.aws, dl.At = dl.At, d.acts.capDeadline(dl.At, d.clock.Now())
	res, err := d.drainPods(ctx, node, dl, progress)
	sortCut(res.CutOff)
	return res, err
}

// MarkOutOfService adds the out-of-service taint (NoExecute) and the
// annotation that says lifeboat added it, unless the node carries the
// taint already (lifeboat's, or someone else's). Call it only once the
// node's instance is confirmed shut down. It reports whether it changed
// the node.
func (d *Drainer) MarkOutOfService(ctx context.Context, node string) (bool, error) {
	return d.modify(ctx, node, "tainting out of service", func(n *corev1.Node) bool {
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == TaintOutOfService }) {
			return false
		}
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintOutOfService, Value: OutOfServiceValue, Effect: corev1.TaintEffectNoExecute})
		setAnnotation(n, AnnotationOutOfService, "true")
		return true
	})
}

// ClearOutOfService removes the out-of-service taint lifeboat added (and
// its annotation), never one it did not add. It reports whether it changed
// the node.
func (d *Drainer) ClearOutOfService(ctx context.Context, node string) (bool, error) {
	return d.modify(ctx, node, "removing out-of-service taint", unmarkOutOfService)
}
