package drain

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"lifeboat.dev/lifeboat/internal/podnotice"
)

// ConditionTerminating is the type of the Node condition lifeboat sets,
// status True, when it begins to drain the node (reason: the plan's
// reason in CamelCase, message: AWS's deadline), and sets False when it
// uncordons the node: other controllers can watch it.
const ConditionTerminating corev1.NodeConditionType = "lifeboat.io/Terminating"

// ReasonUncordoned is the reason of ConditionTerminating set False.
const ReasonUncordoned = "Uncordoned"

// notice tells the workload, before the drain's first eviction, what is
// coming: the pods about to be evicted that can read them
// (podnotice.Readers) get podnotice's annotations (Options.AnnotatePods)
// and the node ConditionTerminating (Options.TerminatingCondition). Neither is a
// condition of the drain: a failure is logged once, and the step holds
// the first eviction up for podnotice.Bound at most: when it wrote any
// annotation, until podnotice.Lead after it began, so that the kubelet
// can show it to the pods before their SIGTERM. Never in a dry run.
func (d *Drainer) notice(ctx context.Context, node string, pods []corev1.Pod, dl Deadline) {
	if d.dryRun {
		return
	}
	start := d.clock.Now()
	n := podnotice.Notice{Deadline: dl.Announced, Reason: dl.Reason}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if d.condition {
			d.setTerminating(ctx, node, n)
		}
	}()
	if readers := podnotice.Readers(pods); d.annotatePods && len(readers) > 0 {
		r := podnotice.Annotate(ctx, d.client, readers, n, d.parallel)
		if r.Failed > 0 {
			d.log.Warn("annotating pods with the deadline failed; they are evicted all the same", "node", node,
				"failed", r.Failed, "written", r.Written, "error", r.Err.Error())
		}
		if r.Written > 0 {
			d.log.Debug("pods annotated with the deadline", "node", node, "written", r.Written, "unchanged", r.Unchanged)
			d.waitUntil(ctx, start.Add(podnotice.Lead))
		}
	}
	<-done
}

// waitUntil waits on the clock until t, or until ctx ends.
func (d *Drainer) waitUntil(ctx context.Context, t time.Time) {
	left := t.Sub(d.clock.Now())
	if left <= 0 {
		return
	}
	timer := d.clock.NewTimer(left)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C():
	}
}

// setTerminating sets ConditionTerminating True on the node, unless it
// says so already; a failure is logged.
func (d *Drainer) setTerminating(ctx context.Context, node string, n podnotice.Notice) {
	ctx, cancel := context.WithTimeout(ctx, podnotice.Bound)
	defer cancel()
	msg := "AWS's deadline is not known"
	if !n.Deadline.IsZero() {
		msg = "AWS takes the instance at " + n.Deadline.UTC().Format(time.RFC3339)
	}
	msg = fmt.Sprintf("draining for %s: %s", n.Reason, msg)
	cond := corev1.NodeCondition{Type: ConditionTerminating, Status: corev1.ConditionTrue, Reason: camel(n.Reason), Message: msg}
	if err := d.writeCondition(ctx, node, cond); err != nil {
		d.log.Warn("setting the node condition "+string(ConditionTerminating)+" failed; the drain goes on", "node", node, "error", err.Error())
	}
}

// clearTerminating sets ConditionTerminating False on a node that has it
// True (lifeboat uncordoned it); a failure is logged, the uncordon stands.
func (d *Drainer) clearTerminating(ctx context.Context, node string) {
	if d.dryRun {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, podnotice.Bound)
	defer cancel()
	cond := corev1.NodeCondition{Type: ConditionTerminating, Status: corev1.ConditionFalse, Reason: ReasonUncordoned,
		Message: "lifeboat uncordoned the node: the events it drained for were canceled or completed"}
	if err := d.writeCondition(ctx, node, cond); err != nil {
		d.log.Warn("clearing the node condition "+string(ConditionTerminating)+" failed", "node", node, "error", err.Error())
	}
}

// writeCondition writes cond through the node's status subresource, as a
// strategic merge patch (conditions merge by type: the kubelet's stay),
// unless the node carries it already. False is written only over True.
// The transition time is the clock's when the status changes.
func (d *Drainer) writeCondition(ctx context.Context, node string, cond corev1.NodeCondition) error {
	cur, err := d.readNode(ctx, node, true)
	if err != nil {
		return err
	}
	now := metav1.NewTime(d.clock.Now())
	cond.LastHeartbeatTime, cond.LastTransitionTime = now, now
	if old := findCondition(cur, cond.Type); old != nil {
		if old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message {
			return nil
		}
		if old.Status == cond.Status {
			cond.LastTransitionTime = old.LastTransitionTime
		}
	} else if cond.Status != corev1.ConditionTrue {
		return nil // never set: nothing to clear
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{cond}}})
	if err != nil {
		return err
	}
	written, err := d.nodes.Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err == nil && d.cache != nil {
		d.written.put(written)
	}
	return err
}

func findCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// camel turns a kind (spot-interruption) into a condition reason
// (SpotInterruption); "" is Draining.
func camel(kind string) string {
	var b strings.Builder
	up := true
	for _, r := range kind {
		if r == '-' || r == '_' || r == ' ' {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		b.WriteRune(r)
	}
	if b.Len() == 0 {
		return "Draining"
	}
	return b.String()
}
