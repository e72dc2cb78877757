package forecast

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// A miss is certain when the pod cannot be gone before the deadline
// whatever it does; the worst case (every pod uses its whole grace) is only
// possible. What is known for sure:
//
//   - a budget is closed for good when it allows no disruption now and
//     every pod it expects is already healthy (status.currentHealthy >=
//     status.expectedPods): no pod of its workload can become ready and
//     free a disruption. A pod that is not Ready may be evicted all the
//     same (unhealthyPodEvictionPolicy), so only a Ready pod is surely
//     blocked;
//   - a preStop hook that sleeps (lifecycle.preStop.sleep) cannot end
//     before its sleep: when the sleep and the grace period both outlast
//     the time the pod can have, even asked to leave as soon as the drain
//     order allows, the drain cuts the hook. An exec or httpGet hook may
//     end at any time: it is never certain;
//   - a pod ordered after a pod that is surely blocked is never asked to
//     leave.
//
// A pod already terminating ends when its containers stop, which is not
// known: never certain.

// preStopSleep is the longest preStop sleep of the pod's containers (0:
// none). A hook that sleeps cannot end sooner.
func preStopSleep(p *corev1.Pod) time.Duration {
	var longest time.Duration
	for _, c := range p.Spec.Containers {
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
			longest = max(longest, time.Duration(c.Lifecycle.PreStop.Sleep.Seconds)*time.Second)
		}
	}
	return longest
}

// preStopCut says why the pod's preStop hook is surely cut by the
// deadline ("" when it is not): its sleep and its grace both outlast
// avail, the most time it can have.
func preStopCut(p *corev1.Pod, grace, avail time.Duration) string {
	sleep := preStopSleep(p)
	if sleep <= avail || grace <= avail {
		return ""
	}
	return fmt.Sprintf("its preStop hook sleeps %s, longer than the %s it can have", sleep, max(avail, 0).Round(time.Second))
}

// soonestGone is the soonest a pod asked to leave at start can be gone:
// not before its preStop sleep, nor its grace, and never after the time
// the drain cuts it at (usable, at least a second after start).
func soonestGone(p *corev1.Pod, grace, start, usable time.Duration, hasDeadline bool) time.Duration {
	gone := start + min(preStopSleep(p), grace)
	if hasDeadline {
		gone = min(gone, max(usable, start+time.Second))
	}
	return gone
}

// closedFor says why one of the budgets idx (those refusing p's eviction)
// refuses it until the deadline for sure ("" when none surely does).
func closedFor(p *corev1.Pod, pdbs []policyv1.PodDisruptionBudget, idx []int) string {
	if !podReady(p) {
		return ""
	}
	var why []string
	for _, i := range idx {
		if closed(&pdbs[i]) {
			st := pdbs[i].Status
			why = append(why, fmt.Sprintf("PodDisruptionBudget %s allows no disruption and %d of the %d pods it expects are healthy: no replacement can free one", pdbs[i].Name, st.CurrentHealthy, st.ExpectedPods))
		}
	}
	return strings.Join(why, "; ")
}

// closed reports whether a budget allows no disruption now and none can
// come: its status is up to date and every pod it expects is healthy.
func closed(b *policyv1.PodDisruptionBudget) bool {
	st := b.Status
	return st.ObservedGeneration >= b.Generation && st.DisruptionsAllowed <= 0 && st.CurrentHealthy >= st.ExpectedPods
}

// podReady reports whether the pod's Ready condition is True (what a
// budget counts as healthy).
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
