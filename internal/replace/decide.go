// Package replace gets a replacement Ready on another node before a drain
// evicts a pod whose Deployment would otherwise lose its last ready
// replica (docs/replacement-first.md). Decide is the pure decision for
// one Deployment's pods on a draining node; Replacer is the step that
// reads what Decide needs, restarts the Deployment's rollout (the write
// `kubectl rollout restart` makes) and waits, within the deadline, until
// a pod of the new template is Ready on another node.
package replace

import (
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Annotations a Deployment may carry.
const (
	// AnnotationOptOut set to "false" on a Deployment turns replacement
	// first off for it.
	AnnotationOptOut = "lifeboat.io/replacement-first"
	// AnnotationSeconds on a Deployment is the time, in whole seconds, a
	// new pod of it needs from creation to Ready; without it the time is
	// learned from its pods' own starts.
	AnnotationSeconds = "lifeboat.io/replacement-seconds"
	// RestartedAt is the pod-template annotation `kubectl rollout
	// restart` sets; setting it is the only change lifeboat makes.
	RestartedAt = "kubectl.kubernetes.io/restartedAt"
)

// Action is what the drain does with a Deployment's pods on the node.
type Action int

const (
	// Evict them as today.
	Evict Action = iota
	// Replace them first: restart the rollout (unless one is under way)
	// and wait for Want new pods Ready on other nodes, until Until.
	Replace
)

// Reason says why Decide chose its Action.
type Reason string

const (
	// ReasonNotLast: another ready replica remains and no budget
	// forbids the disruption; nothing to do.
	ReasonNotLast Reason = "not-last"
	// ReasonStatefulSet, ReasonBarePod, ReasonOtherOwner and
	// ReasonNoDeployment: not a Deployment's pod; evicted as today.
	ReasonStatefulSet  Reason = "statefulset"
	ReasonBarePod      Reason = "bare-pod"
	ReasonOtherOwner   Reason = "other-owner"
	ReasonNoDeployment Reason = "replicaset-without-deployment"
	// The Deployment's last pods are evicted as today because:
	ReasonOptedOut       Reason = "opted-out"       // AnnotationOptOut is "false"
	ReasonPaused         Reason = "paused"          // a paused Deployment does not roll out
	ReasonRecreate       Reason = "recreate"        // Recreate removes old pods before new ones exist
	ReasonMaxUnavailable Reason = "max-unavailable" // the rollout may remove pods before their replacements are Ready
	ReasonUnknownTime    Reason = "unknown-time"    // no annotation and no pod that ever became Ready
	ReasonNoTime         Reason = "no-time"         // the replacement needs more than the time left
	// ReasonLast: replace first.
	ReasonLast Reason = "last"
)

// Skipped reports whether r is a reason a Deployment's last pods were
// evicted without a replacement (reported as ReplacementSkipped).
func (r Reason) Skipped() bool {
	switch r {
	case ReasonOptedOut, ReasonPaused, ReasonRecreate, ReasonMaxUnavailable, ReasonUnknownTime, ReasonNoTime:
		return true
	}
	return false
}

// OwnerReason classifies a pod by its controller before anything is read:
// "" for a pod a ReplicaSet controls (maybe a Deployment's), else the
// reason it is evicted as today.
func OwnerReason(p *corev1.Pod) Reason {
	ref := metav1.GetControllerOf(p)
	switch {
	case ref == nil:
		return ReasonBarePod
	case ref.Kind == "StatefulSet":
		return ReasonStatefulSet
	case ref.Kind == "ReplicaSet" && ref.APIVersion == "apps/v1":
		return ""
	}
	return ReasonOtherOwner
}

// Input is what Decide needs about one Deployment's pods on a draining
// node.
type Input struct {
	// Node is the draining node; Pods are the Deployment's pods on it
	// the drain evicts (at least one), all of ReplicaSet.
	Node string
	Pods []corev1.Pod
	// ReplicaSet controls Pods; Deployment controls ReplicaSet (nil: none).
	ReplicaSet *appsv1.ReplicaSet
	Deployment *appsv1.Deployment
	// Selected are the pods the Deployment's selector matches, in its
	// namespace, on every node.
	Selected []corev1.Pod
	// PDBs are the budgets of the Deployment's namespace.
	PDBs []policyv1.PodDisruptionBudget
	// Now, and EvictBy: the latest moment the evictions may begin and
	// still give the pods their grace before the deadline (zero: no
	// deadline; MaxWait bounds the wait then).
	Now, EvictBy time.Time
	MaxWait      time.Duration
}

// Decision is Decide's answer.
type Decision struct {
	Action Action
	Reason Reason
	// Detail explains Reason in words, for Events and logs.
	Detail string
	// Need is the time a new pod needs to become Ready, and NeedFrom
	// where it came from ("annotation" or "learned"), when known.
	Need     time.Duration
	NeedFrom string
	// Restart: no rollout to a newer template is under way, start one.
	Restart bool
	// Want is how many new pods must be Ready on other nodes; Until
	// bounds the wait.
	Want  int
	Until time.Time
	// Rounds is how many times in a row the rollout creates new pods
	// and waits for them Ready before Want are: Want over its maxSurge.
	Rounds int
}

// Decide decides for one Deployment's pods on a draining node.
func Decide(in Input) Decision {
	if in.Deployment == nil {
		return Decision{Reason: ReasonNoDeployment, Detail: "its ReplicaSet has no Deployment"}
	}
	d := in.Deployment
	if replicas(d) == 0 || !last(in) { // scaled to zero: nothing to keep available
		return Decision{Reason: ReasonNotLast}
	}
	skip := func(r Reason, detail string) Decision { return Decision{Reason: r, Detail: detail} }
	if d.Annotations[AnnotationOptOut] == "false" {
		return skip(ReasonOptedOut, AnnotationOptOut+` is "false"`)
	}
	if d.Spec.Paused {
		return skip(ReasonPaused, "the Deployment is paused")
	}
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return skip(ReasonRecreate, "strategy Recreate removes the old pods before it creates new ones")
	}
	if n, err := maxUnavailable(d); err != nil || n > 0 {
		return skip(ReasonMaxUnavailable, fmt.Sprintf("maxUnavailable allows %d pods unavailable during a rollout (err %v): its rollout would not wait for the replacement", n, err))
	}
	need, from, ok := needed(d, in.Selected)
	if !ok {
		return skip(ReasonUnknownTime, "no pod of it ever became Ready and it has no "+AnnotationSeconds+" annotation")
	}
	want := wanted(in)
	rounds := (want + surge(d) - 1) / surge(d)
	until := in.EvictBy
	if until.IsZero() {
		until = in.Now.Add(in.MaxWait)
	} else if in.Now.Add(time.Duration(rounds) * need).After(until) {
		return Decision{Reason: ReasonNoTime, Need: need, NeedFrom: from, Rounds: rounds,
			Detail: fmt.Sprintf("%d new pod(s) in %d rollout round(s) of %v (%s) need more than the %v left before the evictions must begin",
				want, rounds, need, from, until.Sub(in.Now).Round(time.Second))}
	}
	return Decision{Action: Replace, Reason: ReasonLast, Need: need, NeedFrom: from, Restart: !rollingOut(in.ReplicaSet, d),
		Want: want, Rounds: rounds, Until: until}
}

// wanted is how many new pods must be Ready on other nodes before the
// pods are evicted: as many as the Deployment has Ready now, and at least
// the pods here, at most its replicas. Fewer would not do: as each new
// pod is Ready the rollout scales the old ReplicaSet down, and may delete
// an old pod on another node while the drain evicts one here (its own
// maxUnavailable 0 counts the pod here as available). Once that many new
// pods are Ready, every old pod is one too many, wherever it runs.
func wanted(in Input) int {
	ready := 0
	for i := range in.Selected {
		if p := &in.Selected[i]; p.DeletionTimestamp == nil && podReady(p) {
			ready++
		}
	}
	return min(max(ready, len(in.Pods)), int(replicas(in.Deployment)))
}

// surge is how many new pods the Deployment's rollout creates at a
// time: its maxSurge in pods, at least one (with maxUnavailable 0 the
// API requires maxSurge above 0).
func surge(d *appsv1.Deployment) int {
	ms := intstr.FromString("25%") // the API's default
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil && ru.MaxSurge != nil {
		ms = *ru.MaxSurge
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&ms, int(replicas(d)), true)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// last reports whether evicting the pods would leave the Deployment
// without a ready replica, or a budget covering them allows no
// disruption now.
func last(in Input) bool {
	readyElsewhere := 0
	for i := range in.Selected {
		p := &in.Selected[i]
		if p.Spec.NodeName != in.Node && p.DeletionTimestamp == nil && podReady(p) {
			readyElsewhere++
		}
	}
	if readyElsewhere == 0 {
		return true
	}
	for _, b := range in.PDBs {
		if b.Status.DisruptionsAllowed > 0 {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil {
			continue // nil selects nothing; {} selects every pod (policy/v1)
		}
		for _, p := range in.Pods {
			if b.Namespace == p.Namespace && sel.Matches(labels.Set(p.Labels)) {
				return true
			}
		}
	}
	return false
}

// maxUnavailable is the Deployment's maxUnavailable in pods.
func maxUnavailable(d *appsv1.Deployment) (int, error) {
	mu := intstr.FromString("25%") // the API's default
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		mu = *ru.MaxUnavailable
	}
	return intstr.GetScaledValueFromIntOrPercent(&mu, int(replicas(d)), false)
}

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// needed is the time a new pod of d needs to become Ready: its
// AnnotationSeconds, else the slowest of its pods' creation to Ready.
func needed(d *appsv1.Deployment, pods []corev1.Pod) (time.Duration, string, bool) {
	if v, ok := d.Annotations[AnnotationSeconds]; ok {
		if s, err := strconv.Atoi(v); err == nil && s >= 0 {
			return time.Duration(s) * time.Second, "annotation", true
		}
	}
	var slowest time.Duration
	found := false
	for i := range pods {
		c := readyCondition(&pods[i])
		if c == nil || c.Status != corev1.ConditionTrue {
			continue
		}
		found = true
		slowest = max(slowest, c.LastTransitionTime.Sub(pods[i].CreationTimestamp.Time))
	}
	return slowest, "learned", found
}

// rollingOut reports whether d's template is already newer than rs's: a
// rollout that replaces rs's pods is under way, and a restart would only
// start it over.
func rollingOut(rs *appsv1.ReplicaSet, d *appsv1.Deployment) bool {
	t := rs.Spec.Template.DeepCopy()
	delete(t.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return !apiequality.Semantic.DeepEqual(*t, d.Spec.Template)
}

func readyCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	c := readyCondition(p)
	return c != nil && c.Status == corev1.ConditionTrue
}

// Replacement reports whether p counts as a replacement for pods of the
// template hash old on node: Ready, not terminating, on another node, of
// another template.
func Replacement(p *corev1.Pod, node, old string) bool {
	return p.Spec.NodeName != "" && p.Spec.NodeName != node && p.DeletionTimestamp == nil && podReady(p) &&
		p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != old
}
