// Package status answers "which nodes is lifeboat handling right now, and
// will they make it?" from the state lifeboat keeps on Node objects (its
// annotations and taints) and the pods still on those nodes.
//
// Read fetches the selected Nodes and the Pods on them (by name or label
// selector, as kubectl get nodes selects); the rest is pure: Build turns
// Nodes and Pods into rows and Print prints them in the -o format asked
// for (print.go).
package status

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/plan"
)

// State says where lifeboat is with a node.
type State string

const (
	// Scheduled: events are recorded but not due yet (a scheduled change ahead).
	Scheduled State = "scheduled"
	// Handling: cordoned, draining or completing its lifecycle action.
	Handling State = "handling"
	// Drained: lifeboat finished the node; it stays cordoned until it goes.
	Drained State = "drained"
)

// Node is one node lifeboat handles or has handled.
type Node struct {
	Name       string `json:"name"`
	InstanceID string `json:"instanceID,omitempty"`
	// Zone is the node's availability zone (its topology.kubernetes.io/zone
	// label, else its AWS providerID).
	Zone string `json:"zone,omitempty"`
	// InstanceType is the node's node.kubernetes.io/instance-type label.
	InstanceType string `json:"instanceType,omitempty"`
	State        State  `json:"state"`
	// Reason is the most severe interruption (the lifeboat.io/ taint's value).
	Reason string `json:"reason,omitempty"`
	// Events are the kinds of the AWS events recorded on the node, in the
	// order they were recorded.
	Events []string `json:"events,omitempty"`
	// Deadline is when AWS acts on the instance, the earliest recorded (zero: unknown).
	Deadline time.Time `json:"deadline,omitzero"`
	// SecondsLeft until Deadline at the time of the report (negative: passed).
	SecondsLeft *int64 `json:"secondsLeft,omitempty"`
	// Pods are the pods still on the node.
	Pods       []Pod      `json:"pods"`
	Heartbeats int        `json:"heartbeats"`
	Lifecycle  *Lifecycle `json:"lifecycle,omitempty"`
	// DrainedAt is when lifeboat finished the node (Drained only).
	DrainedAt time.Time `json:"drainedAt,omitzero"`
}

// Lifecycle is the node's Auto Scaling terminate lifecycle action.
type Lifecycle struct {
	Group string `json:"group"`
	Hook  string `json:"hook"`
	// State is pending (heartbeated while the node drains) or completed.
	State  string `json:"state"`
	Result string `json:"result,omitempty"` // CONTINUE or ABANDON, once completed
}

// Pod is one pod left on a node.
type Pod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// State: Terminating once deleted or evicted, else the pod's phase.
	State string `json:"state"`
	// Stays is true for pods a drain leaves (DaemonSet and mirror pods).
	Stays bool `json:"stays,omitempty"`
}

// Build returns the nodes lifeboat is handling or has drained, sorted by
// deadline (soonest first, unknown last) then name, each with its pods.
func Build(nodes []corev1.Node, pods []corev1.Pod, now time.Time) []Node {
	byNode := map[string][]Pod{}
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], podOf(p))
	}
	var out []Node
	for _, n := range nodes {
		s, ok := nodeOf(n, now)
		if !ok {
			continue
		}
		s.Pods = byNode[n.Name]
		if s.Pods == nil {
			s.Pods = []Pod{}
		}
		slices.SortFunc(s.Pods, func(a, b Pod) int {
			return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
		})
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Node) int {
		switch {
		case a.Deadline.IsZero() != b.Deadline.IsZero():
			if a.Deadline.IsZero() {
				return 1
			}
			return -1
		case !a.Deadline.Equal(b.Deadline):
			return a.Deadline.Compare(b.Deadline)
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// nodeOf reads lifeboat's state off one node; ok is false when lifeboat has
// nothing recorded on it.
func nodeOf(n corev1.Node, now time.Time) (Node, bool) {
	s := Node{Name: n.Name, InstanceID: instanceID(n.Spec.ProviderID), Zone: zone(n),
		InstanceType: n.Labels[corev1.LabelInstanceTypeStable]}
	var evs []event.Event
	if raw := n.Annotations[drain.AnnotationEvents]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &evs) // unreadable: shown with what the taints say
	}
	// lifeboat's taints carry --taint-effect (NoSchedule, NoExecute or
	// PreferNoSchedule): they are known by their key alone.
	tainted := false
	for _, t := range n.Spec.Taints {
		if strings.HasPrefix(t.Key, plan.TaintPrefix) {
			tainted = true
			if s.Reason == "" {
				s.Reason = t.Value
			}
		}
	}
	drainedAt, _ := time.Parse(time.RFC3339, n.Annotations[controller.AnnotationDrained])
	switch {
	case n.Annotations[drain.AnnotationEvents] != "" && tainted:
		s.State = Handling
	case n.Annotations[drain.AnnotationEvents] != "":
		s.State = Scheduled
	case tainted && !drainedAt.IsZero():
		s.State, s.DrainedAt = Drained, drainedAt
	default:
		return s, false
	}
	s.Events = kinds(evs)
	if s.Reason == "" {
		s.Reason = strings.Join(s.Events, ",")
	}
	for _, e := range evs {
		if !e.Deadline.IsZero() && (s.Deadline.IsZero() || e.Deadline.Before(s.Deadline)) {
			s.Deadline = e.Deadline
		}
	}
	if !s.Deadline.IsZero() && s.State != Drained {
		left := int64(s.Deadline.Sub(now).Truncate(time.Second) / time.Second)
		s.SecondsLeft = &left
	}
	s.Heartbeats, _ = strconv.Atoi(n.Annotations[controller.AnnotationHeartbeats])
	s.Lifecycle = lifecycleOf(evs, n.Annotations[controller.AnnotationLifecycle], s.State)
	return s, true
}

// lifecycleOf finds the node's terminate lifecycle action: pending while a
// recorded event carries it and its completion is not recorded, completed
// once lifeboat recorded the completion.
func lifecycleOf(evs []event.Event, note string, st State) *Lifecycle {
	var done controller.LifecycleNote
	if note != "" {
		_ = json.Unmarshal([]byte(note), &done)
	}
	// The completion names its action by token, or by group and hook when
	// it had none (IMDS mode).
	doneKey := event.LifecycleAction{Token: done.Token, GroupName: done.Group, HookName: done.Hook}.Key()
	for _, e := range evs {
		if e.Kind != event.LifecycleTerminate || e.Lifecycle == nil {
			continue
		}
		l := &Lifecycle{Group: e.Lifecycle.GroupName, Hook: e.Lifecycle.HookName, State: "pending"}
		if doneKey != "" && doneKey == e.Lifecycle.Key() {
			l.State, l.Result = "completed", done.Result
		}
		return l
	}
	if st == Drained && doneKey != "" {
		return &Lifecycle{Group: done.Group, Hook: done.Hook, State: "completed", Result: done.Result}
	}
	return nil
}

// kinds names the events' kinds, each once (the reason of a node with no
// taint yet: nothing is due).
func kinds(evs []event.Event) []string {
	var ks []string
	for _, e := range evs {
		if !slices.Contains(ks, string(e.Kind)) {
			ks = append(ks, string(e.Kind))
		}
	}
	return ks
}

func podOf(p corev1.Pod) Pod {
	st := string(p.Status.Phase)
	if p.DeletionTimestamp != nil {
		st = "Terminating"
	}
	if st == "" {
		st = string(corev1.PodPending)
	}
	stays := p.Annotations[corev1.MirrorPodAnnotationKey] != ""
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			stays = true
		}
	}
	return Pod{Namespace: p.Namespace, Name: p.Name, State: st, Stays: stays}
}

// instanceID extracts the instance ID of an AWS providerID.
func instanceID(providerID string) string {
	if i := strings.LastIndex(providerID, "/"); i >= 0 {
		return event.NormalizeInstanceID(providerID[i+1:])
	}
	return ""
}

// zone is the node's availability zone: its topology label, else the zone
// of its AWS providerID (aws:///us-east-1a/i-0123456789abcdef0).
func zone(n corev1.Node) string {
	if z := n.Labels[corev1.LabelTopologyZone]; z != "" {
		return z
	}
	rest, ok := strings.CutPrefix(n.Spec.ProviderID, "aws:///")
	if z, _, ok2 := strings.Cut(rest, "/"); ok && ok2 {
		return z
	}
	return ""
}
