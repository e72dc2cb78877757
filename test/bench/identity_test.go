package bench

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"lifeboat.dev/lifeboat/test/testenv"
)

// benchNamespace and benchServiceAccount are where and who the chart
// installs lifeboat as (docs/install.md: helm install … --namespace
// kube-system).
const (
	benchNamespace      = "kube-system"
	benchServiceAccount = "lifeboat"
)

// identity is who lifeboat and the floor's bare client are to the API
// server: a client configuration and a kubeconfig file for it.
type identity struct {
	config     *rest.Config
	kubeconfig string
}

// benchIdentity returns the identity of this run's lifeboat and floor. By
// default, what the chart installs: the ServiceAccount lifeboat in
// kube-system, whose requests API Priority and Fairness puts in the
// workload-high priority level (flow schema kube-system-service-accounts),
// as on any cluster, and the chart's FlowSchemas for it (its node writes
// a flow of their own; docs/operations.md#api-priority-and-fairness).
// LIFEBOAT_BENCH_FLOWSCHEMAS=0 leaves the FlowSchemas out (the chart's
// flowSchemas.create=false, and every run before 2026-11-27 07:30 UTC). It is
// bound to cluster-admin: what it may do does not change what APF lets
// through. LIFEBOAT_BENCH_IDENTITY=admin runs both as the testbed's admin
// (system:masters, which APF exempts), as every figure in
// docs/benchmarks.md measured before 2026-11-27 did. Each call requests a
// new token (they last an hour).
func benchIdentity(ctx context.Context, b *testing.B, env *testenv.Env) identity {
	b.Helper()
	switch v := os.Getenv("LIFEBOAT_BENCH_IDENTITY"); v {
	case "admin":
		return identity{config: env.Config, kubeconfig: env.Kubeconfig}
	case "", "serviceaccount":
	default:
		b.Fatalf("LIFEBOAT_BENCH_IDENTITY=%q: want serviceaccount (the default) or admin", v)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: benchServiceAccount}}
	if _, err := env.Client.CoreV1().ServiceAccounts(benchNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-lifeboat"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: benchNamespace, Name: benchServiceAccount}},
	}
	if _, err := env.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	if os.Getenv("LIFEBOAT_BENCH_FLOWSCHEMAS") != "0" {
		createFlowSchemas(ctx, b, env)
	}
	cfg, err := env.RESTConfigFor(ctx, benchNamespace, benchServiceAccount)
	if err != nil {
		b.Fatal(err)
	}
	kc, err := env.KubeconfigFor(ctx, benchNamespace, benchServiceAccount)
	if err != nil {
		b.Fatal(err)
	}
	return identity{config: cfg, kubeconfig: kc}
}

// readAPICounters reads the API server's counters a run compares before
// and after it (testenv.APICounters), failing the benchmark if it cannot.
func readAPICounters(ctx context.Context, b *testing.B, env *testenv.Env) testenv.APICounters {
	b.Helper()
	c, err := env.APICounters(ctx)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// createFlowSchemas creates the FlowSchemas (and the priority level) the
// chart renders for release lifeboat in kube-system, whose ServiceAccount
// is benchServiceAccount, and waits until API Priority and Fairness uses
// them (not dangling). A FlowSchema may come before its priority level:
// it is dangling until the level exists.
func createFlowSchemas(ctx context.Context, b *testing.B, env *testenv.Env) {
	b.Helper()
	r, err := testenv.RenderChart("lifeboat", benchNamespace, map[string]any{"image": map[string]any{"repository": "bench"}, "queueURL": "https://sqs.us-east-1.amazonaws.com/123456789012/bench"})
	if err != nil {
		b.Fatal(err)
	}
	var names []string
	for _, o := range r.Objects {
		var err error
		switch o.GetKind() {
		case "PriorityLevelConfiguration":
			var pl flowcontrolv1.PriorityLevelConfiguration
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &pl); err == nil {
				_, err = env.Client.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, &pl, metav1.CreateOptions{})
			}
		case "FlowSchema":
			var fs flowcontrolv1.FlowSchema
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &fs); err != nil {
				break
			}
			if sa := fs.Spec.Rules[0].Subjects[0].ServiceAccount.Name; sa != benchServiceAccount {
				b.Fatalf("the chart's FlowSchema %s is for ServiceAccount %s, not %s", fs.Name, sa, benchServiceAccount)
			}
			_, err = env.Client.FlowcontrolV1().FlowSchemas().Create(ctx, &fs, metav1.CreateOptions{})
			names = append(names, fs.Name)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			b.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	if len(names) == 0 {
		b.Fatal("the chart renders no FlowSchema")
	}
	if err := testenv.WaitFlowSchemasInUse(ctx, env.Client, names, 30*time.Second); err != nil {
		b.Fatal(err)
	}
}
