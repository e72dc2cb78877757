package deploy

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/test/testenv"
)

// excludeLBLabel is the label --exclude-from-load-balancers puts on a
// cordoned node.
const excludeLBLabel = "node.kubernetes.io/exclude-from-external-load-balancers"

// scoped is one IMDS-mode release with its RBAC and node-scope policies
// applied, and a client holding the token the kubelet would mount in its
// DaemonSet pod on node.
type scoped struct {
	release, ns, node string
	chart             *rendered
	pod               *corev1.Pod // the DaemonSet's pod on node
	lb                kubernetes.Interface
}

// newScoped renders the chart in IMDS mode with values, applies its RBAC
// and its policies, creates the pod's node (instanceID: "" for a random
// one) and waits until the API server enforces the policies.
func newScoped(ctx context.Context, t *testing.T, values map[string]any, instanceID string) *scoped {
	t.Helper()
	s := &scoped{ns: kube.Namespace(t), release: strings.ToLower(testenv.UniqueName("ns"))}
	v := map[string]any{"mode": "imds"}
	for k, x := range values {
		v[k] = x
	}
	s.chart = mustRender(t, s.release, s.ns, v)
	var objs []*unstructured.Unstructured
	npolicies := 0
	for _, o := range s.chart.Objects {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			objs = append(objs, o)
		case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			objs = append(objs, o)
			npolicies++
		}
	}
	if npolicies == 0 {
		t.Fatalf("values %v rendered no node-scope policy: %v", values, kinds(s.chart))
	}
	applyForTest(t, objs)
	if instanceID == "" {
		instanceID = testenv.RandomInstanceID()
	}
	s.node = kube.Node(t, testenv.NodeSpec{InstanceID: instanceID}).Name
	sa := s.chart.one(t, "ServiceAccount").GetName()
	pod, err := kube.Client.CoreV1().Pods(s.ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: s.release + "-ds"},
		Spec: corev1.PodSpec{NodeName: s.node, ServiceAccountName: sa, TerminationGracePeriodSeconds: ptr.To[int64](0),
			// The DaemonSet's tolerations (every taint, by default): with
			// --taint-effect NoExecute, lifeboat's own taint must not evict
			// the pod its token is bound to.
			Tolerations: into[appsv1.DaemonSet](t, s.chart.one(t, "DaemonSet")).Spec.Template.Spec.Tolerations,
			Containers:  []corev1.Container{{Name: "lifeboat", Image: testenv.PauseImage}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.pod = pod
	token, err := kube.BoundToken(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	if s.lb, err = kube.ClientForToken(token); err != nil {
		t.Fatal(err)
	}
	// A policy acts once the API server has loaded it (under a second).
	if err := eventually(ctx, 20*time.Second, "the own-node policy to refuse a foreign label", func() (bool, error) {
		err := updateNodeAs(ctx, s.lb, s.node, true, func(n *corev1.Node) { n.Labels["example.com/probe"] = "x" })
		return apierrors.IsForbidden(err), nil
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

// updateNodeAs changes a node with client c as lifeboat writes one (a
// merge patch of what changed, version-checked: testenv.PatchNode); dryRun
// runs admission and stores nothing.
func updateNodeAs(ctx context.Context, c kubernetes.Interface, name string, dryRun bool, change func(*corev1.Node)) error {
	return testenv.PatchNode(ctx, c, name, dryRun, change)
}

// cordonAsLifeboat is lifeboat's cordon of a Spot interruption: one update
// that sets unschedulable, adds its taint with effect and, with
// --exclude-from-load-balancers, the exclude label.
func cordonAsLifeboat(effect corev1.TaintEffect, excludeLB bool) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Spec.Unschedulable = true
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "lifeboat.io/spot-interruption", Value: "true", Effect: effect})
		if excludeLB {
			n.Labels[excludeLBLabel] = "lifeboat"
		}
	}
}

// uncordonAsLifeboat undoes cordonAsLifeboat.
func uncordonAsLifeboat(n *corev1.Node) {
	n.Spec.Unschedulable = false
	var keep []corev1.Taint
	for _, t := range n.Spec.Taints {
		if !strings.HasPrefix(t.Key, "lifeboat.io/") {
			keep = append(keep, t)
		}
	}
	n.Spec.Taints = keep
	if n.Labels[excludeLBLabel] == "lifeboat" {
		delete(n.Labels, excludeLBLabel)
	}
}

// TestNodeScopePolicyFollowsOptions: the own-node policy admits exactly
// the node writes the configured options make (issue 22, defect 3), and
// no write that would let a compromised DaemonSet pod hurt its node beyond
// them (defect 7): no finalizer, no ownerReference (the garbage collector
// would delete the Node once its "owner" is found missing), no
// lifeboat.io/ taint with an effect other than --taint-effect's (NoExecute
// evicts every pod at once, past PodDisruptionBudgets).
func TestNodeScopePolicyFollowsOptions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	type write struct {
		name    string
		change  func(*corev1.Node)
		allowed bool
		message string // of the refusal
	}
	cordonLB := write{"cordon with the exclude label (--exclude-from-load-balancers)", cordonAsLifeboat(corev1.TaintEffectNoSchedule, true), true, ""}
	tests := []struct {
		name   string
		values map[string]any
		writes []write
	}{
		{"defaults", nil, []write{
			{"cordon and taint NoSchedule", cordonAsLifeboat(corev1.TaintEffectNoSchedule, false), true, ""},
			{"uncordon", uncordonAsLifeboat, true, ""},
			{"the exclude label, not configured", func(n *corev1.Node) { n.Labels[excludeLBLabel] = "lifeboat" }, false, "labels"},
			{"a lifeboat.io/ taint NoExecute", cordonAsLifeboat(corev1.TaintEffectNoExecute, false), false, "NoSchedule"},
			{"a finalizer", func(n *corev1.Node) { n.Finalizers = append(n.Finalizers, "example.com/hold") }, false, "finalizers"},
			{"an ownerReference", func(n *corev1.Node) {
				n.OwnerReferences = append(n.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "gone", UID: types.UID("0b2c6d8e-0000-4000-8000-000000000000")})
			}, false, "ownerReferences"},
		}},
		{"excludeFromLoadBalancers", map[string]any{"excludeFromLoadBalancers": true}, []write{
			cordonLB,
			{"uncordon, removing the label", uncordonAsLifeboat, true, ""},
			{"another label", func(n *corev1.Node) { n.Labels["example.com/pool"] = "x" }, false, "labels"},
		}},
		{"taintEffect NoExecute", map[string]any{"taintEffect": "NoExecute"}, []write{
			{"cordon and taint NoExecute", cordonAsLifeboat(corev1.TaintEffectNoExecute, false), true, ""},
			{"uncordon", uncordonAsLifeboat, true, ""},
			{"a lifeboat.io/ taint NoSchedule", cordonAsLifeboat(corev1.TaintEffectNoSchedule, false), false, "NoExecute"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newScoped(ctx, t, tc.values, "")
			policy := "'" + s.release + "-lifeboat-own-node'"
			for _, w := range tc.writes {
				err := updateNodeAs(ctx, s.lb, s.node, false, w.change)
				switch {
				case w.allowed && err != nil:
					t.Errorf("%s: %v; want allowed", w.name, err)
				case !w.allowed && err == nil:
					t.Errorf("%s: allowed; want refused by %s", w.name, policy)
					if err := updateNodeAs(ctx, kube.Client, s.node, false, func(n *corev1.Node) {
						n.Finalizers, n.OwnerReferences = nil, nil
						uncordonAsLifeboat(n)
					}); err != nil {
						t.Fatal(err)
					}
				case !w.allowed && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), policy) || !strings.Contains(err.Error(), w.message)):
					t.Errorf("%s: %v; want 403 from %s saying %q", w.name, err, policy, w.message)
				case err != nil:
					t.Logf("%s: refused: %v", w.name, err)
				}
			}
		})
	}
}
