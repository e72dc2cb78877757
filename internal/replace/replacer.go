package replace

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/kube"
)

// Event reasons (internal/kevents.Reasons, docs/events.md).
const (
	ReasonReplacementStarted  = "ReplacementStarted"
	ReasonReplacementReady    = "ReplacementReady"
	ReasonReplacementSkipped  = "ReplacementSkipped"
	ReasonReplacementTimedOut = "ReplacementTimedOut"
)

// Results counted (lifeboat_replacements_total{result}).
var Results = []string{"ready", "timeout", "skipped", "failed"}

// DefaultMaxWait bounds the wait for a replacement when the drain has no
// deadline.
const DefaultMaxWait = 5 * time.Minute

// Options configure a Replacer.
type Options struct {
	// MaxWait bounds the wait without a deadline; zero: DefaultMaxWait.
	MaxWait time.Duration
	// Poll is how often the Deployment's pods are listed while waiting;
	// zero: a second.
	Poll time.Duration
	// Recorder records the Events (nil: none); Count counts each
	// outcome, one of Results (nil: none).
	Recorder kube.EventRecorder
	Count    func(result string)
}

// Replacer is the step. It is safe for concurrent use.
type Replacer struct {
	apps  Client
	pods  kube.Client // pods and PodDisruptionBudgets
	clock clock.WithTicker
	log   *slog.Logger
	o     Options
}

// New returns a Replacer.
func New(apps Client, pods kube.Client, clk clock.WithTicker, log *slog.Logger, o Options) *Replacer {
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Count == nil {
		o.Count = func(string) {}
	}
	return &Replacer{apps: apps, pods: pods, clock: clk, log: log, o: o}
}

// group is the node's pods of one ReplicaSet; once runs its replacement.
type group struct {
	ns, rs string
	pods   []corev1.Pod
	once   sync.Once
}

// ForNode returns what a drain of node calls before each eviction of
// pods (the pods it evicts): it returns at once for a pod that needs no
// replacement, or cannot have one; for a Deployment's last pods, once a
// replacement is Ready on another node or the time is up. evictBy gives
// the latest moment a pod's eviction may begin (zero: no deadline).
// It reads nothing until called.
func (r *Replacer) ForNode(node string, pods []corev1.Pod, evictBy func(*corev1.Pod) time.Time) func(context.Context, *corev1.Pod) {
	groups := map[types.UID]*group{}
	for _, p := range pods {
		if OwnerReason(&p) != "" {
			continue
		}
		ref := metav1.GetControllerOf(&p)
		g := groups[ref.UID]
		if g == nil {
			g = &group{ns: p.Namespace, rs: ref.Name}
			groups[ref.UID] = g
		}
		g.pods = append(g.pods, p)
	}
	return func(ctx context.Context, p *corev1.Pod) {
		ref := metav1.GetControllerOf(p)
		if ref == nil || groups[ref.UID] == nil {
			return
		}
		g := groups[ref.UID]
		g.once.Do(func() { r.replace(ctx, node, g, evictBy) })
	}
}

// replace decides for g and, when its pods are the Deployment's last,
// restarts the rollout and waits for the replacement.
func (r *Replacer) replace(ctx context.Context, node string, g *group, evictBy func(*corev1.Pod) time.Time) {
	var by time.Time
	for i := range g.pods {
		if t := evictBy(&g.pods[i]); !t.IsZero() && (by.IsZero() || t.Before(by)) {
			by = t
		}
	}
	rs, err := r.apps.ReplicaSet(ctx, g.ns, g.rs)
	if err != nil {
		r.failed(ctx, node, g, "reading its ReplicaSet", err)
		return
	}
	ref := metav1.GetControllerOf(rs)
	if ref == nil || ref.Kind != "Deployment" {
		return
	}
	started := r.clock.Now()
	for attempt := 0; ; attempt++ {
		in, err := r.read(ctx, node, g, rs, ref.Name)
		if err != nil {
			r.failed(ctx, node, g, "reading its Deployment, pods or budgets", err)
			return
		}
		in.Now, in.EvictBy, in.MaxWait = r.clock.Now(), by, r.o.MaxWait
		dec := Decide(in)
		dep := in.Deployment
		if dec.Reason.Skipped() {
			r.o.Count("skipped")
			r.log.Info(ReasonReplacementSkipped, "node", node, "deployment", g.ns+"/"+dep.Name, "reason", dec.Reason, "detail", dec.Detail)
			r.event(dep, node, corev1.EventTypeWarning, ReasonReplacementSkipped,
				fmt.Sprintf("its pods on node %s are its last ready replicas, evicted without a replacement first (%s): %s", node, dec.Reason, dec.Detail))
			return
		}
		if dec.Action != Replace {
			return
		}
		if dec.Restart {
			err := r.restart(ctx, dep)
			if apierrors.IsConflict(err) && attempt < 2 {
				continue // changed since read: decide again
			}
			if err != nil {
				r.failed(ctx, node, g, "restarting its rollout", err)
				return
			}
		}
		how := "a rollout restart"
		if !dec.Restart {
			how = "its rollout already under way"
		}
		r.log.Info(ReasonReplacementStarted, "node", node, "deployment", g.ns+"/"+dep.Name, "restart", dec.Restart, "want", dec.Want, "rounds", dec.Rounds, "need", dec.Need, "until", dec.Until)
		r.event(dep, node, corev1.EventTypeNormal, ReasonReplacementStarted,
			fmt.Sprintf("its pods on node %s are its last ready replicas: waiting up to %s for %d new pod(s) Ready on other nodes (%s; %d round(s) of a new pod's %v, %s) before evicting them",
				node, dec.Until.UTC().Format(time.RFC3339), dec.Want, how, dec.Rounds, dec.Need, dec.NeedFrom))
		r.wait(ctx, node, g, dep, rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey], dec, started)
		return
	}
}

// read gathers Decide's input.
func (r *Replacer) read(ctx context.Context, node string, g *group, rs *appsv1.ReplicaSet, deployment string) (Input, error) {
	in := Input{Node: node, Pods: g.pods, ReplicaSet: rs}
	dep, err := r.apps.Deployment(ctx, g.ns, deployment)
	if err != nil {
		return in, err
	}
	in.Deployment = dep
	if in.Selected, err = r.selected(ctx, dep); err != nil {
		return in, err
	}
	pdbs, err := r.pods.PodDisruptionBudgets(g.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, err
	}
	in.PDBs = pdbs.Items
	return in, nil
}

func (r *Replacer) selected(ctx context.Context, dep *appsv1.Deployment) ([]corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil {
		return nil, err
	}
	list, err := r.pods.Pods(dep.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// restart makes `kubectl rollout restart`'s change, if dep is still the
// version read (a merge patch carrying its resourceVersion).
func (r *Replacer) restart(ctx context.Context, dep *appsv1.Deployment) error {
	patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`,
		dep.ResourceVersion, RestartedAt, r.clock.Now().UTC().Format(time.RFC3339))
	return r.apps.PatchDeployment(ctx, dep.Namespace, dep.Name, []byte(patch))
}

// wait lists the Deployment's pods every Poll until dec.Want pods of
// another template than old are Ready on other nodes, dec.Until passes,
// or ctx ends.
func (r *Replacer) wait(ctx context.Context, node string, g *group, dep *appsv1.Deployment, old string, dec Decision, started time.Time) {
	tick := r.clock.NewTicker(r.o.Poll)
	defer tick.Stop()
	for {
		if pods, err := r.selected(ctx, dep); err == nil {
			n := 0
			for i := range pods {
				if Replacement(&pods[i], node, old) {
					n++
				}
			}
			if n >= dec.Want {
				took := r.clock.Now().Sub(started).Round(100 * time.Millisecond)
				r.o.Count("ready")
				r.log.Info(ReasonReplacementReady, "node", node, "deployment", g.ns+"/"+dep.Name, "took", took)
				r.event(dep, node, corev1.EventTypeNormal, ReasonReplacementReady,
					fmt.Sprintf("%d new pod(s) Ready on other nodes %v after the drain reached them; evicting its pods on node %s", n, took, node))
				return
			}
		} else if ctx.Err() == nil {
			r.log.Warn("listing a Deployment's pods failed", "deployment", g.ns+"/"+dep.Name, "error", err.Error())
		}
		if !r.clock.Now().Before(dec.Until) {
			r.o.Count("timeout")
			r.log.Warn(ReasonReplacementTimedOut, "node", node, "deployment", g.ns+"/"+dep.Name)
			r.event(dep, node, corev1.EventTypeWarning, ReasonReplacementTimedOut,
				fmt.Sprintf("no new pod Ready on another node by %s; evicting its pods on node %s without a replacement (the rollout goes on)", dec.Until.UTC().Format(time.RFC3339), node))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
	}
}

// failed reports a read or write that failed: the pods are evicted as
// today.
func (r *Replacer) failed(ctx context.Context, node string, g *group, what string, err error) {
	if ctx.Err() != nil {
		return // the drain was canceled: nothing to report here
	}
	r.o.Count("failed")
	r.log.Warn("replacement first failed; evicting as today", "node", node, "replicaset", g.ns+"/"+g.rs, "step", what, "error", err.Error())
}

// event records an Event on the Deployment and on the node.
func (r *Replacer) event(dep *appsv1.Deployment, node, typ, reason, msg string) {
	if r.o.Recorder == nil {
		return
	}
	r.o.Recorder.Event(&corev1.ObjectReference{Kind: "Deployment", APIVersion: "apps/v1", Namespace: dep.Namespace, Name: dep.Name, UID: dep.UID},
		typ, reason, msg)
	r.o.Recorder.Event(&corev1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node)},
		typ, reason, "deployment "+dep.Namespace+"/"+dep.Name+": "+msg)
}
