// Package dsstop stops a node's DaemonSet pods last, before a terminate
// lifecycle action is completed with CONTINUE: once the drain has moved
// every other pod off, the DaemonSet pods that opt in (AnnotationStop on
// the pod, set in the DaemonSet's pod template, or Options.All) are
// evicted with their grace period, capped to the time left before the
// deadline less the margin, and waited for, ordinary pods before
// system-critical ones. Their shutdown (a log shipper's flush, a mesh
// agent's drain) then ends before the instance goes instead of being cut
// off by it.
//
// It owns which DaemonSet pods are stopped (Decide, pure) and stopping
// them. It must not touch any other pod (the drain's), decide when the
// step runs (the controller schedules it) or talk to AWS.
package dsstop

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/drain"
)

// AnnotationStop on a DaemonSet pod (put it in the DaemonSet's
// spec.template.metadata.annotations) opts it in ("true") or out
// ("false") of being stopped before its instance's terminate lifecycle
// action is completed; "false" wins over Options.All.
const AnnotationStop = "lifeboat.io/stop-before-termination"

// Why says whether and why a DaemonSet pod is stopped.
type Why int

const (
	// StopAnnotated: the pod opts in (AnnotationStop "true").
	StopAnnotated Why = iota + 1
	// StopAll: Options.All (--stop-daemonset-pods) and no opt-out.
	StopAll
	// SkipNotOptedIn: neither the annotation nor Options.All.
	SkipNotOptedIn
	// SkipOptedOut: AnnotationStop "false".
	SkipOptedOut
	// SkipOwn: lifeboat's own pod (IMDS mode runs as a DaemonSet): it
	// completes the action, so it stays to the end.
	SkipOwn
	// SkipMirror: a mirror pod (a static pod's): the API server cannot
	// stop it, only the kubelet's manifest can.
	SkipMirror
	// SkipFinished: its containers have ended already.
	SkipFinished
)

// Stops reports whether the pod is stopped.
func (w Why) Stops() bool { return w == StopAnnotated || w == StopAll }

func (w Why) String() string {
	switch w {
	case StopAnnotated:
		return "opted in by " + AnnotationStop
	case StopAll:
		return "--stop-daemonset-pods"
	case SkipNotOptedIn:
		return "not opted in"
	case SkipOptedOut:
		return "opted out by " + AnnotationStop + "=false"
	case SkipOwn:
		return "lifeboat's own pod"
	case SkipMirror:
		return "a mirror pod"
	case SkipFinished:
		return "finished"
	}
	return "unknown"
}

// Decision is what Decide says of one DaemonSet pod.
type Decision struct {
	Pod corev1.Pod
	Why Why
}

// Decide returns, in order, a decision for each pod of pods that a
// DaemonSet controls; every other pod is the drain's and is left out.
// all is Options.All; own reports lifeboat's own pod (nil: none).
func Decide(pods []corev1.Pod, all bool, own func(*corev1.Pod) bool) []Decision {
	var out []Decision
	for _, p := range pods {
		if DaemonSetOf(&p) == "" {
			continue
		}
		out = append(out, Decision{Pod: p, Why: decide(&p, all, own)})
	}
	return out
}

func decide(p *corev1.Pod, all bool, own func(*corev1.Pod) bool) Why {
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return SkipMirror
	}
	if own != nil && own(p) {
		return SkipOwn
	}
	if drain.Finished(p) {
		return SkipFinished
	}
	switch p.Annotations[AnnotationStop] {
	case "true":
		return StopAnnotated
	case "false":
		return SkipOptedOut
	}
	if all {
		return StopAll
	}
	return SkipNotOptedIn
}

// DaemonSetOf returns the UID of the DaemonSet that controls p ("": none).
func DaemonSetOf(p *corev1.Pod) string {
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == "DaemonSet" {
			return string(o.UID)
		}
	}
	return ""
}

// Grace is the grace period, in seconds, an eviction of p asks for with
// left the time before the deadline less the margin (negative or zero
// with a deadline: none left; noDeadline: no cap): the drain's
// (drain.EvictionGrace: podGrace, --pod-grace-period, when positive, else
// the pod's own, never below drain.MinGrace) cut to left (capped), never
// below drain.MinGrace.
func Grace(p *corev1.Pod, podGrace, left time.Duration, noDeadline bool) (grace int64, capped bool) {
	grace = int64(drain.EvictionGrace(p, podGrace) / time.Second)
	if !noDeadline {
		if l := int64(left / time.Second); l < grace {
			grace, capped = max(l, drain.MinGrace), true
		}
	}
	return grace, capped
}
