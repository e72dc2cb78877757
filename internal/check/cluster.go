package check

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/forecast"
)

// spotNotice is the warning AWS gives before reclaiming a Spot instance.
const spotNotice = 2 * time.Minute

// listPage bounds one page of the review's lists.
const listPage = 500

// reviewMost bounds the objects named in a review row's sentence; the
// JSON report has them all (Result.Items).
const reviewMost = 10

// clusterReview looks at the cluster's workloads for what would make a
// drain miss its deadline: PodDisruptionBudgets that allow no disruption
// now, and pods whose grace period is longer than the Spot notice or the
// terminate hook's timeout when lifeboat does not heartbeat. It reviews
// the pods a drain would evict (scheduled, not DaemonSet, not mirror).
func (r *run) clusterReview(ctx context.Context) {
	if r.c.Kube == nil {
		return // the kubernetes api check said why
	}
	pods, err := r.listPods(ctx)
	if err != nil {
		r.add("cluster review", Warn, "could not list pods: "+err.Error(), "allow pods list cluster-wide to the identity lifeboat check runs as")
		return
	}
	pdbs, err := r.listPDBs(ctx)
	if err != nil {
		r.add("cluster review", Warn, "could not list PodDisruptionBudgets: "+err.Error(),
			`allow policy poddisruptionbudgets list cluster-wide (ClusterRole rule {apiGroups: ["policy"], resources: ["poddisruptionbudgets"], verbs: ["list"]})`)
		return
	}
	findings := 0
	for i := range pdbs {
		if r.reviewPDB(&pdbs[i], pods) {
			findings++
		}
	}
	if r.reviewGrace(pods, spotNotice, "the Spot notice", "Spot interruptions") {
		findings++
	}
	if limit, hook, ok := r.hookLimit(); ok && r.reviewGrace(pods, limit, "the heartbeat timeout of hook "+hook, "scale-in and other terminations (lifeboat does not heartbeat: --complete-lifecycle=false)") {
		findings++
	}
	if findings == 0 {
		r.add("cluster review", OK, fmt.Sprintf("%d pods on nodes, %d PodDisruptionBudgets: none blocks a drain, every grace period fits the Spot notice", len(pods), len(pdbs)), "")
	}
}

// reviewPDB reports a budget that allows no disruption now while it covers
// pods on nodes: every drain of their nodes stalls on them until AWS's
// deadline. It returns whether it added a row.
func (r *run) reviewPDB(b *policyv1.PodDisruptionBudget, pods []corev1.Pod) bool {
	if b.Status.DisruptionsAllowed > 0 {
		return false
	}
	var covered []string
	nodes := map[string]bool{}
	for i := range pods {
		if forecast.Covers(b, &pods[i]) {
			covered = append(covered, pods[i].Namespace+"/"+pods[i].Name)
			nodes[pods[i].Spec.NodeName] = true
		}
	}
	if len(covered) == 0 {
		return false
	}
	found := fmt.Sprintf("allows 0 disruptions now (%d of %d healthy, %d desired); it covers %d pods on %d nodes (%s): a drain of any of those nodes stalls on them until AWS's deadline, then leaves them (or deletes them with --force-delete-at-deadline)",
		b.Status.CurrentHealthy, b.Status.ExpectedPods, b.Status.DesiredHealthy, len(covered), len(nodes), names(covered))
	r.results = append(r.results, Result{Name: "pdb " + b.Namespace + "/" + b.Name, Status: Fail, Found: found, Items: covered,
		Fix: "run more replicas than the budget requires (or lower minAvailable / raise maxUnavailable), so that one pod may always be evicted; a budget of a single-replica workload never allows a drain"})
	return true
}

// reviewGrace reports the pods whose grace period exceeds limit: a drain
// for what (when) cuts their grace period to the time left, so their
// shutdown (a preStop hook) is cut short. It returns whether it added a row.
func (r *run) reviewGrace(pods []corev1.Pod, limit time.Duration, limitName, when string) bool {
	var over []string
	withHook := 0
	longest := time.Duration(0)
	for i := range pods {
		g := forecast.GraceOf(&pods[i])
		if g <= limit {
			continue
		}
		over = append(over, fmt.Sprintf("%s/%s (%s)", pods[i].Namespace, pods[i].Name, g))
		longest = max(longest, g)
		if forecast.HasPreStop(&pods[i]) {
			withHook++
		}
	}
	if len(over) == 0 {
		return false
	}
	found := fmt.Sprintf("%d pods have a terminationGracePeriodSeconds longer than %s (%s), up to %s, %d of them with a preStop hook: on %s the drain cuts their grace period to the time left and they are killed before their shutdown ends: %s",
		len(over), limitName, limit, longest, withHook, when, names(over))
	r.results = append(r.results, Result{Name: fmt.Sprintf("pods grace > %s", limit), Status: Warn, Found: found, Items: over,
		Fix: "make their shutdown fit " + limit.String() + " (checkpoint earlier, shorter preStop), or keep them off nodes that can get this notice"})
	return true
}

// hookLimit is the shortest heartbeat timeout of the cluster's terminate
// hooks when lifeboat does not heartbeat (--complete-lifecycle=false):
// the time a termination gives the drain. ok is false when lifeboat
// heartbeats (the drain has up to the global timeout) or no hook is known.
func (r *run) hookLimit() (time.Duration, string, bool) {
	if r.cfg.CompleteLifecycle {
		return 0, "", false
	}
	var limit time.Duration
	name := ""
	for _, g := range r.groups {
		for _, h := range g.hooks {
			if aws.ToString(h.LifecycleTransition) != event.TransitionTerminating {
				continue
			}
			t := time.Duration(aws.ToInt32(h.HeartbeatTimeout)) * time.Second
			if t <= 0 {
				t = time.Hour // AWS's default
			}
			if name == "" || t < limit {
				limit, name = t, g.name+"/"+aws.ToString(h.LifecycleHookName)
			}
		}
	}
	return limit, name, name != ""
}

// listPods lists the pods a drain would evict, on every node.
func (r *run) listPods(ctx context.Context) ([]corev1.Pod, error) {
	var out []corev1.Pod
	opts := metav1.ListOptions{Limit: listPage}
	for {
		list, err := r.c.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			p := &list.Items[i]
			if p.Spec.NodeName != "" && drain.Evictable(p) {
				out = append(out, *p)
			}
		}
		if list.Continue == "" {
			return out, nil
		}
		opts.Continue = list.Continue
	}
}

func (r *run) listPDBs(ctx context.Context) ([]policyv1.PodDisruptionBudget, error) {
	var out []policyv1.PodDisruptionBudget
	opts := metav1.ListOptions{Limit: listPage}
	for {
		list, err := r.c.Kube.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, list.Items...)
		if list.Continue == "" {
			slices.SortFunc(out, func(a, b policyv1.PodDisruptionBudget) int {
				return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
			})
			return out, nil
		}
		opts.Continue = list.Continue
	}
}

// names lists up to reviewMost names for a sentence.
func names(all []string) string {
	if len(all) <= reviewMost {
		return strings.Join(all, ", ")
	}
	return strings.Join(all[:reviewMost], ", ") + fmt.Sprintf(" and %d more", len(all)-reviewMost)
}
