package check

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"lifeboat.dev/lifeboat/internal/config"
)

func kubeletNode(name, group, version string, ready bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if group != "" {
		n.Labels["eks.amazonaws.com/nodegroup"] = group
	}
	n.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: version, OSImage: "Amazon Linux 2023.9.20251117"}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
	return n
}

const (
	eksConfigz = `{"kubeletconfig":{"shutdownGracePeriod":"2m30s","shutdownGracePeriodCriticalPods":"30s"}}`
	offConfigz = `{"kubeletconfig":{"shutdownGracePeriod":"0s","shutdownGracePeriodCriticalPods":"0s"}}`
)

// TestKubeletShutdownCheck: check reads sampled nodes' /configz and says
// whether graceful node shutdown is configured (never that it is active);
// without nodes/proxy get it says so instead of failing.
func TestKubeletShutdownCheck(t *testing.T) {
	many := []runtime.Object{}
	for i := range 30 {
		many = append(many, kubeletNode(fmt.Sprintf("ng-%02d-b", i), fmt.Sprintf("ng-%02d", i), "v1.34.2-eks-1", true),
			kubeletNode(fmt.Sprintf("ng-%02d-a", i), fmt.Sprintf("ng-%02d", i), "v1.34.2-eks-1", i != 0))
	}
	tests := []struct {
		name      string
		objs      []runtime.Object
		plan      bool
		denied    bool // the access review says no
		configz   map[string]string
		forbidden bool // the proxy answers 403
		want      Status
		wantIn    []string
		wantNot   []string
		wantReads []string // nil: not checked
	}{
		{name: "no nodes: no row"},
		{name: "EKS 1.34 configured", objs: []runtime.Object{kubeletNode("a", "spot", "v1.34.2", true)}, configz: map[string]string{"a": eksConfigz},
			want: OK, wantIn: []string{"configured on 1 of 1 kubelets read", "a (eks.amazonaws.com/nodegroup=spot, kubelet v1.34.2, Amazon Linux 2023.9.20251117): shutdownGracePeriod 2m30s, shutdownGracePeriodCriticalPods 30s: other pods get 2m0s", "configured, not confirmed active", "InhibitDelayMaxSec"},
			wantReads: []string{"a"}},
		{name: "not configured", objs: []runtime.Object{kubeletNode("a", "spot", "v1.32.9", true)}, configz: map[string]string{"a": offConfigz},
			want: OK, wantIn: []string{"configured on 0 of 1 kubelets read", "not configured (shutdownGracePeriod 0)"}, wantNot: []string{"configured, not confirmed active"}},
		{name: "not configured with the option on warns", plan: true, objs: []runtime.Object{kubeletNode("a", "spot", "v1.32.9", true)}, configz: map[string]string{"a": offConfigz},
			want: Warn, wantIn: []string{"configured on 0 of 1 kubelets read"}},
		{name: "one per group, a Ready one", objs: []runtime.Object{kubeletNode("b1", "b", "v1.34.2", true), kubeletNode("b0", "b", "v1.34.2", false),
			kubeletNode("a1", "a", "v1.33.5", true), kubeletNode("a0", "a", "v1.34.2", true)},
			configz: map[string]string{"a0": eksConfigz, "a1": offConfigz, "b1": eksConfigz},
			want:    OK, wantIn: []string{"configured on 2 of 3 kubelets read (sample: 3 of 4 nodes, one per node group"}, wantReads: []string{"a0", "a1", "b1"}},
		{name: "bounded at 60 nodes", objs: many, configz: map[string]string{},
			want: Warn, wantIn: []string{"no kubelet could be read (sample: 10 of 60 nodes", "(the first 10 of 30 such groups)"},
			wantReads: []string{"ng-00-b", "ng-01-a", "ng-02-a", "ng-03-a", "ng-04-a", "ng-05-a", "ng-06-a", "ng-07-a", "ng-08-a", "ng-09-a"}},
		{name: "unreachable kubelet warns", objs: []runtime.Object{kubeletNode("a", "", "v1.34.2", true)}, configz: map[string]string{},
			want: Warn, wantIn: []string{"could not read 1: a: dial tcp"}},
		{name: "denied by the review: not permitted, ok when the option is off", objs: []runtime.Object{kubeletNode("a", "", "v1.34.2", true)}, denied: true,
			want: OK, wantIn: []string{"not checked: not permitted", "not permitted: grant nodes/proxy get to check this"}, wantReads: []string{}},
		{name: "denied with the option on warns", plan: true, objs: []runtime.Object{kubeletNode("a", "", "v1.34.2", true)}, denied: true,
			want: Warn, wantIn: []string{"not permitted: grant nodes/proxy get to check this"}},
		{name: "the proxy answers 403", objs: []runtime.Object{kubeletNode("a", "", "v1.34.2", true)}, forbidden: true,
			want: OK, wantIn: []string{"not permitted: grant nodes/proxy get to check this"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kube := fake.NewClientset(tt.objs...)
			kube.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
				sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
				sar.Status.Allowed = !tt.denied
				return true, sar, nil
			})
			var reads []string
			fetch := func(_ context.Context, node string) ([]byte, error) {
				reads = append(reads, node)
				if tt.forbidden {
					return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes/proxy"}, node, errors.New("no"))
				}
				if b, ok := tt.configz[node]; ok {
					return []byte(b), nil
				}
				return nil, errors.New("dial tcp 10.0.0.1:10250: connect: connection refused")
			}
			r := &run{cfg: config.Config{PlanWithKubeletShutdown: tt.plan}, c: Clients{Kube: kube, Configz: fetch}}
			r.kubeletShutdown(context.Background())
			if tt.want == "" {
				if len(r.results) != 0 {
					t.Fatalf("rows %+v, want none", r.results)
				}
				return
			}
			if len(r.results) != 1 || r.results[0].Name != kubeletRow {
				t.Fatalf("rows %+v, want one %q", r.results, kubeletRow)
			}
			res := r.results[0]
			t.Logf("%s: %s", res.Status, res.Found)
			if res.Status != tt.want {
				t.Errorf("status %s, want %s", res.Status, tt.want)
			}
			if res.Status != OK && res.Fix == "" {
				t.Errorf("no fix: %+v", res)
			}
			for _, s := range tt.wantIn {
				if !strings.Contains(res.Found, s) {
					t.Errorf("found does not contain %q", s)
				}
			}
			for _, s := range tt.wantNot {
				if strings.Contains(res.Found, s) {
					t.Errorf("found contains %q", s)
				}
			}
			if tt.wantReads != nil {
				slices.Sort(reads)
				if !slices.Equal(reads, tt.wantReads) && !(len(reads) == 0 && len(tt.wantReads) == 0) {
					t.Errorf("read %v, want %v", reads, tt.wantReads)
				}
			}
		})
	}
}

// nodes/proxy get is reviewed as lifeboat's own permission only with
// --plan-with-kubelet-shutdown.
func TestAccessesNodesProxy(t *testing.T) {
	proxies := func(extra ...string) bool {
		return slices.ContainsFunc(accesses(queueConfig(t, extra...)), func(a access) bool { return a.resource == "nodes" && a.subresource == "proxy" })
	}
	if proxies() {
		t.Error("nodes/proxy get checked by default")
	}
	if !proxies("--plan-with-kubelet-shutdown") {
		t.Error("nodes/proxy get not checked with --plan-with-kubelet-shutdown")
	}
}
