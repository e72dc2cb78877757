package check

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"lifeboat.dev/lifeboat/internal/config"
)

func reviewPod(name, node string, grace int64, labels map[string]string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{{Name: "c"}}}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func reviewPDB(name, app string, allowed int32) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
		Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed}}
}

func TestClusterReview(t *testing.T) {
	daemon := func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", Controller: aws.Bool(true)}}
	}
	terminateHook := []group{{name: "nodes-a", hooks: []astypes.LifecycleHook{{LifecycleHookName: aws.String("term"),
		LifecycleTransition: aws.String("autoscaling:EC2_INSTANCE_TERMINATING"), HeartbeatTimeout: aws.Int32(300)}}}}
	tests := []struct {
		name       string
		objs       []runtime.Object
		noHeartbts bool
		groups     []group
		want       map[string]Status // row name -> status
		wantIn     map[string]string // row name -> text in found
		wantNot    []string          // names no row may mention
	}{
		{name: "clean cluster", objs: []runtime.Object{reviewPod("web", "n1", 30, map[string]string{"app": "web"}), reviewPDB("web", "web", 1)},
			want: map[string]Status{"cluster review": OK}},
		{name: "budget allowing nothing fails; unscheduled and daemon pods are not reviewed",
			objs: []runtime.Object{reviewPod("db-0", "n1", 30, map[string]string{"app": "db"}), reviewPod("db-1", "", 30, map[string]string{"app": "db"}),
				reviewPod("web", "n1", 30, map[string]string{"app": "web"}), reviewPDB("db", "db", 0), reviewPDB("web", "web", 1),
				reviewPod("agent", "n1", 900, nil, daemon)},
			want: map[string]Status{"pdb shop/db": Fail}, wantIn: map[string]string{"pdb shop/db": "covers 1 pods on 1 nodes (shop/db-0)"},
			wantNot: []string{"db-1", "agent", "shop/web"}},
		{name: "budget allowing nothing covering no pod on a node is not reported",
			objs: []runtime.Object{reviewPod("db-1", "", 30, map[string]string{"app": "db"}), reviewPDB("db", "db", 0)},
			want: map[string]Status{"cluster review": OK}},
		{name: "grace over the Spot notice warns",
			objs: []runtime.Object{reviewPod("batch", "n1", 600, nil), reviewPod("web", "n1", 120, nil)},
			want: map[string]Status{"pods grace > 2m0s": Warn}, wantIn: map[string]string{"pods grace > 2m0s": "shop/batch (10m0s)"}, wantNot: []string{"shop/web"}},
		{name: "grace over the hook timeout without heartbeats warns", noHeartbts: true, groups: terminateHook,
			objs:   []runtime.Object{reviewPod("batch", "n1", 600, nil), reviewPod("job", "n1", 200, nil)},
			want:   map[string]Status{"pods grace > 2m0s": Warn, "pods grace > 5m0s": Warn},
			wantIn: map[string]string{"pods grace > 5m0s": "1 pods have a terminationGracePeriodSeconds longer than the heartbeat timeout of hook nodes-a/term"}},
		{name: "with heartbeats the hook timeout is no limit", groups: terminateHook,
			objs: []runtime.Object{reviewPod("batch", "n1", 600, nil)},
			want: map[string]Status{"pods grace > 2m0s": Warn}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &run{cfg: config.Config{CompleteLifecycle: !tt.noHeartbts}, c: Clients{Kube: fake.NewClientset(tt.objs...)}, groups: tt.groups}
			r.clusterReview(context.Background())
			got := map[string]Status{}
			for _, res := range r.results {
				got[res.Name] = res.Status
				if res.Status != OK && (res.Fix == "" || len(res.Items) == 0) {
					t.Errorf("%s: no fix or items: %+v", res.Name, res)
				}
				if s, ok := tt.wantIn[res.Name]; ok && !strings.Contains(res.Found, s) {
					t.Errorf("%s: %q does not contain %q", res.Name, res.Found, s)
				}
				for _, n := range tt.wantNot {
					if strings.Contains(res.Found, n) {
						t.Errorf("%s names %s: %s", res.Name, n, res.Found)
					}
				}
			}
			if len(got) != len(tt.want) {
				t.Errorf("rows %v, want %v", got, tt.want)
			}
			for n, s := range tt.want {
				if got[n] != s {
					t.Errorf("row %q = %q, want %q (rows %v)", n, got[n], s, got)
				}
			}
		})
	}
}
