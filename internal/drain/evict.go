package drain

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// evictKind is how one pod's eviction ended.
type evictKind int

const (
	// evictAccepted: the API server accepted the eviction (or the pod's
	// namespace is being deleted, which deletes the pod): wait for it.
	evictAccepted evictKind = iota
	// evictGone: the pod is gone, or another pod now has its name.
	evictGone
	// evictDeadline: still refused (PDB, conflicts, server errors) when the
	// deadline, less the margin, was reached.
	evictDeadline
	// evictRefused: refused for good (403, 400, 422, ...); not retried.
	evictRefused
	// evictCanceled: the drain was canceled before the eviction was
	// accepted.
	evictCanceled
	// evictDeletedBlocked: still refused when its BlockedDelete was due,
	// the pod was deleted with that grace period: wait for it.
	evictDeletedBlocked
)

type evictOutcome struct {
	kind evictKind
	// capped: the grace period asked for was cut to fit the deadline.
	capped bool
	// reason is the API server's answer to a refused eviction; for
	// evictDeadline and evictCanceled, its last refusal or failure, if any.
	reason string
	// grace is the grace period, in seconds, the pod got when it was
	// accepted: the eviction's, or the pod's own when the namespace
	// controller deletes it; for evictDeletedBlocked, the deletion's.
	grace int64
	// deleted says, for evictDeletedBlocked, what blocked the pod.
	deleted PodProblem
}

// MinGrace is the shortest grace period, in seconds, an eviction asks for
// (the drain's, and package dsstop's of DaemonSet pods). 0 would make the
// API server remove the pod object at once while its containers still run
// (a force deletion, which only ForceDeleteAtDeadline may do); kubectl
// also turns 0 into 1 unless --force is given.
const MinGrace = 1

// evict evicts one pod, retrying refusals that can pass (PDB 429, 409
// conflicts, server errors) with a real backoff until it is accepted, the
// pod is gone, or the deadline is reached; before an enforced deadline, a
// pod still refused is deleted when its BlockedDelete is due
// (Options.DeleteBlocked). Only a canceled ctx is an error.
func (d *Drainer) evict(ctx context.Context, pod *corev1.Pod, dl Deadline, report func(func(*Progress))) (evictOutcome, error) {
	deadline := dl.At
	name := pod.Namespace + "/" + pod.Name
	last := ""    // the last refusal or failure, for a report of the pod
	blocker := "" // what refused it last, for BlockedPodDeleted
	for {
		grace, capped := d.grace(pod, deadline)
		err := d.postEviction(ctx, pod, grace)
		wait := d.backoff
		switch {
		case err == nil:
			got := ownGrace(pod)
			if grace != nil {
				got = *grace
			}
			return evictOutcome{kind: evictAccepted, capped: capped, grace: got}, nil
		case ctx.Err() != nil:
			return evictOutcome{kind: evictCanceled, reason: last}, ctx.Err()
		case apierrors.IsNotFound(err):
			return evictOutcome{kind: evictGone}, nil
		case throttled(err):
			// The API server's priority and fairness (or its in-flight
			// limit) turned the request away, not a PodDisruptionBudget:
			// nothing blocks the pod. Asked again when the server says,
			// but never later than after the drain's own backoff: APF's
			// Retry-After grows with contention (14 s seen in
			// test/fault's TestKubePriorityAndFairness429), and a Spot
			// notice gives two minutes.
			last, blocker = "throttled (429): "+err.Error(), err.Error()
			wait = min(throttledWait(err), d.backoff)
			d.log.Debug("eviction throttled by the API server, retrying", "node", pod.Spec.NodeName, "pod", name, "retryAfter", wait)
		case apierrors.IsTooManyRequests(err):
			report(func(p *Progress) { p.Blocked++ })
			last, blocker = "refused (429): "+err.Error(), blockerOf(err)
			d.log.Info("eviction refused, backing off", "node", pod.Spec.NodeName, "pod", name, "reason", err.Error(), "backoff", d.backoff)
		case apierrors.IsConflict(err):
			// Either the UID precondition failed (the pod is gone, maybe
			// replaced under the same name) or the PodDisruptionBudget's
			// status update kept conflicting under parallel evictions. Only
			// the pod itself tells them apart.
			if d.podGone(ctx, pod) {
				return evictOutcome{kind: evictGone}, nil
			}
			last, blocker = "conflicted (409): "+err.Error(), err.Error()
			d.log.Info("eviction conflicted, retrying", "node", pod.Spec.NodeName, "pod", name, "error", err.Error(), "backoff", d.backoff)
		case apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
			// No eviction can be created in a namespace being deleted; the
			// namespace controller deletes its pods with their own grace.
			d.log.Info("pod's namespace is being deleted, waiting for the pod to go", "node", pod.Spec.NodeName, "pod", name)
			return evictOutcome{kind: evictAccepted, grace: ownGrace(pod)}, nil
		case RefusedForGood(err):
			d.log.Warn("eviction refused, not retrying", "node", pod.Spec.NodeName, "pod", name, "error", err.Error())
			return evictOutcome{kind: evictRefused, capped: capped, reason: err.Error()}, nil
		default:
			last, blocker = "failed: "+err.Error(), err.Error()
			d.log.Info("eviction failed, retrying", "node", pod.Spec.NodeName, "pod", name, "error", err.Error(), "backoff", d.backoff)
		}
		b, planned := d.blockedPlan(pod, dl)
		if planned && b.Due {
			pp, gone, err := d.deleteBlockedPod(ctx, pod, b, dl, blocker)
			switch {
			case gone:
				return evictOutcome{kind: evictGone}, nil
			case err == nil:
				return evictOutcome{kind: evictDeletedBlocked, grace: b.Grace, reason: last, deleted: pp}, nil
			}
			last = "failed: " + err.Error() // the eviction is tried again
		}
		if planned && !b.Due {
			wait = min(wait, b.ActAt().Sub(d.clock.Now()))
		}
		if !deadline.IsZero() {
			left := deadline.Sub(d.clock.Now()) - d.margin
			if left <= 0 {
				return evictOutcome{kind: evictDeadline, capped: capped, reason: last}, nil
			}
			wait = min(wait, left)
		}
		select {
		case <-ctx.Done():
			return evictOutcome{kind: evictCanceled, reason: last}, ctx.Err()
		case <-d.clock.After(wait):
		}
	}
}

// RefusedForGood reports whether the API server refused an eviction in a
// way retrying cannot change (the drain's evictions and package dsstop's):
// a 4xx status other than 404 (gone), 408 (timeout), 409 (conflict) and
// 429 (PDB, API priority and fairness). A 403 from an admission webhook,
// 400 and 422 are such. Errors without a status (connection refused,
// reset) and 5xx are retried.
func RefusedForGood(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	code := st.Status().Code
	switch code {
	case http.StatusNotFound, http.StatusRequestTimeout, http.StatusConflict, http.StatusTooManyRequests:
		return false
	}
	return code >= 400 && code < 500
}

// podGone reads the pod again: true when it no longer exists or another
// pod has its name. A failed read counts as present (the caller retries).
func (d *Drainer) podGone(ctx context.Context, pod *corev1.Pod) bool {
	cur, err := d.client.Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true
	}
	return err == nil && cur.UID != pod.UID
}

// grace returns the grace period to ask for (nil: the pod's own) and
// whether it was capped by the deadline. It is never below MinGrace.
// Actions.PodGrace replaces the pod's own before the deadline caps it.
func (d *Drainer) grace(pod *corev1.Pod, deadline time.Time) (*int64, bool) {
	own := ownGrace(pod)
	requested := d.acts.requestedGrace(pod)
	want := requested
	if !deadline.IsZero() {
		left := int64((deadline.Sub(d.clock.Now()) - d.margin) / time.Second)
		want = min(want, left)
	}
	want = max(want, MinGrace)
	if want == own {
		return nil, false
	}
	return &want, want < requested
}

// ownGrace is the pod's terminationGracePeriodSeconds (default 30).
func ownGrace(pod *corev1.Pod) int64 {
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return corev1.DefaultTerminationGracePeriodSeconds
}

// postEviction asks the API server to evict pod (the pod with its UID, not
// another one with the same name) with the given grace period.
func (d *Drainer) postEviction(ctx context.Context, pod *corev1.Pod, grace *int64) error {
	// Sent once (kube.PodClient.EvictV1): a 429 from a PDB comes back at
	// once and is retried with the drain's own, visible backoff.
	return d.client.Pods(pod.Namespace).EvictV1(ctx, &policyv1.Eviction{
		TypeMeta:      metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: grace, Preconditions: &metav1.Preconditions{UID: &pod.UID}},
	})
}

// forceDelete deletes pod with grace 0 (the API server removes the object
// at once, finalizers permitting). Only the deadline's rule with
// ForceDeleteAtDeadline calls it.
func (d *Drainer) forceDelete(ctx context.Context, pod *corev1.Pod) error {
	zero := int64(0)
	d.log.Warn("deadline reached, deleting pod", "node", pod.Spec.NodeName, "pod", pod.Namespace+"/"+pod.Name)
	err := d.client.Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("force-deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}
