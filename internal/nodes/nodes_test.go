package nodes

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestInstanceID(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"eks", "aws:///us-east-1a/i-0123456789abcdef0", "i-0123456789abcdef0"},
		{"short id", "aws:///eu-west-1b/i-1234abcd", "i-1234abcd"},
		{"not aws", "gce://project/zone/i-0123456789abcdef0", ""},
		{"empty", "", ""},
		{"kwok default", "kwok://node-1", ""},
		{"garbage id", "aws:///us-east-1a/i-XYZ", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := InstanceID(tt.in); got != tt.want {
				t.Errorf("InstanceID(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestStripKeepsWhatLifeboatReads(t *testing.T) {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{"lifeboat.io/cordoned": "true"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0123456789abcdef0", Unschedulable: true},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Images:     []corev1.ContainerImage{{Names: []string{"big"}}},
			NodeInfo:   corev1.NodeSystemInfo{BootID: "boot-1", KernelVersion: "6.1"},
		},
	}
	obj, err := strip(n.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	want := n.DeepCopy()
	want.ManagedFields = nil
	want.Status.Images = nil
	want.Status.NodeInfo = corev1.NodeSystemInfo{BootID: "boot-1"}
	if d := cmp.Diff(want, obj); d != "" {
		t.Errorf("strip (-want +got):\n%s", d)
	}
}
