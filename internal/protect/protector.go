package protect

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// nodeLister is the node cache.
type nodeLister interface {
	WaitSynced(ctx context.Context) error
	List() []*corev1.Node
}

// autoScaling sets and lifts protection (package asg).
type autoScaling interface {
	GroupOf(ctx context.Context, instanceID string) (group string, protected bool, err error)
	SetProtection(ctx context.Context, group, instanceID string, protect bool) error
}

// annotator writes node annotations ("" removes one; package drain).
type annotator interface {
	SetAnnotations(ctx context.Context, node string, annotations map[string]string) error
}

// Protector runs Plan every Interval and carries out its changes.
type Protector struct {
	Pods     kubernetes.Interface
	Nodes    nodeLister
	ASG      autoScaling
	Annotate annotator
	Recorder record.EventRecorder // nil: no Events
	Clock    clock.WithTicker
	Log      *slog.Logger
	Interval time.Duration
	// DryRun: say once per node what would be protected; change nothing
	// (no record either, so nothing is ever lifted).
	DryRun bool

	// elsewhere remembers instances in no group or protected by someone
	// else, so that they are not described again every pass (by instance).
	elsewhere map[string]bool
	// dry remembers the nodes a dry run reported (by node).
	dry map[string]bool
}

// Run passes until ctx ends; the first pass, right after the node cache is
// synced, lifts what an earlier run left behind.
func (p *Protector) Run(ctx context.Context) error {
	if err := p.Nodes.WaitSynced(ctx); err != nil {
		return err
	}
	t := p.Clock.NewTicker(p.Interval)
	defer t.Stop()
	for {
		if err := p.Pass(ctx); err != nil && ctx.Err() == nil {
			p.Log.Warn("scale-in protection pass failed; retrying", "in", p.Interval, "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// Pass reads the pods, plans and carries out the changes. A failed change
// is retried on the next pass (its record on the node says where it is).
func (p *Protector) Pass(ctx context.Context) error {
	// ResourceVersion "0": served from the API server's cache.
	pl, err := p.Pods.CoreV1().Pods("").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	if p.elsewhere == nil {
		p.elsewhere = map[string]bool{}
	}
	var errs []string
	for _, c := range Plan(p.Nodes.List(), pl.Items) {
		var err error
		if c.Protect {
			err = p.protect(ctx, c)
		} else {
			err = p.lift(ctx, c)
		}
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// protect records the protection on the node, then sets it: a lifeboat
// that stops between the two leaves a record to lift, never protection
// without one.
func (p *Protector) protect(ctx context.Context, c Change) error {
	if p.elsewhere[c.InstanceID] || p.dry[c.Node] {
		return nil
	}
	group, already, err := p.ASG.GroupOf(ctx, c.InstanceID)
	if err != nil {
		return err
	}
	if group == "" || already {
		// Not in a group, or protected by someone else (the group's
		// NewInstancesProtectedFromScaleIn, an operator): not lifeboat's
		// to set, nor to lift.
		p.elsewhere[c.InstanceID] = true
		p.Log.Info("not setting scale-in protection", "node", c.Node, "instanceID", c.InstanceID, "inGroup", group != "", "alreadyProtected", already)
		return nil
	}
	if p.DryRun {
		if p.dry == nil {
			p.dry = map[string]bool{}
		}
		p.dry[c.Node] = true
		p.Log.Info("dry run: would protect the instance from scale-in", "node", c.Node, "instanceID", c.InstanceID, "group", group, "pods", c.Pods)
		return nil
	}
	if err := p.Annotate.SetAnnotations(ctx, c.Node, map[string]string{AnnotationProtected: group}); err != nil {
		return err
	}
	if err := p.ASG.SetProtection(ctx, group, c.InstanceID, true); err != nil {
		// The record stays: the call may have taken effect with its answer
		// lost, and only the record gets the protection lifted later. The
		// node may go unprotected meanwhile: safe, only not helpful.
		return err
	}
	msg := fmt.Sprintf("instance %s protected from scale-in in %s while do-not-disrupt pods run: %s", c.InstanceID, group, strings.Join(c.Pods, ", "))
	p.Log.Info("ScaleInProtected", "node", c.Node, "detail", msg)
	p.event(c.Node, "ScaleInProtected", msg)
	return nil
}

// lift removes the protection lifeboat recorded, then the record.
func (p *Protector) lift(ctx context.Context, c Change) error {
	if err := p.ASG.SetProtection(ctx, c.Group, c.InstanceID, false); err != nil {
		group, _, gerr := p.ASG.GroupOf(ctx, c.InstanceID)
		if gerr != nil || group == c.Group {
			return err
		}
		// The instance left the group (or AWS): nothing left to lift.
	}
	delete(p.elsewhere, c.InstanceID)
	if err := p.Annotate.SetAnnotations(ctx, c.Node, map[string]string{AnnotationProtected: ""}); err != nil {
		return err
	}
	msg := fmt.Sprintf("scale-in protection of instance %s in %s lifted: no do-not-disrupt pod left", c.InstanceID, c.Group)
	p.Log.Info("ScaleInProtectionLifted", "node", c.Node, "detail", msg)
	p.event(c.Node, "ScaleInProtectionLifted", msg)
	return nil
}

func (p *Protector) event(node, reason, msg string) {
	if p.Recorder == nil {
		return
	}
	ref := &corev1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node)}
	p.Recorder.Event(ref, corev1.EventTypeNormal, reason, msg)
}
