package dsstop

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/kube"
)

// poll is how often the node's pods are listed while waiting.
const poll = 250 * time.Millisecond

// Options configure a Stopper.
type Options struct {
	// All stops every DaemonSet pod that does not opt out
	// (--stop-daemonset-pods); without it only those that opt in.
	All bool
	// Own reports lifeboat's own pod, never stopped; nil: none.
	Own func(*corev1.Pod) bool
	// PodGrace, when positive, is every eviction's grace period instead
	// of the pod's own (--pod-grace-period).
	PodGrace time.Duration
	// Margin is kept before the deadline (--deadline-margin).
	Margin time.Duration
	// Backoff is the delay before a refused eviction (429, 409, a server
	// error) is tried again; zero: 5 s.
	Backoff time.Duration
	// StuckAfter bounds the wait without a deadline: the grace a pod got
	// plus this; zero: drain.DefaultStuckAfter.
	StuckAfter time.Duration
	// Recorder records the Events; nil: none.
	Recorder kube.EventRecorder
	DryRun   bool
}

// Stopper stops the DaemonSet pods of nodes. It is safe for concurrent
// use on different nodes.
type Stopper struct {
	client kube.Client
	clock  clock.WithTicker
	log    *slog.Logger
	o      Options
}

// New returns a Stopper.
func New(client kube.Client, clk clock.WithTicker, log *slog.Logger, o Options) *Stopper {
	if o.Backoff <= 0 {
		o.Backoff = 5 * time.Second
	}
	if o.StuckAfter <= 0 {
		o.StuckAfter = drain.DefaultStuckAfter
	}
	return &Stopper{client: client, clock: clk, log: log, o: o}
}

// PodStop is a DaemonSet pod stopped: the grace it got (capped: cut to
// the time left) and how long after its eviction it was gone.
type PodStop struct {
	Namespace, Name string
	Grace           int64
	Capped          bool
	Took            time.Duration
}

// Result is what a Stop did.
type Result struct {
	Stopped    []PodStop
	NotStopped []drain.PodProblem
	// Recreated names the pods the DaemonSets put on the node after their
	// pod there was stopped.
	Recreated []string
	// NotOptedIn counts the DaemonSet pods left to die with the instance.
	NotOptedIn int
}

// Stop stops the node's DaemonSet pods that opt in, ordinary pods before
// system-critical ones (drain.Order), each evicted with Grace and waited
// for until it is gone or deadline less the margin (zero deadline: its
// grace plus StuckAfter) has passed. Each pod is asked once: a pod its
// DaemonSet puts back is reported, not stopped again. It returns only
// ctx's error: what it could not do is reported, and the action is
// completed all the same (the instance goes anyway).
func (s *Stopper) Stop(ctx context.Context, node string, deadline time.Time) (Result, error) {
	var res Result
	pods, err := s.list(ctx, node)
	if err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		s.log.Warn("listing the node's DaemonSet pods failed: none stopped", "node", node, "error", err.Error())
		return res, nil
	}
	var stop []corev1.Pod
	for _, d := range Decide(pods, s.o.All, s.o.Own) {
		switch {
		case d.Why.Stops():
			stop = append(stop, d.Pod)
		case d.Why == SkipNotOptedIn:
			res.NotOptedIn++
		}
	}
	if len(stop) == 0 {
		return res, nil
	}
	if s.o.DryRun {
		s.log.Info("dry run: would stop DaemonSet pods", "node", node, "pods", len(stop))
		return res, nil
	}
	until := time.Time{}
	if !deadline.IsZero() {
		until = deadline.Add(-s.o.Margin)
	}
	w := &watch{known: map[types.UID]bool{}, owners: map[string]bool{}}
	for _, p := range pods {
		w.known[p.UID] = true
	}
	for _, group := range drain.Order(stop) {
		if err := s.stopGroup(ctx, node, group, until, w, &res); err != nil {
			return res, err
		}
	}
	// A DaemonSet puts a pod back within moments of its pod's deletion:
	// one more poll gives it the time to show before CONTINUE.
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-s.clock.After(poll):
	}
	if pods, err := s.list(ctx, node); err == nil {
		s.recreated(node, pods, w, &res)
	}
	s.log.Info("DaemonSet pods stopped", "node", node, "stopped", len(res.Stopped), "notStopped", len(res.NotStopped),
		"recreated", len(res.Recreated), "notOptedIn", res.NotOptedIn)
	return res, nil
}

// watch is what a Stop knows of the node's pods: the UIDs seen, and the
// DaemonSets whose pods it stopped.
type watch struct {
	known  map[types.UID]bool
	owners map[string]bool
}

// asked is a pod whose eviction was accepted.
type asked struct {
	pod    corev1.Pod
	at     time.Time
	grace  int64
	capped bool
}

// stopGroup evicts the pods of one group (retrying refusals that can
// pass every Backoff) and waits until they are gone, up to until.
func (s *Stopper) stopGroup(ctx context.Context, node string, group []corev1.Pod, until time.Time, w *watch, res *Result) error {
	pending := group
	var waiting []asked
	nextTry := s.clock.Now()
	last := map[types.UID]string{} // the last refusal of a pending pod
	for {
		now := s.clock.Now()
		if len(pending) > 0 && !now.Before(nextTry) {
			var again []corev1.Pod
			for _, p := range pending {
				left := until.Sub(s.clock.Now())
				if !until.IsZero() && left < drain.MinGrace*time.Second {
					s.notStopped(node, p, noTime(last[p.UID]), res)
					continue
				}
				grace, capped := Grace(&p, s.o.PodGrace, left, until.IsZero())
				err := s.evict(ctx, &p, grace)
				switch {
				case err == nil || apierrors.IsNotFound(err):
					w.owners[DaemonSetOf(&p)] = true
					waiting = append(waiting, asked{pod: p, at: s.clock.Now(), grace: grace, capped: capped})
				case ctx.Err() != nil:
					return ctx.Err()
				case drain.RefusedForGood(err):
					s.notStopped(node, p, "eviction refused: "+err.Error(), res)
				default: // a budget (429), a conflict, a failure: again after Backoff
					last[p.UID] = err.Error()
					again = append(again, p)
				}
			}
			pending = again
			nextTry = s.clock.Now().Add(s.o.Backoff)
		}
		if len(pending) == 0 && len(waiting) == 0 {
			return nil
		}
		pods, err := s.list(ctx, node)
		if err == nil {
			pending = present(pods, pending) // a pod gone by itself needs no eviction
			waiting = s.gone(node, pods, waiting, res)
			s.recreated(node, pods, w, res)
		}
		now = s.clock.Now()
		if len(pending) == 0 && len(waiting) == 0 {
			return nil
		}
		if s.past(now, until, waiting) {
			for _, p := range pending {
				s.notStopped(node, p, noTime(last[p.UID]), res)
			}
			for _, a := range waiting {
				s.notStopped(node, a.pod, fmt.Sprintf("still running %s after its eviction (grace %d s) when the step's time ran out", now.Sub(a.at).Round(time.Second), a.grace), res)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.clock.After(poll):
		}
	}
}

// noTime says why a pod not yet evicted was left: no time left, or its
// eviction (last refusal) still refused.
func noTime(last string) string {
	if last != "" {
		return "eviction still refused at the deadline less the margin: " + last
	}
	return "no time left before the deadline less the margin"
}

// past reports whether the wait is over: until reached, or without a
// deadline every waiting pod's grace plus StuckAfter.
func (s *Stopper) past(now, until time.Time, waiting []asked) bool {
	if !until.IsZero() {
		return !now.Before(until)
	}
	for _, a := range waiting {
		if now.Before(a.at.Add(time.Duration(a.grace)*time.Second + s.o.StuckAfter)) {
			return false
		}
	}
	return true
}

// gone reports the waiting pods that are gone (absent from pods, or their
// containers all ended) and returns the others.
func (s *Stopper) gone(node string, pods []corev1.Pod, waiting []asked, res *Result) []asked {
	byUID := map[types.UID]*corev1.Pod{}
	for i := range pods {
		byUID[pods[i].UID] = &pods[i]
	}
	now := s.clock.Now()
	var still []asked
	for _, a := range waiting {
		if p, ok := byUID[a.pod.UID]; ok && !ended(p) {
			still = append(still, a)
			continue
		}
		took := now.Sub(a.at)
		res.Stopped = append(res.Stopped, PodStop{Namespace: a.pod.Namespace, Name: a.pod.Name, Grace: a.grace, Capped: a.capped, Took: took})
		msg := fmt.Sprintf("stopped after the node's other pods left, before its terminate lifecycle action is completed: evicted with a grace period of %d s, gone after %s", a.grace, took.Round(100*time.Millisecond))
		if a.capped {
			msg += " (grace cut to the time left before the deadline less the margin)"
		}
		s.log.Info(ReasonStopped, "node", node, "pod", a.pod.Namespace+"/"+a.pod.Name, "grace", a.grace, "took", took.String())
		s.record(node, &a.pod, corev1.EventTypeNormal, ReasonStopped, msg)
	}
	return still
}

// list lists the node's pods (drain.NodePods; those of another node left out, as a fake
// client ignores the field selector).
func (s *Stopper) list(ctx context.Context, node string) ([]corev1.Pod, error) {
	list, err := drain.NodePods(ctx, s.client, node, "")
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out, nil
}

// evict asks the API server to evict pod (with its UID) with grace.
func (s *Stopper) evict(ctx context.Context, pod *corev1.Pod, grace int64) error {
	return s.client.Pods(pod.Namespace).EvictV1(ctx, &policyv1.Eviction{
		TypeMeta:      metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &pod.UID}},
	})
}

// present returns the pods of ps still in pods (same UID).
func present(pods, ps []corev1.Pod) []corev1.Pod {
	uids := map[types.UID]bool{}
	for _, p := range pods {
		uids[p.UID] = true
	}
	var out []corev1.Pod
	for _, p := range ps {
		if uids[p.UID] {
			out = append(out, p)
		}
	}
	return out
}

// ended reports whether a pod's containers have all ended: it is
// finished (drain.Finished), or it has container statuses and every one
// is terminated.
func ended(p *corev1.Pod) bool {
	if drain.Finished(p) {
		return true
	}
	if len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Terminated == nil {
			return false
		}
	}
	return true
}
