package testenv

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CreateNodes and CreatePods (test/bench's fleets): every node is Ready
// without the not-ready taint and every pod Running and Ready when they
// return, as CreateNode and CreatePod leave each; a spec they cannot
// create is refused.
func TestCreateNodesAndPods(t *testing.T) {
	env := Start(t, Options{NoScheduler: true})
	ctx := t.Context()
	ns := env.Namespace(t)
	var nodes []NodeSpec
	var pods []PodSpec
	for i := range 3 {
		name := fmt.Sprintf("fleet-%d", i)
		nodes = append(nodes, NodeSpec{Name: name})
		for k := range 2 {
			pods = append(pods, PodSpec{Namespace: ns, Name: fmt.Sprintf("%s-p%d", name, k), Node: name, Grace: -1})
		}
	}
	if err := env.CreateNodes(ctx, nodes, 2); err != nil {
		t.Fatal(err)
	}
	if err := env.CreatePods(ctx, pods, 2); err != nil {
		t.Fatal(err)
	}
	for _, spec := range nodes {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, spec.Name, metav1.GetOptions{})
		if err != nil || !env.nodeUsable(n) {
			t.Errorf("node %s: %v, usable %v", spec.Name, err, err == nil && env.nodeUsable(n))
		}
	}
	for _, spec := range pods {
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, spec.Name, metav1.GetOptions{})
		if err != nil || !PodReady(p) {
			t.Errorf("pod %s: %v, ready %v", spec.Name, err, err == nil && PodReady(p))
		}
	}
	if err := env.CreateNodes(ctx, []NodeSpec{{}}, 1); err == nil {
		t.Error("CreateNodes made a node without a name")
	}
	if err := env.CreatePods(ctx, []PodSpec{{Namespace: ns, Name: "owned", Node: "fleet-0", OwnerKind: OwnerReplicaSet}}, 1); err == nil {
		t.Error("CreatePods made a pod with an owner")
	}
}
