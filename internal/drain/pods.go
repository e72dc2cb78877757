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
// The list is as of the node's cordon or later: from the API server's
// watch cache when the shared pod watch says the cache has reached the
// cordon (fromCache), else a consistent one (NodePods).
func (d *Drainer) podsToEvict(ctx context.Context, node string) ([]corev1.Pod, string, error) {
	if pods, rv, ok := d.fromCache(ctx, node); ok {
		return pods, rv, nil
	}
	return listToEvict(ctx, d.reads, node, "", d.skip)
}

// cacheWait bounds how long a drain waits for the shared pod watch to
// reach its node's cordon before it lists consistently instead: a few
// seconds of a storm's lag, well inside a two-minute notice.
const cacheWait = 10 * time.Second

// cachedListTimeout bounds a list NotOlderThan the cordon. The watch cache
// that served the shared watch answers it at once; another API server's
// (the list and the watch went different ways) may wait 3 s and answer
// 504, which client-go retries: the drain then lists consistently.
const cachedListTimeout = 10 * time.Second

// fromCache lists the node's pods NotOlderThan a version of the node that
// shows it cordoned (cordonVersion), when the shared pod watch
// (Options.PodWatch, if it is a PodCache) has reached that version: the
// API server's watch cache then answers at once. A consistent list waits
// until the cache reaches the newest version of the whole cluster, and
// in a storm, with the cache seconds behind, the API server gives up
// after 3 s and reads every pod of the cluster from etcd
// (docs/benchmarks.md: 515 such reads grew etcd to 17 GiB). ok is false
// when it did not list or its list failed.
func (d *Drainer) fromCache(ctx context.Context, node string) ([]corev1.Pod, string, bool) {
	cache, isCache := d.watches.(PodCache)
	if !isCache {
		return nil, "", false
	}
	rv := d.cordonVersion(node)
	if rv == "" || !cache.CaughtUp(ctx, rv, cacheWait) {
		return nil, "", false
	}
	lctx, cancel := context.WithTimeout(ctx, cachedListTimeout)
	defer cancel()
	pods, listRV, err := listToEvict(lctx, d.reads, node, rv, d.skip)
	if err != nil {
		d.log.Debug("listing from the pod cache failed; listing consistently", "node", node, "error", err.Error())
		return nil, "", false
	}
	return pods, listRV, true
}

// PodCache says how far the API server's pod watch cache has come
// (internal/podwatch.Hub.CaughtUp): whether it has reached
// resourceVersion, waiting up to within while it moves.
type PodCache interface {
	CaughtUp(ctx context.Context, resourceVersion string, within time.Duration) bool
}

// cordonVersion is the resourceVersion of the newest copy lifeboat knows
// of the node, lifeboat's last write or the node cache's, if that copy
// shows the node cordoned: every pod bound to it before the cordon is in
// a list NotOlderThan it. "" when the newest copy known is not cordoned,
// and without a node cache (Options.NodeCache: lifeboat's writes are
// remembered only beside one).
func (d *Drainer) cordonVersion(node string) string {
	if d.cache == nil {
		return ""
	}
	cached, ok := d.cache(node)
	newest := d.written.newer(node, cached, ok)
	if newest == nil {
		newest = cached
	}
	if newest == nil || !newest.Spec.Unschedulable {
		return ""
	}
	return newest.ResourceVersion
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
// (answered at once), any other version a state not older than it
// (resourceVersionMatch NotOlderThan). The API server answers a consistent
// list from its watch cache too, but only if the cache catches up within
// 3 s; otherwise it reads every pod of the cluster from etcd, whatever the
// field selector: in a burst the cache lags, and a thousand such reads
// grew etcd by gigabytes (docs/benchmarks.md, 5,000 notices). A
// NotOlderThan list never goes to etcd, but it waits until the pod cache
// reaches its version, and in a quiet cluster only an etcd progress
// notification moves the cache (a freshly started API server sent none:
// 504 after 3 s, again and again, session 14). So a drain lists
// NotOlderThan its cordon only once the shared pod watch has seen the
// cache get there (Drainer.fromCache), and consistently otherwise.
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
	if minVersion != "" && minVersion != AnyVersion {
		opts.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
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
