package drain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

const mergePatch = types.MergePatchType

// Options configure a Drainer.
type Options struct {
	// Backoff is the delay before an eviction refused by a PDB (429) or
	// failed by the server is tried again. Never zero.
	Backoff time.Duration
	// Margin is kept in reserve before a deadline when capping grace periods.
	Margin time.Duration
	// ForceDeleteAtDeadline deletes pods still present when the deadline is
	// reached (AWS would kill them anyway).
	ForceDeleteAtDeadline bool
	// Skip reports pods lifeboat must never evict (its own pod).
	Skip func(*corev1.Pod) bool
	// Parallel bounds concurrent evictions on one node.
	Parallel int
	DryRun   bool
	// NodeCache returns the cached node (informer), so that cordoning needs
	// no GET; nil: always read from the API server.
	NodeCache func(name string) (*corev1.Node, bool)
}

// Drainer drains nodes. It is safe for concurrent use on different nodes.
type Drainer struct {
	client   kubernetes.Interface
	clock    clock.WithTicker
	log      *slog.Logger
	backoff  time.Duration
	margin   time.Duration
	force    bool
	skip     func(*corev1.Pod) bool
	parallel int
	dryRun   bool
	cache    func(string) (*corev1.Node, bool)
}

// New returns a Drainer.
func New(client kubernetes.Interface, clk clock.WithTicker, log *slog.Logger, o Options) *Drainer {
	if o.Backoff <= 0 {
		o.Backoff = 5 * time.Second
	}
	if o.Parallel <= 0 {
		o.Parallel = 50
	}
	if o.Skip == nil {
		o.Skip = func(*corev1.Pod) bool { return false }
	}
	return &Drainer{client: client, clock: clk, log: log, backoff: o.Backoff, margin: o.Margin,
		force: o.ForceDeleteAtDeadline, skip: o.Skip, parallel: o.Parallel, dryRun: o.DryRun, cache: o.NodeCache}
}

// Progress is reported while a drain runs.
type Progress struct {
	// Total is the number of pods to evict, Gone those no longer on the node.
	Total, Gone int
	// Blocked counts evictions refused by a PodDisruptionBudget so far.
	Blocked int
}

// Result is the outcome of a drain.
type Result struct {
	Evicted int
	// GraceCapped counts pods whose grace period was cut to fit the deadline.
	GraceCapped int
	// ForceDeleted counts pods deleted at the deadline.
	ForceDeleted int
	// Remaining counts pods still on the node (only when the deadline passed
	// without force deletion, or in dry-run).
	Remaining int
}

// ErrDeadline is returned (wrapped) when AWS's deadline passed with pods left.
var ErrDeadline = errors.New("deadline passed before the node was empty")

// Drain evicts every pod on node that lifeboat may evict, ordinary pods
// first and system-critical pods last, and waits until they are gone. With a
// non-zero deadline, grace periods are capped to the time left. progress may
// be nil.
func (d *Drainer) Drain(ctx context.Context, node string, deadline time.Time, progress func(Progress)) (Result, error) {
	var res Result
	pods, listRV, err := d.podsToEvict(ctx, node)
	if err != nil {
		return res, err
	}
	if d.dryRun {
		res.Remaining = len(pods)
		d.log.Info("dry run: would evict pods", "node", node, "pods", len(pods))
		return res, nil
	}
	p := Progress{Total: len(pods)}
	var mu sync.Mutex
	report := func(f func(*Progress)) {
		mu.Lock()
		f(&p)
		cp := p
		mu.Unlock()
		if progress != nil {
			progress(cp)
		}
	}
	if len(pods) > 0 {
		report(func(*Progress) {}) // the drain has started: the total is known
	}
	for _, group := range priorityGroups(pods) {
		r, err := d.drainGroup(ctx, node, group, listRV, deadline, report)
		res.Evicted += r.Evicted
		res.GraceCapped += r.GraceCapped
		res.ForceDeleted += r.ForceDeleted
		res.Remaining += r.Remaining
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// podsToEvict lists the node's pods and keeps those lifeboat evicts. It
// also returns the list's resourceVersion, from which waitGone can watch.
func (d *Drainer) podsToEvict(ctx context.Context, node string) ([]corev1.Pod, string, error) {
	list, err := d.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil, "", fmt.Errorf("listing pods of node %s: %w", node, err)
	}
	var out []corev1.Pod
	for i := range list.Items {
		pod := &list.Items[i]
		if evictable(pod) && !d.skip(pod) {
			out = append(out, *pod)
		}
	}
	return out, list.ResourceVersion, nil
}

// evictable reports whether a pod is one a drain removes: not a mirror pod,
// not owned by a DaemonSet (it would come back), not finished.
func evictable(pod *corev1.Pod) bool {
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	for _, o := range pod.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == "DaemonSet" {
			return false
		}
	}
	return true
}

// criticalPriority is the priority of system-cluster-critical and above.
const criticalPriority = 2000000000

// priorityGroups splits pods into ordinary and system-critical, in that
// order, leaving out empty groups.
func priorityGroups(pods []corev1.Pod) [][]corev1.Pod {
	var ordinary, critical []corev1.Pod
	for _, p := range pods {
		if isCritical(&p) {
			critical = append(critical, p)
		} else {
			ordinary = append(ordinary, p)
		}
	}
	var groups [][]corev1.Pod
	for _, g := range [][]corev1.Pod{ordinary, critical} {
		if len(g) > 0 {
			groups = append(groups, g)
		}
	}
	return groups
}

func isCritical(p *corev1.Pod) bool {
	if p.Spec.Priority != nil && *p.Spec.Priority >= criticalPriority {
		return true
	}
	return p.Spec.PriorityClassName == "system-cluster-critical" || p.Spec.PriorityClassName == "system-node-critical"
}

// drainGroup evicts the pods of one group concurrently and waits until all
// are gone, watching from listRV (the list the pods came from).
func (d *Drainer) drainGroup(ctx context.Context, node string, pods []corev1.Pod, listRV string, deadline time.Time, report func(func(*Progress))) (Result, error) {
	var res Result
	var mu sync.Mutex
	sem := make(chan struct{}, d.parallel)
	var wg sync.WaitGroup
	errs := make([]error, len(pods))
	for i := range pods {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			capped, forced, err := d.evict(ctx, &pods[i], deadline, report)
			mu.Lock()
			defer mu.Unlock()
			if capped {
				res.GraceCapped++
			}
			if forced {
				res.ForceDeleted++
			}
			if err == nil && !forced {
				res.Evicted++
			}
			errs[i] = err
		}(i)
	}
	wg.Wait()
	var remaining []corev1.Pod
	for i, err := range errs {
		switch {
		case errors.Is(err, ErrDeadline):
			remaining = append(remaining, pods[i])
		case err != nil:
			return res, err
		}
	}
	if len(remaining) > 0 {
		res.Remaining = len(remaining)
		return res, fmt.Errorf("draining node %s: %d pods not evicted: %w", node, len(remaining), ErrDeadline)
	}
	left, err := d.waitGone(ctx, node, pods, listRV, deadline, report)
	res.Remaining = left
	return res, err
}

// evict evicts one pod, retrying refusals with a real backoff until it is
// accepted, the pod is gone, or the deadline is reached.
func (d *Drainer) evict(ctx context.Context, pod *corev1.Pod, deadline time.Time, report func(func(*Progress))) (capped, forced bool, err error) {
	for {
		grace, capped := d.grace(pod, deadline)
		err := d.postEviction(ctx, pod, grace)
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return capped, false, nil
		case apierrors.IsTooManyRequests(err):
			report(func(p *Progress) { p.Blocked++ })
			d.log.Info("eviction refused, backing off", "node", pod.Spec.NodeName, "pod", pod.Namespace+"/"+pod.Name, "reason", err.Error(), "backoff", d.backoff)
		case apierrors.IsConflict(err), apierrors.IsInternalError(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsServiceUnavailable(err):
			d.log.Info("eviction failed, retrying", "node", pod.Spec.NodeName, "pod", pod.Namespace+"/"+pod.Name, "error", err.Error())
		default:
			return capped, false, fmt.Errorf("evicting pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		wait := d.backoff
		if !deadline.IsZero() {
			left := deadline.Sub(d.clock.Now()) - d.margin
			if left <= 0 {
				if !d.force {
					return capped, false, ErrDeadline
				}
				return capped, true, d.forceDelete(ctx, pod)
			}
			wait = min(wait, left)
		}
		select {
		case <-ctx.Done():
			return capped, false, ctx.Err()
		case <-d.clock.After(wait):
		}
	}
}

// grace returns the grace period to ask for (nil: the pod's own) and
// whether it was capped by the deadline.
func (d *Drainer) grace(pod *corev1.Pod, deadline time.Time) (*int64, bool) {
	if deadline.IsZero() {
		return nil, false
	}
	own := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		own = *pod.Spec.TerminationGracePeriodSeconds
	}
	left := int64((deadline.Sub(d.clock.Now()) - d.margin) / time.Second)
	if left < 0 {
		left = 0
	}
	if own <= left {
		return nil, false
	}
	return &left, true
}

// postEviction creates the pods/eviction subresource with client-go's silent
// Retry-After retries switched off (MaxRetries(0)): a 429 from a PDB comes
// back to us at once and is retried with our own, visible backoff.
func (d *Drainer) postEviction(ctx context.Context, pod *corev1.Pod, grace *int64) error {
	ev := &policyv1.Eviction{
		TypeMeta:      metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: grace, Preconditions: &metav1.Preconditions{UID: &pod.UID}},
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	err = d.client.CoreV1().RESTClient().Post().
		Namespace(pod.Namespace).Resource("pods").Name(pod.Name).SubResource("eviction").
		SetHeader("Content-Type", "application/json").
		Body(body).MaxRetries(0).Do(ctx).Error()
	if apierrors.IsConflict(err) {
		// The UID precondition failed: the pod we meant is gone (a new one
		// with the same name is not ours to evict).
		return apierrors.NewNotFound(corev1.Resource("pods"), pod.Name)
	}
	return err
}

func (d *Drainer) forceDelete(ctx context.Context, pod *corev1.Pod) error {
	zero := int64(0)
	d.log.Warn("deadline reached, deleting pod", "node", pod.Spec.NodeName, "pod", pod.Namespace+"/"+pod.Name)
	err := d.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("force-deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// waitGone watches the node's pods until none of pods (by UID) is left. It
// returns the number left when the deadline passes. The first watch starts
// at fromRV, the resourceVersion of the list the pods came from, so every
// deletion since is seen without listing again (one request less per node
// in a burst); when that watch ends (410 Gone for an old version, a closed
// connection), it lists and watches anew.
func (d *Drainer) waitGone(ctx context.Context, node string, pods []corev1.Pod, fromRV string, deadline time.Time, report func(func(*Progress))) (int, error) {
	waiting := make(map[types.UID]corev1.Pod, len(pods))
	for _, p := range pods {
		waiting[p.UID] = p
	}
	total := len(waiting)
	sel := fields.OneTermEqualSelector("spec.nodeName", node).String()
	var deadlineC <-chan time.Time
	if !deadline.IsZero() {
		t := d.clock.NewTimer(max(deadline.Sub(d.clock.Now()), 0))
		defer t.Stop()
		deadlineC = t.C()
	}
	forced := false
	rv := fromRV
	for {
		if rv == "" {
			list, err := d.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: sel})
			if err != nil {
				return len(waiting), fmt.Errorf("listing pods of node %s: %w", node, err)
			}
			present := map[types.UID]bool{}
			for _, p := range list.Items {
				present[p.UID] = true
			}
			gone := 0
			for uid := range waiting {
				if !present[uid] {
					delete(waiting, uid)
					gone++
				}
			}
			report(func(p *Progress) { p.Gone += gone })
			if len(waiting) == 0 {
				return 0, nil
			}
			rv = list.ResourceVersion
		}
		w, err := d.client.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{
			FieldSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true,
		})
		rv = "" // after this watch, list again
		if err != nil {
			return len(waiting), fmt.Errorf("watching pods of node %s: %w", node, err)
		}
		done, err := d.watchUntilGone(ctx, w, waiting, deadlineC, report)
		w.Stop()
		switch {
		case done:
			return 0, nil
		case errors.Is(err, ErrDeadline):
			if !d.force || forced {
				return len(waiting), fmt.Errorf("draining node %s: %d of %d pods still terminating: %w", node, len(waiting), total, ErrDeadline)
			}
			forced = true
			deadlineC = nil
			for _, p := range waiting {
				if err := d.forceDelete(ctx, &p); err != nil {
					return len(waiting), err
				}
			}
		case err != nil:
			return len(waiting), err
		}
		// The watch ended (expired or closed): list again.
	}
}

// watchUntilGone consumes w until every waited-for pod is deleted (true), the
// watch closes (false, nil), the deadline fires (ErrDeadline) or ctx ends.
func (d *Drainer) watchUntilGone(ctx context.Context, w watch.Interface, waiting map[types.UID]corev1.Pod, deadlineC <-chan time.Time, report func(func(*Progress))) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-deadlineC:
			return false, ErrDeadline
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil
			}
			switch ev.Type {
			case watch.Deleted:
				if pod, ok := ev.Object.(*corev1.Pod); ok {
					if _, mine := waiting[pod.UID]; mine {
						delete(waiting, pod.UID)
						report(func(p *Progress) { p.Gone++ })
					}
				}
				if len(waiting) == 0 {
					return true, nil
				}
			case watch.Error:
				return false, nil
			}
		}
	}
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
