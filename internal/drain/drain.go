package drain

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/kube"
)

const mergePatch = types.MergePatchType

// DefaultStuckAfter is Options.StuckAfter when it is not set.
const DefaultStuckAfter = time.Minute

// Client is what the Drainer reads and writes through: nodes, pods and
// their eviction subresource (kube.REST; kube/clientset adapts a
// clientset).
type Client = kube.Client

// Options configure a Drainer.
type Options struct {
	// Backoff is the delay before an eviction refused by a PDB (429),
	// conflicting (409) or failed by the server is tried again. Never zero.
	Backoff time.Duration
	// Margin is kept in reserve before a deadline when capping grace periods.
	Margin time.Duration
	// ForceDeleteAtDeadline deletes pods still present when the deadline is
	// reached (AWS would kill them anyway).
	ForceDeleteAtDeadline bool
	// DeleteBlocked deletes a pod whose eviction is still refused (a
	// PodDisruptionBudget, an admission webhook) in time for its shutdown
	// before an enforced deadline (Deadline.Enforced): at AWS's deadline
	// less its grace period and Margin (PlanBlockedDelete), if the drain
	// (Actions.NodeGrace) still runs then. A pod still present at the
	// deadline is then ForceDeleteAtDeadline's.
	DeleteBlocked bool
	// AnnotatePods gives the pods a drain is about to evict the
	// annotations lifeboat.io/deadline and lifeboat.io/reason
	// (Deadline.Announced, Deadline.Reason) before its first eviction.
	AnnotatePods bool
	// TerminatingCondition sets ConditionTerminating True on the node
	// when a drain begins (one request per node; off by default).
	TerminatingCondition bool
	// Recorder records the Events a drain makes on pods and nodes
	// (BlockedPodDeleted); nil: none.
	Recorder kube.EventRecorder
	// Skip reports pods lifeboat must never evict (its own pod).
	Skip func(*corev1.Pod) bool
	// Parallel bounds concurrent evictions on one node.
	Parallel int
	DryRun   bool
	// NodeCache returns the cached node (informer), so that cordoning needs
	// no GET; nil: always read from the API server.
	NodeCache func(name string) (*corev1.Node, bool)
	// NodeClient, if set, makes every node write and read (cordon, taints,
	// annotations, uncordon): a client with a rate limiter of its own, so
	// that a cordon never waits behind other nodes' evictions. nil: the
	// client evictions use.
	NodeClient Client
	// PodReadClient, if set, lists the node's pods and opens the pod
	// watch a drain waits on for its evicted pods to go: a client with a
	// rate limiter of its own, so that a thousand drains' lists and
	// watches do not take two thousand of the evictions' tokens (API
	// priority and fairness counts a watch only while it starts). nil:
	// the client evictions use.
	PodReadClient Client
	// PodWatch, if set, serves the wait's pod events from one shared
	// watch (internal/podwatch, queue mode): a thousand drains are one
	// watch, not a thousand. nil, or a node it cannot serve: the drain
	// watches its node through PodReadClient. If it is also a PodCache
	// (internal/podwatch.Hub is), a drain lists its node's pods from the
	// API server's watch cache once the shared watch has passed the
	// cordon, not consistently (Drainer.fromCache).
	PodWatch NodePodWatcher
	// StuckAfter bounds the wait for a pod that was asked to leave. Without
	// a deadline, a pod still present StuckAfter past the end of the grace
	// period it got (Actions.PodGrace when set, else its own; counted from
	// when the wait began) is reported stuck
	// (Result.Stuck) and no longer waited for: a dead kubelet never
	// finishes its deletion. After the deadline's force deletion nothing
	// is waited for. Zero: DefaultStuckAfter.
	StuckAfter time.Duration
	// Actions are the optional node actions (grace periods, taint effect,
	// load balancer label).
	Actions Actions
	// Replacer, if set, runs before each eviction: replacement first
	// (internal/replace, docs/replacement-first.md). nil: none.
	Replacer Replacer
}

// Drainer drains nodes. It is safe for concurrent use on different nodes.
type Drainer struct {
	client  Client // pods and evictions
	nodes   Client // node reads and writes
	reads   Client // the node's pod list and the wait's pod watch
	watches NodePodWatcher
	clock   clock.WithTicker
	log     *slog.Logger
	backoff time.Duration
	margin  time.Duration
	force   bool
	// deleteBlocked and recorder: Options.DeleteBlocked and Recorder.
	deleteBlocked bool
	annotatePods  bool
	condition     bool
	recorder      kube.EventRecorder
	skip          func(*corev1.Pod) bool
	parallel      int
	dryRun        bool
	cache         func(string) (*corev1.Node, bool)
	stuckAfter    time.Duration
	acts          Actions
	replacer      Replacer
	written       lastWrites // node writes the cache may not show yet
}

// New returns a Drainer.
func New(client Client, clk clock.WithTicker, log *slog.Logger, o Options) *Drainer {
	if o.Backoff <= 0 {
		o.Backoff = 5 * time.Second
	}
	if o.Parallel <= 0 {
		o.Parallel = 50
	}
	if o.Skip == nil {
		o.Skip = func(*corev1.Pod) bool { return false }
	}
	if o.StuckAfter <= 0 {
		o.StuckAfter = DefaultStuckAfter
	}
	if o.NodeClient == nil {
		o.NodeClient = client
	}
	if o.PodReadClient == nil {
		o.PodReadClient = client
	}
	d := &Drainer{client: client, nodes: o.NodeClient, reads: o.PodReadClient, watches: o.PodWatch, clock: clk, log: log, backoff: o.Backoff, margin: o.Margin,
		force: o.ForceDeleteAtDeadline, skip: o.Skip, parallel: o.Parallel, dryRun: o.DryRun, cache: o.NodeCache,
		stuckAfter: o.StuckAfter, acts: o.Actions, deleteBlocked: o.DeleteBlocked, recorder: o.Recorder,
		annotatePods: o.AnnotatePods, condition: o.TerminatingCondition, replacer: o.Replacer}
	return d
}

// Progress is reported while a drain runs.
type Progress struct {
	// Total is the number of pods to evict, Gone those no longer on the node.
	Total, Gone int
	// Blocked counts evictions refused by a PodDisruptionBudget so far.
	Blocked int
	// Pods are the pods the drain listed to evict, as listed: the same
	// slice in every report, to be read, never changed. The drain forecast
	// starts from them instead of listing the node's pods again.
	Pods []corev1.Pod
}

// drainPods is Drain without the node actions around it; dl.At is
// already capped.
func (d *Drainer) drainPods(ctx context.Context, node string, dl Deadline, progress func(Progress)) (Result, error) {
	var res Result
	if err := ctx.Err(); err != nil {
		return res, err // canceled before it began: nothing seen
	}
	pods, listRV, err := d.podsToEvict(ctx, node)
	if err != nil {
		return res, err
	}
	res.Listed = true
	if d.dryRun {
		res.Remaining = len(pods)
		d.log.Info("dry run: would evict pods", "node", node, "pods", len(pods))
		return res, nil
	}
	d.notice(ctx, node, pods, dl) // before the first eviction
	p := Progress{Total: len(pods), Pods: pods}
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
	var refused []corev1.Pod
	outs := make(map[types.UID]evictOutcome, len(pods)) // how each eviction ended
	forcedStuck := false
	groups := priorityGroups(pods)
	before := d.beforeEvict(node, pods, dl)
	for gi, group := range groups {
		r, w, err := d.drainGroup(ctx, node, group, listRV, dl, report, outs, &res, before)
		refused = append(refused, r...)
		forcedStuck = forcedStuck || w.forcedStuck
		if err != nil {
			if errors.Is(err, ErrDeadline) || ctx.Err() != nil {
				d.cutUnasked(&res, refused, outs, groups[gi+1:])
			}
			return res, res.withRefused(err)
		}
	}
	refusedLeft := 0
	if len(refused) > 0 {
		if dl.At.IsZero() {
			refusedLeft = len(refused)
			res.Remaining += refusedLeft
		} else {
			// The deadline's rules hold for them too: wait until it, then
			// force-delete (when enabled) or leave them (ErrDeadline);
			// before an enforced one, they are deleted in time for their
			// shutdown (Options.DeleteBlocked).
			w, err := d.waitGone(ctx, node, refused, outs, listRV, dl, report)
			res.addWait(w)
			forcedStuck = forcedStuck || w.forcedStuck
			if err != nil {
				return res, res.withRefused(err)
			}
		}
	}
	return res, res.incomplete(node, refusedLeft, forcedStuck)
}

// evictable reports whether a pod is one a drain removes: not a mirror pod,
// not owned by a DaemonSet (it would come back), not finished.
func evictable(pod *corev1.Pod) bool {
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	if Finished(pod) {
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

// drainGroup evicts the pods of one group concurrently and waits until
// those accepted are gone, watching from listRV (the list the pods came
// from). It records how each eviction ended in outs, adds to res and
// returns the pods whose eviction was refused for good (they are not
// waited for here). Canceled, it reports the pods not known gone cut off.
// before runs before each eviction (beforeEvict).
func (d *Drainer) drainGroup(ctx context.Context, node string, pods []corev1.Pod, listRV string, dl Deadline, report func(func(*Progress)), outs map[types.UID]evictOutcome, res *Result, before func(context.Context, *corev1.Pod)) ([]corev1.Pod, waitResult, error) {
	outcomes := make([]evictOutcome, len(pods))
	errs := make([]error, len(pods))
	sem := make(chan struct{}, d.parallel)
	var wg sync.WaitGroup
	for i := range pods {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			before(ctx, &pods[i])
			outcomes[i], errs[i] = d.evict(ctx, &pods[i], dl, report)
		}(i)
	}
	wg.Wait()
	var wait, refused []corev1.Pod
	for i, o := range outcomes {
		outs[pods[i].UID] = o
		if o.capped {
			res.GraceCapped++
		}
		switch o.kind {
		case evictAccepted, evictGone:
			res.Evicted++
			res.Pods = append(res.Pods, pods[i].Namespace+"/"+pods[i].Name)
			wait = append(wait, pods[i])
		case evictDeletedBlocked:
			res.DeletedBlocked = append(res.DeletedBlocked, o.deleted)
			wait = append(wait, pods[i])
		case evictDeadline, evictCanceled:
			wait = append(wait, pods[i]) // waitGone applies the deadline's rules
		case evictRefused:
			res.NotEvicted = append(res.NotEvicted, PodProblem{Namespace: pods[i].Namespace, Name: pods[i].Name, Reason: o.reason})
			refused = append(refused, pods[i])
		}
	}
	if err := errors.Join(errs...); err != nil {
		// Canceled during the evictions: no wait; the pods still there
		// are cut off.
		now := d.clock.Now()
		there, listed := d.stillThere(ctx, node)
		for _, p := range wait {
			cur, ok := there[p.UID]
			if !listed && outs[p.UID].kind != evictGone {
				cur, ok = &p, true // as it stood
			}
			if ok {
				res.CutOff = append(res.CutOff, cutOff(d.newWaiting(*cur, outs), now))
				res.Remaining++
			}
		}
		return refused, waitResult{}, err
	}
	w, err := d.waitGone(ctx, node, wait, outs, listRV, dl, report)
	res.addWait(w)
	return refused, w, err
}

// cutUnasked adds to res, cut off, the pods a drain that ended early (the
// deadline passed without force deletion, or it was canceled) left
// without asking them to leave: those whose eviction was refused for good
// and those of the priority groups it did not reach.
func (d *Drainer) cutUnasked(res *Result, refused []corev1.Pod, outs map[types.UID]evictOutcome, notReached [][]corev1.Pod) {
	now := d.clock.Now()
	for _, p := range refused {
		res.CutOff = append(res.CutOff, cutOff(d.newWaiting(p, outs), now))
		res.Remaining++
	}
	for _, group := range notReached {
		for _, p := range group {
			res.CutOff = append(res.CutOff, CutOffPod{Namespace: p.Namespace, Name: p.Name, Cause: CauseNotStarted,
				Detail: "not reached: system-critical pods are evicted once the others are gone"})
			res.Remaining++
		}
	}
}
