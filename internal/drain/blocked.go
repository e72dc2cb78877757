package drain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Deadline is when a drain must end, and whether AWS enforces it.
type Deadline struct {
	// At is the drain's deadline (zero: none).
	At time.Time
	// Enforced: AWS takes the instance at At whatever lifeboat does (a
	// Spot notice, a terminating state change, a terminate lifecycle
	// action's end, a capacity reservation's interruption), so a pod
	// still there dies without its shutdown. A scheduled change's start,
	// or no deadline at all, is not enforced.
	Enforced bool
	// Announced is AWS's deadline as the plan has it (Plan.Deadline: not
	// moved earlier for a lifecycle completion's margin, not capped by
	// Actions.NodeGrace), handed to the pods (lifeboat.io/deadline) and the
	// node's condition before the first eviction; zero: none known.
	Announced time.Time
	// Reason is the plan's reason (lifeboat.io/reason, the condition's
	// reason).
	Reason string
	// aws is At as the caller gave it, before Actions.NodeGrace capped it
	// (set by Drain): a pod still blocked is deleted in time for AWS's
	// deadline, not for lifeboat's own cap.
	aws time.Time
}

// ReasonBlockedPodDeleted is the reason of the Warning Event, on the pod
// and on its node, that says a pod whose eviction was still refused was
// deleted in time for its shutdown (Options.DeleteBlocked).
const ReasonBlockedPodDeleted = "BlockedPodDeleted"

// BlockedDelete is when, and with what grace period, a pod whose
// eviction is still refused (a PodDisruptionBudget's 429, an admission
// webhook's 403, a failing server) is deleted before an enforced
// deadline, so that its preStop hook and SIGTERM handler run to the end
// before the instance goes.
type BlockedDelete struct {
	// At is the deadline less the grace period and the margin: deleted
	// then, the pod's shutdown ends the margin before the deadline.
	At time.Time
	// Due: At has come (within blockedSlack); the pod is deleted now.
	Due bool
	// Grace is the deletion's grace period in seconds: the one the pod's
	// eviction asks for or, once At has passed, what is left until the
	// deadline less the margin; never below MinGrace (a grace of 0 is a
	// force deletion, which only the deadline's rule may make).
	Grace int64
}

// blockedSlack is how early before its moment a blocked pod is deleted:
// a grace period is whole seconds, so a deletion a few milliseconds late
// (the wake-up, the last eviction refused) would lose a whole second of
// it; one up to a second early keeps it whole and ends that much sooner.
const blockedSlack = time.Second

// ActAt is when the drain deletes the pod: At less blockedSlack.
func (b BlockedDelete) ActAt() time.Time { return b.At.Add(-blockedSlack) }

// PlanBlockedDelete plans the deletion of a pod still blocked at now,
// whose eviction asks for requested seconds of grace, before the drain's
// deadline dl less margin. ok is false when there is nothing to plan: no
// deadline, or one AWS does not enforce.
func PlanBlockedDelete(dl Deadline, requested int64, margin time.Duration, now time.Time) (b BlockedDelete, ok bool) {
	if dl.At.IsZero() || !dl.Enforced {
		return BlockedDelete{}, false
	}
	requested = max(requested, MinGrace)
	end := dl.At.Add(-margin)
	b = BlockedDelete{At: end.Add(-time.Duration(requested) * time.Second), Grace: requested}
	if now.Before(b.ActAt()) {
		return b, true
	}
	b.Due = true
	left := int64(end.Sub(now) / time.Second)
	b.Grace = max(min(requested, left), MinGrace)
	return b, true
}

// blockedPlan is PlanBlockedDelete for pod at the clock's now, before
// AWS's deadline, when Options.DeleteBlocked is on. When
// Actions.NodeGrace ends the drain before the pod's moment, the drain ends
// without deleting it, as before.
func (d *Drainer) blockedPlan(pod *corev1.Pod, dl Deadline) (BlockedDelete, bool) {
	if !d.deleteBlocked {
		return BlockedDelete{}, false
	}
	return PlanBlockedDelete(dl.awsDeadline(), d.acts.requestedGrace(pod), d.margin, d.clock.Now())
}

// awsDeadline is AWS's deadline: At before Drain capped it.
func (dl Deadline) awsDeadline() Deadline {
	if dl.aws.IsZero() {
		return Deadline{At: dl.At, Enforced: dl.Enforced}
	}
	return Deadline{At: dl.aws, Enforced: dl.Enforced}
}

// deleteBlockedPod deletes pod, still blocked by blocker (the last
// refusal), with the planned grace period and its UID as precondition,
// and records a Warning BlockedPodDeleted on the pod and on its node. It
// returns the pod's problem for Result.DeletedBlocked; gone is true when
// the pod was gone already (or another has its name).
func (d *Drainer) deleteBlockedPod(ctx context.Context, pod *corev1.Pod, b BlockedDelete, dl Deadline, blocker string) (pp PodProblem, gone bool, err error) {
	name := pod.Namespace + "/" + pod.Name
	err = d.client.Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &b.Grace, Preconditions: &metav1.Preconditions{UID: &pod.UID},
	})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return PodProblem{}, true, nil
	case err != nil:
		d.log.Warn("deleting a blocked pod before the deadline failed", "node", pod.Spec.NodeName, "pod", name, "error", err.Error())
		return PodProblem{}, false, fmt.Errorf("deleting blocked pod %s: %w", name, err)
	}
	msg := fmt.Sprintf("deleted with a grace period of %d s, %v before AWS's deadline %s, so that its shutdown ends before the instance goes; its eviction was still refused: %s",
		b.Grace, dl.awsDeadline().At.Sub(d.clock.Now()).Round(time.Second), dl.awsDeadline().At.UTC().Format(time.RFC3339), blocker)
	d.log.Warn(ReasonBlockedPodDeleted, "node", pod.Spec.NodeName, "pod", name, "grace", b.Grace, "deadline", dl.awsDeadline().At, "blocker", blocker)
	if d.recorder != nil {
		d.recorder.Event(&corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
			corev1.EventTypeWarning, ReasonBlockedPodDeleted, msg)
		d.recorder.Event(&corev1.ObjectReference{Kind: "Node", Name: pod.Spec.NodeName, UID: types.UID(pod.Spec.NodeName)},
			corev1.EventTypeWarning, ReasonBlockedPodDeleted, name+": "+msg)
	}
	return PodProblem{Namespace: pod.Namespace, Name: pod.Name, Reason: fmt.Sprintf("grace %d s; blocked by: %s", b.Grace, blocker)}, false, nil
}

// throttled reports whether err is a 429 from the API server's own
// throttling (API priority and fairness, --max-requests-inflight) rather
// than from a PodDisruptionBudget: an eviction a budget refuses carries
// the DisruptionBudget cause and says "disruption budget"; a throttled
// request does neither, and carries a Retry-After.
func throttled(err error) bool {
	if !apierrors.IsTooManyRequests(err) || strings.Contains(err.Error(), "disruption budget") {
		return false
	}
	if _, ok := budgetCause(err); ok {
		return false
	}
	_, suggests := apierrors.SuggestsClientDelay(err)
	return suggests
}

// throttledWait is how long to wait before asking again after a
// throttled request: the server's Retry-After, at least a second.
func throttledWait(err error) time.Duration {
	s, _ := apierrors.SuggestsClientDelay(err)
	return time.Duration(max(s, 1)) * time.Second
}

// blockerOf names what refused an eviction: the PodDisruptionBudget the
// API server names in a 429's causes, else its whole answer.
func blockerOf(err error) string {
	if msg, ok := budgetCause(err); ok && msg != "" {
		return msg
	}
	return err.Error()
}

// budgetCause returns the message of the DisruptionBudget cause in err's
// status, the first one with a message if any; ok is false when err
// carries no such cause.
func budgetCause(err error) (msg string, ok bool) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Details == nil {
		return "", false
	}
	for _, c := range st.Status().Details.Causes {
		if c.Type == policyv1.DisruptionBudgetCause {
			ok = true
			if c.Message != "" {
				return c.Message, true
			}
		}
	}
	return "", ok
}
