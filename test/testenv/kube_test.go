package testenv

import (
	"context"
	"maps"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestParseCounter(t *testing.T) {
	raw := []byte(`# HELP apiserver_request_total [STABLE] Counter
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",resource="pods",subresource="",verb="LIST"} 3
apiserver_request_total{code="201",component="apiserver",resource="pods",subresource="eviction",verb="POST"} 2
apiserver_request_total{code="429",component="apiserver",resource="pods",subresource="eviction",verb="POST"} 1
apiserver_request_total_other{verb="LIST"} 100
apiserver_request_duration_seconds_bucket{verb="LIST",le="0.1"} 7
`)
	got, err := parseCounter(raw, "apiserver_request_total")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[1].labels["subresource"] != "eviction" || got[2].value != 1 {
		t.Errorf("parseCounter = %+v", got)
	}
}

// TestEnvMinimal starts only etcd and kube-apiserver and checks the parts
// of Env that need nothing else: RBAC with ServiceAccount tokens, the
// kubeconfig file, request metrics, and that Close leaves no process.
func TestEnvMinimal(t *testing.T) {
	env := Start(t, Options{NoControllerManager: true, NoScheduler: true, NoKwok: true})
	ctx := t.Context()
	if len(env.Processes()) != 2 {
		t.Fatalf("processes = %d, want etcd and kube-apiserver", len(env.Processes()))
	}

	// The kubeconfig file works for a separate client.
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err != nil {
		t.Fatalf("kubeconfig client: %v", err)
	}

	// A ServiceAccount token is subject to RBAC.
	ns := "rbac-check"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	saCfg, err := env.RESTConfigFor(ctx, ns, "reader")
	if err != nil {
		t.Fatal(err)
	}
	sa := kubernetes.NewForConfigOrDie(saCfg)
	if _, err := sa.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing nodes without a role: err = %v, want Forbidden", err)
	}
	if _, err := env.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "node-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "node-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "node-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "reader", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := sa.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listing nodes with a role: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	before, err := env.APIRequestCountsByResource(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := env.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	after, err := env.APIRequestCountsByResource(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := after["LIST configmaps"] - before["LIST configmaps"]; d != 5 {
		t.Errorf("LIST configmaps grew by %v, want 5", d)
	}
	byVerb, err := env.APIRequestCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if byVerb["LIST"] < 5 || byVerb["POST"] < 1 {
		t.Errorf("counts by verb = %v", byVerb)
	}

	env.Close()
	for _, p := range env.Processes() {
		if exited, _ := p.Exited(); !exited {
			t.Errorf("%s still running after Close", p.Name)
		}
	}
	if out, err := exec.CommandContext(context.Background(), "pgrep", "-f", env.Dir).CombinedOutput(); err == nil {
		t.Errorf("processes still running from %s:\n%s", env.Dir, strings.TrimSpace(string(out)))
	}
}

func TestStorageCounters(t *testing.T) {
	raw := []byte(`etcd_requests_total{group="",operation="list",resource="pods"} 4
etcd_requests_total{group="",operation="get",resource="pods"} 9
etcd_requests_total{group="",operation="listWithCount",resource="events"} 2
apiserver_watch_cache_consistent_read_total{fallback="true",group="",resource="pods",success="false"} 3
apiserver_watch_cache_consistent_read_total{fallback="false",group="",resource="pods",success="true"} 70
apiserver_terminated_watchers_total{group="",resource="pods"} 21
`)
	got, err := sumCounters(raw, storageCounters)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"etcd list pods": 4, "cache fallback pods": 3, "terminated watches pods": 21}
	if !maps.Equal(got, want) {
		t.Errorf("storage counters = %v, want %v", got, want)
	}
}

func TestAPFCounters(t *testing.T) {
	raw := []byte(`apiserver_flowcontrol_dispatched_requests_total{flow_schema="kube-system-service-accounts",priority_level="workload-high"} 10
apiserver_flowcontrol_dispatched_requests_total{flow_schema="exempt",priority_level="exempt"} 7
apiserver_flowcontrol_rejected_requests_total{flow_schema="kube-system-service-accounts",priority_level="workload-high",reason="queue-full"} 2
apiserver_flowcontrol_rejected_requests_total{flow_schema="kube-system-service-accounts",priority_level="workload-high",reason="time-out"} 1
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="kube-system-service-accounts",priority_level="workload-high"} 1.5
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="kube-system-service-accounts",priority_level="workload-high"} 10
`)
	got, err := sumCounters(raw, apfCounters)
	if err != nil {
		t.Fatal(err)
	}
	const flow = "workload-high/kube-system-service-accounts"
	want := map[string]float64{"dispatched " + flow: 10, "dispatched exempt/exempt": 7, "rejected " + flow: 3, "wait-seconds " + flow: 1.5}
	if !maps.Equal(got, want) {
		t.Errorf("APF counters = %v, want %v", got, want)
	}
}
