// Package drain cordons, taints and drains one node through the Kubernetes
// API: evictions (policy/v1) in priority groups, PodDisruptionBudget backoff,
// grace periods capped by AWS's deadline, and waiting until pods are gone.
//
// It owns every write lifeboat makes to Nodes and Pods. It must not talk to
// AWS or decide what to do (that is the plan's job); every step is idempotent
// so a restarted lifeboat can repeat it.
package drain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ErrNodeGone (wrapped) means the Node no longer exists: there is nothing
// left to cordon or drain. Retrying cannot succeed.
var ErrNodeGone = errors.New("node no longer exists")

// Annotations lifeboat keeps on a Node. They are its memory across restarts.
const (
	// AnnotationCordoned is set when lifeboat cordoned a node that was
	// schedulable, so that only such a node is ever uncordoned by lifeboat.
	AnnotationCordoned = "lifeboat.io/cordoned"
	// AnnotationEvents holds the JSON of the events in progress for the node.
	AnnotationEvents = "lifeboat.io/events"
)

// Cordon marks the node unschedulable, sets the taints with the given keys
// (effect Actions.TaintEffect, value = reason), the annotations and, with
// Actions.ExcludeFromLB, the load balancer label. It reports
// whether anything changed. Conflicts are retried on a fresh read.
func (d *Drainer) Cordon(ctx context.Context, node string, taintKeys []string, reason string, annotations map[string]string) (bool, error) {
	effect := d.acts.taintEffect()
	return d.modify(ctx, node, "cordoning", func(n *corev1.Node) bool {
		changed := d.acts.markCordoned(n)
		if !n.Spec.Unschedulable {
			n.Spec.Unschedulable = true
			setAnnotation(n, AnnotationCordoned, "true")
			changed = true
		}
		for _, key := range taintKeys {
			if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key && t.Effect == effect }) {
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: reason, Effect: effect})
				changed = true
			}
		}
		for k, v := range annotations {
			if n.Annotations[k] != v {
				setAnnotation(n, k, v)
				changed = true
			}
		}
		return changed
	})
}

// Uncordon undoes Cordon: it removes lifeboat's taints (keys with prefix),
// the load balancer label and out-of-service taint lifeboat added, and the
// given annotations, and makes the node schedulable again only if
// lifeboat cordoned it. It reports whether anything changed.
func (d *Drainer) Uncordon(ctx context.Context, node, taintPrefix string, annotations []string) (bool, error) {
	changed, err := d.modify(ctx, node, "uncordoning", func(n *corev1.Node) bool { return uncordon(n, taintPrefix, annotations) })
	if err == nil {
		d.clearTerminating(ctx, node)
	}
	return changed, err
}

// ExpireCordon undoes a cordon lifeboat set for the taint key alone (a
// rebalance recommendation): as Uncordon, unless the node as it is
// written carries another taint with taintPrefix (an interruption
// followed), whose cordon stays: then only the annotations go, and that
// taint's key is returned. The choice is made on the object written, so a
// cordon that lands in between is never undone.
func (d *Drainer) ExpireCordon(ctx context.Context, node, taintPrefix, key string, annotations []string) (other string, changed bool, err error) {
	changed, err = d.modify(ctx, node, "uncordoning", func(n *corev1.Node) bool {
		other = ""
		for _, t := range n.Spec.Taints {
			if strings.HasPrefix(t.Key, taintPrefix) && t.Key != key {
				other = t.Key
				return removeAnnotations(n, annotations)
			}
		}
		return uncordon(n, taintPrefix, annotations)
	})
	if err == nil && other == "" {
		d.clearTerminating(ctx, node)
	}
	return other, changed, err
}

// UncordonIf undoes Cordon as Uncordon does (without removing
// annotations) and sets the annotations decide returns, in one write, if
// decide says so of the node as it is written (a read-modify-write with a
// resourceVersion precondition): a cordon that lands in between is never
// undone. The node is read from the API server, never from the cache or
// lifeboat's last write, so that a "no" is not decided on a stale copy (a
// kubelet's new status is newer than lifeboat's last write). It reports
// whether decide allowed it and whether anything changed.
func (d *Drainer) UncordonIf(ctx context.Context, node, taintPrefix string, decide func(n *corev1.Node) (set map[string]string, ok bool)) (allowed, changed bool, err error) {
	changed, err = d.modifyFrom(ctx, node, "uncordoning", false, func(n *corev1.Node) bool {
		set, ok := decide(n)
		allowed = ok
		if !ok {
			return false
		}
		changed := uncordon(n, taintPrefix, nil)
		for k, v := range set {
			if n.Annotations[k] != v {
				setAnnotation(n, k, v)
				changed = true
			}
		}
		return changed
	})
	return allowed, changed, err
}

// UpdateAnnotations sets the annotations update returns for the node's
// current ones (value "": removed), deciding on the object written (see
// modify): a list kept in an annotation loses no entry to a stale read.
func (d *Drainer) UpdateAnnotations(ctx context.Context, node string, update func(current map[string]string) map[string]string) error {
	_, err := d.modify(ctx, node, "annotating", func(n *corev1.Node) bool {
		changed := false
		for k, v := range update(n.Annotations) {
			if _, ok := n.Annotations[k]; v == "" && ok {
				delete(n.Annotations, k)
				changed = true
			} else if v != "" && n.Annotations[k] != v {
				setAnnotation(n, k, v)
				changed = true
			}
		}
		return changed
	})
	return err
}

// uncordon applies Uncordon to n; it reports whether n changed.
func uncordon(n *corev1.Node, taintPrefix string, annotations []string) bool {
	changed := unmarkCordoned(n)
	if n.Annotations[AnnotationCordoned] == "true" {
		n.Spec.Unschedulable = false
		delete(n.Annotations, AnnotationCordoned)
		changed = true
	}
	kept := n.Spec.Taints[:0]
	for _, t := range n.Spec.Taints {
		if strings.HasPrefix(t.Key, taintPrefix) {
			changed = true
			continue
		}
		kept = append(kept, t)
	}
	n.Spec.Taints = kept
	return removeAnnotations(n, annotations) || changed
}

func removeAnnotations(n *corev1.Node, annotations []string) bool {
	changed := false
	for _, k := range annotations {
		if _, ok := n.Annotations[k]; ok {
			delete(n.Annotations, k)
			changed = true
		}
	}
	return changed
}

// SetAnnotations sets (value != "") or removes (value == "") node annotations
// with a merge patch; no read is needed and no other field is touched.
func (d *Drainer) SetAnnotations(ctx context.Context, node string, annotations map[string]string) error {
	if d.dryRun || len(annotations) == 0 {
		return nil
	}
	patch, err := annotationPatch(annotations)
	if err != nil {
		return err
	}
	n, err := d.nodes.Nodes().Patch(ctx, node, mergePatch, patch, metav1.PatchOptions{})
	if err == nil && d.cache != nil {
		d.written.put(n)
	}
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("annotating node %s: %w: %w", node, ErrNodeGone, err)
	}
	if err != nil {
		return fmt.Errorf("annotating node %s: %w", node, err)
	}
	return nil
}

func setAnnotation(n *corev1.Node, k, v string) {
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[k] = v
}

// readNode returns a copy of the node to modify. The first attempt of an
// update uses the informer cache when there is one (no GET: the update's
// resourceVersion makes it safe, a stale copy answers 409 Conflict); retries
// read the node from the API server.
func (d *Drainer) readNode(ctx context.Context, node string, first bool) (*corev1.Node, error) {
	if first && d.cache != nil {
		n, ok := d.cache(node)
		if w := d.written.newer(node, n, ok); w != nil {
			return w.DeepCopy(), nil
		}
		if ok {
			return n.DeepCopy(), nil
		}
	}
	d.written.forget(node) // refused: start afresh
	n, err := d.nodes.Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return n.DeepCopy(), nil
}

func annotationPatch(annotations map[string]string) ([]byte, error) {
	m := map[string]any{}
	for k, v := range annotations {
		if v == "" {
			m[k] = nil
		} else {
			m[k] = v
		}
	}
	return json.Marshal(map[string]any{"metadata": map[string]any{"annotations": m}})
}
