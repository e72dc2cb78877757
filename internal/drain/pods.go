package drain

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/kube"
)

// Order splits pods into the groups Drain evicts one after the other:
// ordinary pods first, system-critical pods last (empty groups left out).
// A group starts once every pod of the one before it is gone.
func Order(pods []corev1.Pod) [][]corev1.Pod { return priorityGroups(pods) }

// ForecastClient is what ForecastSource reads through: pods and
// PodDisruptionBudgets.
type ForecastClient = kube.Client

// budgetsMaxAge is how long a list of the cluster's PodDisruptionBudgets
// serves the forecasts that ask for one: a thousand drains forecast in the
// same seconds of a Spot reclaim share a list every two seconds instead of
// each listing every budget of the cluster. A forecast is already a
// snapshot refreshed every second or more; budgets older by two seconds
// change it as little. Not an informer: the DaemonSet would then hold a
// watch of every budget on every node for a forecast it makes once in a
// node's life.
const budgetsMaxAge = 2 * time.Second

// ForecastSource reads what the drain forecast needs about a node: the
// pods a drain would evict (the same list and filter as Drain) and the
// cluster's PodDisruptionBudgets. Give it a client with a rate limiter of
// its own: a forecast must never delay an eviction. Use it by pointer: it
// shares one budget list among the forecasts of budgetsMaxAge.
type ForecastSource struct {
	Client ForecastClient
	// Skip reports pods the drain never evicts (Options.Skip); nil: none.
	Skip func(*corev1.Pod) bool
	// PodGrace and NodeGrace are the drain's (Actions.PodGrace and
	// Actions.NodeGrace): the forecast works with the grace the drain gives.
	PodGrace, NodeGrace time.Duration
	// DeleteBlocked is the drain's Options.DeleteBlocked.
	DeleteBlocked bool
	// Clock times the shared budget list; nil: the wall clock.
	Clock clock.PassiveClock

	mu       sync.Mutex // held while listing: callers meanwhile wait and share the list
	budgets  []policyv1.PodDisruptionBudget
	listedAt time.Time
}

// DrainGrace returns the drain's PodGrace and NodeGrace.
func (s *ForecastSource) DrainGrace() (pod, node time.Duration) { return s.PodGrace, s.NodeGrace }

// DeletesBlocked returns the drain's Options.DeleteBlocked.
func (s *ForecastSource) DeletesBlocked() bool { return s.DeleteBlocked }

// ForecastInputs lists the node's pods to evict and returns Budgets.
func (s *ForecastSource) ForecastInputs(ctx context.Context, node string) ([]corev1.Pod, []policyv1.PodDisruptionBudget, error) {
	skip := s.Skip
	if skip == nil {
		skip = func(*corev1.Pod) bool { return false }
	}
	// Any state the API server's cache holds will do: a forecast is a
	// snapshot refreshed every second or more, and a list that waited for
	// the newest state (or went to etcd when the cache lags, as it does in
	// a burst) would cost the cluster more than a moment's staleness
	// costs the forecast.
	pods, _, err := listToEvict(ctx, s.Client, node, AnyVersion, skip)
	if err != nil {
		return nil, nil, err
	}
	pdbs, err := s.Budgets(ctx)
	if err != nil {
		return nil, nil, err
	}
	return pods, pdbs, nil
}

// Budgets returns every PodDisruptionBudget of the cluster (one
// cluster-wide list: the pods may be in any namespace), from a list at
// most budgetsMaxAge old. The slice is shared: read it, never change it.
func (s *ForecastSource) Budgets(ctx context.Context) ([]policyv1.PodDisruptionBudget, error) {
	clk := s.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.listedAt.IsZero() && clk.Since(s.listedAt) < budgetsMaxAge {
		return s.budgets, nil
	}
	list, err := s.Client.PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{ResourceVersion: AnyVersion})
	if err != nil {
		return nil, fmt.Errorf("listing PodDisruptionBudgets: %w", err)
	}
	s.budgets, s.listedAt = list.Items, clk.Now()
	return s.budgets, nil
}

// Evictable reports whether a drain removes the pod: not a mirror pod, not
// owned by a DaemonSet, not finished.
func Evictable(p *corev1.Pod) bool { return evictable(p) }

// Finished reports whether p's containers have all ended: phase Succeeded
// or Failed. A drain neither evicts nor waits for such a pod (its object
// may stay, held by a finalizer or never deleted).
func Finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// podsToEvict lists the node's pods and keeps those lifeboat evicts. It
// also returns the list's resourceVersion, from which waitGone can watch.
// The list is a consistent one (NodePods).
func (d *Drainer) podsToEvict(ctx context.Context, node string) ([]corev1.Pod, string, error) {
	return listToEvict(ctx, d.reads, node, "", d.skip)
}

// listToEvict lists the node's pods through client (NodePods, as fresh as
// minVersion) and keeps those a drain evicts (evictable, not skipped),
// with the list's resourceVersion.
func listToEvict(ctx context.Context, client Client, node, minVersion string, skip func(*corev1.Pod) bool) ([]corev1.Pod, string, error) {
	list, err := NodePods(ctx, client, node, minVersion)
	if err != nil {
		return nil, "", err
	}
	var out []corev1.Pod
	for i := range list.Items {
		pod := &list.Items[i]
		if evictable(pod) && !skip(pod) {
			out = append(out, *pod)
		}
	}
	return out, list.ResourceVersion, nil
}

// AnyVersion is NodePods' minVersion for whatever state the API server's
// watch cache holds: the list is answered at once, maybe a moment stale.
const AnyVersion = "0"

// NodePods lists the pods of node, in every namespace, through client: the
// pods whose spec.nodeName is node (a field selector the API server
// applies; a fake client may not).
//
// minVersion says how fresh the list must be: "" the newest state (a
// consistent list), AnyVersion whatever the API server's watch cache holds
// (answered at once). The API server answers a consistent list from its
// watch cache too, but only if the cache catches up within 3 s; otherwise
// it reads every pod of the cluster from etcd, whatever the field
// selector: in a burst the cache lags, and a thousand such reads grew
// etcd by gigabytes (docs/benchmarks.md, 5,000 notices). A drain still
// lists consistently. A list NotOlderThan the cordoned node's version was
// tried (session 14): it waits until the pod cache reaches that version,
// which in a quiet cluster takes an etcd progress notification, and a
// freshly started API server (or an etcd that does not answer progress
// requests) sends none: the list answered 504 after 3 s, again and again,
// and CI's TestTwoClustersOneQueue saw no drain start in 20 s.
//
// No page size either: API Priority and Fairness reserves a list from the
// watch cache seats by the memory it may use (10 seats unpaged, the most),
// and pages of 110 pods brought the drains' mean to 1.86 seats a request
// from 5.48 at 5,000 nodes, but the storm then sent more at once: APF
// turned away 15,172 requests instead of 5,623 and the last drain ended at
// 195.7 s instead of 138.1 s (docs/benchmarks.md, session 17).
//
// The pods keep their managedFields, which nothing here reads: dropping
// them did not lower a 5,000-node storm's peak memory (499 MiB against
// 417 MiB in the same run; docs/benchmarks.md, session 18), which is set by
// what a burst allocates between collections, not by what drains keep.
func NodePods(ctx context.Context, client Client, node, minVersion string) (*corev1.PodList, error) {
	opts := metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("spec.nodeName", node).String(),
		ResourceVersion: minVersion,
	}
	list, err := client.Pods(metav1.NamespaceAll).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing pods of node %s: %w", node, err)
	}
	return list, nil
}

// EvictionGrace is the grace period Drain's evictions ask for before a
// deadline cuts it: podGrace (Actions.PodGrace) when positive, else the
// pod's own; never below a second.
func EvictionGrace(p *corev1.Pod, podGrace time.Duration) time.Duration {
	return time.Duration(max(Actions{PodGrace: podGrace}.requestedGrace(p), MinGrace)) * time.Second
}

// DrainDeadline is the deadline Drain works to when it starts at started:
// deadline (zero: none), or nodeGrace (Actions.NodeGrace) after started
// when that is earlier.
func DrainDeadline(deadline, started time.Time, nodeGrace time.Duration) time.Time {
	return Actions{NodeGrace: nodeGrace}.capDeadline(deadline, started)
}
