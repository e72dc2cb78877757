// Package protect keeps do-not-disrupt work off the scale-in list (opt-in,
// --scale-in-protection): while a node runs a pod annotated not to be
// disrupted, its instance is protected from scale-in in its Auto Scaling
// group, so the group picks another instance instead of starting a long
// drain; the protection is lifted once those pods are gone.
//
// Bounded and safe: lifeboat records on the Node, before it sets the
// protection, that it did so (AnnotationProtected), and lifts only the
// protection it recorded. Every pass compares the pods with the records,
// so protection left by a lifeboat that stopped mid-way is lifted by the
// next one's first pass. Plan is pure; Protector carries it out.
package protect

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Pod annotations that ask for no disruption (value "true").
const (
	AnnotationDoNotDisrupt = "lifeboat.io/do-not-disrupt"
	// AnnotationKarpenter is Karpenter's, accepted so that one annotation
	// serves both.
	AnnotationKarpenter = "karpenter.sh/do-not-disrupt"
)

// AnnotationProtected on a Node names the Auto Scaling group in which
// lifeboat protected the node's instance from scale-in.
const AnnotationProtected = "lifeboat.io/scale-in-protection"

// DoNotDisrupt reports whether the pod asks not to be disrupted and still
// runs (a finished pod no longer needs its node).
func DoNotDisrupt(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	return p.Annotations[AnnotationDoNotDisrupt] == "true" || p.Annotations[AnnotationKarpenter] == "true"
}

// Change is one protection to set or lift.
type Change struct {
	Node       string
	InstanceID string
	// Protect: set the protection (Group unknown yet); else lift it in Group.
	Protect bool
	Group   string
	// Pods name the do-not-disrupt pods (namespace/name) that call for it.
	Pods []string
}

// Plan returns the changes that make the nodes' protection match their
// pods: protect a node with do-not-disrupt pods that lifeboat has not
// protected; lift the protection lifeboat recorded on a node without any.
// Nodes without an instance ID (not EC2) are left alone. Sorted by node.
func Plan(nodes []*corev1.Node, pods []corev1.Pod) []Change {
	want := map[string][]string{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName != "" && DoNotDisrupt(p) {
			want[p.Spec.NodeName] = append(want[p.Spec.NodeName], p.Namespace+"/"+p.Name)
		}
	}
	var out []Change
	for _, n := range nodes {
		id := instanceID(n.Spec.ProviderID)
		if id == "" {
			continue
		}
		group := n.Annotations[AnnotationProtected]
		ps := want[n.Name]
		switch {
		case len(ps) > 0 && group == "":
			slices.Sort(ps)
			out = append(out, Change{Node: n.Name, InstanceID: id, Protect: true, Pods: ps})
		case len(ps) == 0 && group != "":
			out = append(out, Change{Node: n.Name, InstanceID: id, Group: group})
		}
	}
	slices.SortFunc(out, func(a, b Change) int { return strings.Compare(a.Node, b.Node) })
	return out
}

// instanceID extracts the instance ID of an AWS providerID
// (aws:///us-east-1a/i-0123456789abcdef0), or "".
func instanceID(providerID string) string {
	if !strings.HasPrefix(providerID, "aws://") {
		return ""
	}
	id := providerID[strings.LastIndex(providerID, "/")+1:]
	if !strings.HasPrefix(id, "i-") {
		return ""
	}
	return id
}
