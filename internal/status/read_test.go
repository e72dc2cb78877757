package status

import (
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/kube/clientset"
)

// Read picks nodes as kubectl get nodes does: by name (a missing one is
// reported, the others read), or by a label selector sent to the API
// server; of those, the ones lifeboat handles are shown, with their pods.
func TestRead(t *testing.T) {
	spot := events(t, event.Event{ID: "s", Kind: event.SpotInterruption, Deadline: now.Add(time.Minute)})
	taint := corev1.Taint{Key: "lifeboat.io/spot-interruption", Value: "spot-interruption", Effect: corev1.TaintEffectNoSchedule}
	labelled := func(n corev1.Node, pool string) *corev1.Node {
		n.Labels = map[string]string{"pool": pool}
		return &n
	}
	objects := []runtime.Object{
		labelled(node("spot-a", map[string]string{drain.AnnotationEvents: spot}, taint), "spot"),
		labelled(node("spot-idle", nil), "spot"),
		labelled(node("od-b", map[string]string{drain.AnnotationEvents: spot}, taint), "on-demand"),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: corev1.PodSpec{NodeName: "spot-a"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
	}
	tests := []struct {
		name        string
		sel         Selection
		wantNodes   []string
		wantMissing []string
		// wantLabelSelector is the selector the node list must send ("-": no list).
		wantLabelSelector string
	}{
		{name: "every node", wantNodes: []string{"od-b", "spot-a"}, wantLabelSelector: ""},
		{name: "by label selector", sel: Selection{Selector: labels.SelectorFromSet(labels.Set{"pool": "spot"})}, wantNodes: []string{"spot-a"}, wantLabelSelector: "pool=spot"},
		{name: "by name, one missing, one twice", sel: Selection{Names: []string{"spot-a", "gone", "spot-idle", "spot-a"}},
			wantNodes: []string{"spot-a"}, wantMissing: []string{"gone"}, wantLabelSelector: "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset(objects...)
			got, missing, err := Read(t.Context(), clientset.New(cs), tt.sel, now)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, n := range got {
				names = append(names, n.Name)
			}
			slices.Sort(names)
			if !slices.Equal(names, tt.wantNodes) || !slices.Equal(missing, tt.wantMissing) {
				t.Errorf("Read: nodes %v, missing %v; want %v, %v", names, missing, tt.wantNodes, tt.wantMissing)
			}
			for _, n := range got {
				if n.Name == "spot-a" && (len(n.Pods) != 1 || n.Pods[0].Name != "web") {
					t.Errorf("spot-a's pods: %+v", n.Pods)
				}
			}
			lists := []string{}
			for _, a := range cs.Actions() {
				if l, ok := a.(k8stesting.ListAction); ok && a.GetResource().Resource == "nodes" {
					lists = append(lists, l.GetListRestrictions().Labels.String())
				}
			}
			switch {
			case tt.wantLabelSelector == "-" && len(lists) != 0:
				t.Errorf("nodes were listed (%q), want them read by name", lists)
			case tt.wantLabelSelector != "-" && !slices.Equal(lists, []string{tt.wantLabelSelector}):
				t.Errorf("node lists sent label selectors %q, want [%q] (the API server selects)", lists, tt.wantLabelSelector)
			}
		})
	}
}

// The API server unreachable (any error but a named node's NotFound) is an
// error, not an empty list.
func TestReadFails(t *testing.T) {
	for _, sel := range []Selection{{}, {Names: []string{"a"}}} {
		cs := fake.NewClientset()
		cs.PrependReactor("*", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("connection refused")
		})
		if nodes, _, err := Read(t.Context(), clientset.New(cs), sel, now); err == nil {
			t.Errorf("Read(%+v) with the API server failing = %v, nil; want an error", sel, nodes)
		}
	}
}
