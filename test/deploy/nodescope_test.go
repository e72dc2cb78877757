package deploy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/test/testenv"
)

// TestNodeScopePolicy: in IMDS mode the chart's RBAC grants every node's
// pod node updates, pod deletes and Events cluster-wide; its
// ValidatingAdmissionPolicies narrow the writes to the node named in the
// pod-bound token. With a token bound to a pod on node A (what the kubelet
// mounts), first without the policies: it cordons node B and deletes a pod
// on node B (the harm). Then with them: every write lifeboat makes on its
// own node passes, the same writes on node B are refused with the policy's
// message, and so are changes of A's labels, foreign annotations and
// foreign taints, and every write with a token that names no node. What the
// policies cannot narrow is pinned too: an eviction of B's pod and a
// cluster-wide pod list still pass (docs/install.md says why).
func TestNodeScopePolicy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ns := kube.Namespace(t)
	release := testenv.UniqueName("scope")
	r := mustRender(t, release, ns, map[string]any{"mode": "imds", "forceDeleteAtDeadline": true, "terminatingCondition": true})
	var rbac, policies []*unstructured.Unstructured
	for _, o := range r.Objects {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			rbac = append(rbac, o)
		case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			policies = append(policies, o)
		}
	}
	if len(policies) != 8 {
		t.Fatalf("rendered %d policies and bindings, want 4 of each: %v", len(policies), kinds(r))
	}
	applyForTest(t, rbac)
	sa := r.one(t, "ServiceAccount").GetName()

	nodeA := kube.Node(t, testenv.NodeSpec{}).Name
	nodeB := kube.Node(t, testenv.NodeSpec{}).Name
	pod := func(name, node string) *corev1.Pod {
		t.Helper()
		p, err := kube.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: sa, TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{Name: "app", Image: testenv.PauseImage}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	self := pod("lifeboat-a", nodeA) // lifeboat's own pod on node A
	ownVictim := pod("victim-a", nodeA)
	harmVictim := pod("victim-b-0", nodeB)
	victim := pod("victim-b", nodeB)
	evicted := pod("victim-b-evicted", nodeB)

	token, err := kube.BoundToken(ctx, self)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := kube.ClientForToken(token)
	if err != nil {
		t.Fatal(err)
	}
	user, claim, err := testenv.WhoAmI(ctx, lb)
	if err != nil {
		t.Fatal(err)
	}
	if claim != nodeA {
		t.Fatalf("the token bound to a pod on %s is seen as user %s with node claim %q; the API server must pass the node (ServiceAccountTokenPodNodeInfo)", nodeA, user, claim)
	}
	t.Logf("token bound to %s/%s: user %s, %s=%s", ns, self.Name, user, testenv.NodeClaimKey, claim)
	unboundTok, err := kube.TokenFor(ctx, ns, sa)
	if err != nil {
		t.Fatal(err)
	}
	unbound, err := kube.ClientForToken(unboundTok)
	if err != nil {
		t.Fatal(err)
	}

	// The harm: without the policies, node A's pod changes node B.
	if err := testenv.CordonNode(ctx, lb, nodeB, false); err != nil {
		t.Fatalf("without the policies, cordoning node B with A's token: %v", err)
	}
	t.Logf("without the policies: node %s's pod cordoned node %s", nodeA, nodeB)
	uncordon(ctx, t, nodeB)
	if err := testenv.DeletePod(ctx, lb, ns, harmVictim.Name, false); err != nil {
		t.Fatalf("without the policies, deleting a pod on node B with A's token: %v", err)
	}
	t.Logf("without the policies: node %s's pod deleted %s on node %s", nodeA, harmVictim.Name, nodeB)

	applyForTest(t, policies)
	// A policy acts once the API server has loaded it (under a second).
	if err := eventually(ctx, 20*time.Second, "the policies to refuse A's dry-run writes on B", func() (bool, error) {
		return testenv.CordonNode(ctx, lb, nodeB, true) != nil && testenv.DeletePod(ctx, lb, ns, victim.Name, true) != nil &&
			testenv.NodeEvent(ctx, lb, nodeB, true) != nil, nil
	}); err != nil {
		t.Fatal(err)
	}

	allowed := []struct {
		name string
		do   func() error
	}{
		{"cordon its own node", func() error { return testenv.CordonNode(ctx, lb, nodeA, false) }},
		{"taint its own node lifeboat.io/", func() error { return testenv.TaintNode(ctx, lb, nodeA, "lifeboat.io/spot-interruption") }},
		{"annotate its own node lifeboat.io/", func() error {
			return testenv.PatchNodeMetadata(ctx, lb, nodeA, "annotations", "lifeboat.io/drained", "yes")
		}},
		{"an Event about its own node", func() error { return testenv.NodeEvent(ctx, lb, nodeA, false) }},
		{"the condition lifeboat.io/Terminating on its own node", func() error { return nodeCondition(ctx, lb, nodeA, "lifeboat.io/Terminating") }},
		{"the deadline's annotations on a pod of its own node", func() error {
			return podAnnotation(ctx, lb, ns, ownVictim.Name, "lifeboat.io/deadline", "2030-01-01T00:02:00Z")
		}},
		{"delete a pod on its own node", func() error { return testenv.DeletePod(ctx, lb, ns, ownVictim.Name, false) }},
	}
	for _, a := range allowed {
		if err := a.do(); err != nil {
			t.Errorf("%s: %v", a.name, err)
		}
	}

	denied := []struct {
		name, policy, message string
		do                    func() error
	}{
		{"cordon another node", "own-node", "lifeboat on node " + nodeA + " may change only its own node, not node " + nodeB,
			func() error { return testenv.CordonNode(ctx, lb, nodeB, false) }},
		{"annotate another node", "own-node", "may change only its own node, not node " + nodeB,
			func() error {
				return testenv.PatchNodeMetadata(ctx, lb, nodeB, "annotations", "lifeboat.io/drained", "yes")
			}},
		{"label its own node", "own-node", "lifeboat may not change its node's labels",
			func() error {
				return testenv.PatchNodeMetadata(ctx, lb, nodeA, "labels", "node-restriction.kubernetes.io/trusted", "yes")
			}},
		{"a foreign annotation on its own node", "own-node", "only the lifeboat.io/ annotations",
			func() error {
				return testenv.PatchNodeMetadata(ctx, lb, nodeA, "annotations", "example.com/owner", "me")
			}},
		{"a foreign taint on its own node", "own-node", "only the lifeboat.io/ taints",
			func() error { return testenv.TaintNode(ctx, lb, nodeA, "example.com/dedicated") }},
		{"delete a pod on another node", "own-node-pods", "lifeboat on node " + nodeA + " may delete only pods on its own node, not " + ns + "/" + victim.Name + " on node " + nodeB,
			func() error { return testenv.DeletePod(ctx, lb, ns, victim.Name, false) }},
		{"the condition on another node", "own-node-status", "lifeboat on node " + nodeA + " may change only its own node, not node " + nodeB,
			func() error { return nodeCondition(ctx, lb, nodeB, "lifeboat.io/Terminating") }},
		{"another condition of its own node", "own-node-status", "may change only the condition lifeboat.io/Terminating",
			func() error { return nodeCondition(ctx, lb, nodeA, "NetworkUnavailable") }},
		{"annotate a pod on another node", "own-node-pods", "lifeboat on node " + nodeA + " may change only pods on its own node, not " + ns + "/" + victim.Name + " on node " + nodeB,
			func() error {
				return podAnnotation(ctx, lb, ns, victim.Name, "lifeboat.io/deadline", "2030-01-01T00:02:00Z")
			}},
		{"a foreign annotation on a pod of its own node", "own-node-pods", "lifeboat may change only the lifeboat.io/ annotations of a pod",
			func() error { return podAnnotation(ctx, lb, ns, self.Name, "example.com/owner", "me") }},
		{"an Event about another node", "own-node-events", "may report Events only about its own node, not node " + nodeB,
			func() error { return testenv.NodeEvent(ctx, lb, nodeB, false) }},
		{"cordon with a token bound to no pod", "own-node", "this request's token names no node",
			func() error { return testenv.CordonNode(ctx, unbound, nodeA, false) }},
	}
	for _, d := range denied {
		err := d.do()
		policy := release + "-lifeboat-" + d.policy
		switch {
		case err == nil:
			t.Errorf("%s: allowed; want refused by %s", d.name, policy)
		case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "'"+policy+"'") || !strings.Contains(err.Error(), d.message):
			t.Errorf("%s: %v; want 403 from %s saying %q", d.name, err, policy, d.message)
		default:
			t.Logf("%s: refused: %v", d.name, err)
		}
	}
	n, err := kube.Client.CoreV1().Nodes().Get(ctx, nodeB, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Spec.Unschedulable || n.Annotations["lifeboat.io/drained"] != "" {
		t.Errorf("node B was changed: unschedulable %v, annotations %v", n.Spec.Unschedulable, n.Annotations)
	}
	if _, err := kube.Client.CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the pod on node B: %v; want it still there", err)
	}

	// What stays cluster-wide: an Eviction names the pod, not its node, and
	// a policy cannot read the pod; reads are not admitted at all.
	if err := lb.PolicyV1().Evictions(ns).Evict(ctx, evictionOf(evicted)); err != nil {
		t.Errorf("evicting a pod on node B: %v; docs/install.md says evictions stay cluster-wide", err)
	} else {
		t.Logf("still allowed, as documented: node %s's pod evicted %s on node %s", nodeA, evicted.Name, nodeB)
	}
	if pods, err := lb.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("listing every pod: %v; docs/install.md says reads stay cluster-wide", err)
	} else {
		t.Logf("still allowed, as documented: node %s's pod listed %d pods of the cluster", nodeA, len(pods.Items))
	}
}

// nodeCondition writes a condition of type typ, status True, through
// the node's status subresource, as lifeboat does.
func nodeCondition(ctx context.Context, c kubernetes.Interface, node, typ string) error {
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":"True","reason":"SpotInterruption","message":"test"}]}}`, typ)
	_, err := c.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	return err
}

// podAnnotation sets one annotation of a pod with a merge patch, as
// lifeboat does.
func podAnnotation(ctx context.Context, c kubernetes.Interface, ns, pod, key, value string) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	_, err := c.CoreV1().Pods(ns).Patch(ctx, pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

func uncordon(ctx context.Context, t *testing.T, node string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := kube.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Unschedulable = false
		_, err = kube.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("uncordoning %s: %v", node, err)
	}
}

func evictionOf(p *corev1.Pod) *policyv1.Eviction {
	return &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
}
