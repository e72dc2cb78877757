package protect

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func node(name, id string, annotations map[string]string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
	if id != "" {
		n.Spec.ProviderID = "aws:///us-east-1a/" + id
	}
	return n
}

func pod(name, nodeName string, annotations map[string]string, phase corev1.PodPhase) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: annotations},
		Spec: corev1.PodSpec{NodeName: nodeName}, Status: corev1.PodStatus{Phase: phase}}
}

var (
	ours      = map[string]string{AnnotationDoNotDisrupt: "true"}
	karpenter = map[string]string{AnnotationKarpenter: "true"}
	marked    = map[string]string{AnnotationProtected: "workers"}
)

func TestPlan(t *testing.T) {
	tests := []struct {
		name  string
		nodes []*corev1.Node
		pods  []corev1.Pod
		want  []Change
	}{
		{"nothing to do", []*corev1.Node{node("a", "i-1", nil)}, []corev1.Pod{pod("p", "a", nil, corev1.PodRunning)}, nil},
		{"our annotation protects", []*corev1.Node{node("a", "i-1", nil)}, []corev1.Pod{pod("p", "a", ours, corev1.PodRunning)},
			[]Change{{Node: "a", InstanceID: "i-1", Protect: true, Pods: []string{"ns/p"}}}},
		{"karpenter's too, pods sorted", []*corev1.Node{node("a", "i-1", nil)},
			[]corev1.Pod{pod("q", "a", karpenter, corev1.PodPending), pod("p", "a", ours, corev1.PodRunning)},
			[]Change{{Node: "a", InstanceID: "i-1", Protect: true, Pods: []string{"ns/p", "ns/q"}}}},
		{"false is not true", []*corev1.Node{node("a", "i-1", nil)}, []corev1.Pod{pod("p", "a", map[string]string{AnnotationDoNotDisrupt: "false"}, corev1.PodRunning)}, nil},
		{"already protected by lifeboat", []*corev1.Node{node("a", "i-1", marked)}, []corev1.Pod{pod("p", "a", ours, corev1.PodRunning)}, nil},
		{"pods gone: lift", []*corev1.Node{node("a", "i-1", marked)}, nil, []Change{{Node: "a", InstanceID: "i-1", Group: "workers"}}},
		{"pod finished: lift", []*corev1.Node{node("a", "i-1", marked)}, []corev1.Pod{pod("p", "a", ours, corev1.PodSucceeded)},
			[]Change{{Node: "a", InstanceID: "i-1", Group: "workers"}}},
		{"not an EC2 node", []*corev1.Node{node("a", "", nil)}, []corev1.Pod{pod("p", "a", ours, corev1.PodRunning)}, nil},
		{"pod on another node", []*corev1.Node{node("b", "i-2", nil), node("a", "i-1", marked)}, []corev1.Pod{pod("p", "b", ours, corev1.PodRunning)},
			[]Change{{Node: "a", InstanceID: "i-1", Group: "workers"}, {Node: "b", InstanceID: "i-2", Protect: true, Pods: []string{"ns/p"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Plan(tt.nodes, tt.pods); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Plan = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// fakeWorld is the node cache, the node annotations and the group.
type fakeWorld struct {
	mu        sync.Mutex
	nodes     map[string]*corev1.Node
	group     map[string]string // instance → group
	protected map[string]bool
	calls     []string
	failSet   bool
}

func (f *fakeWorld) WaitSynced(context.Context) error { return nil }
func (f *fakeWorld) List() []*corev1.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*corev1.Node
	for _, n := range f.nodes {
		out = append(out, n.DeepCopy())
	}
	return out
}
func (f *fakeWorld) SetAnnotations(_ context.Context, node string, a map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nodes[node]
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	for k, v := range a {
		if v == "" {
			delete(n.Annotations, k)
		} else {
			n.Annotations[k] = v
		}
	}
	return nil
}
func (f *fakeWorld) GroupOf(_ context.Context, id string) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.group[id], f.protected[id], nil
}
func (f *fakeWorld) SetProtection(_ context.Context, group, id string, on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, map[bool]string{true: "protect ", false: "lift "}[on]+id)
	if f.failSet {
		return errors.New("throttled")
	}
	if f.group[id] != group {
		return errors.New("not in group")
	}
	f.protected[id] = on
	return nil
}

func TestProtectorLifecycle(t *testing.T) {
	ctx := context.Background()
	w := &fakeWorld{nodes: map[string]*corev1.Node{"a": node("a", "i-1", nil), "b": node("b", "i-2", nil), "c": node("c", "i-3", nil)},
		group: map[string]string{"i-1": "workers", "i-2": "workers"}, protected: map[string]bool{}}
	p1, p2 := pod("p1", "a", ours, corev1.PodRunning), pod("p3", "c", ours, corev1.PodRunning)
	kube := fake.NewClientset(&p1, &p2)
	newProtector := func() *Protector {
		return &Protector{Pods: kube, Nodes: w, ASG: w, Annotate: w, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	}
	p := newProtector()
	if err := p.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if !w.protected["i-1"] || w.protected["i-2"] || w.nodes["a"].Annotations[AnnotationProtected] != "workers" {
		t.Fatalf("after the first pass: protected %v, node a annotations %v", w.protected, w.nodes["a"].Annotations)
	}
	if _, ok := w.nodes["c"].Annotations[AnnotationProtected]; ok {
		t.Error("node c is in no group, yet recorded as protected")
	}
	// Passes are idempotent.
	if err := p.Pass(ctx); err != nil || len(w.calls) != 1 {
		t.Fatalf("second pass: %v, calls %v", err, w.calls)
	}
	// The pod ends while lifeboat is down: the next lifeboat lifts it.
	if err := kube.CoreV1().Pods("ns").Delete(ctx, "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := newProtector().Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if w.protected["i-1"] || w.nodes["a"].Annotations[AnnotationProtected] != "" {
		t.Fatalf("after the pod ended: protected %v, annotations %v", w.protected, w.nodes["a"].Annotations)
	}
	if want := []string{"protect i-1", "lift i-1"}; !reflect.DeepEqual(w.calls, want) {
		t.Errorf("calls = %v, want %v", w.calls, want)
	}
}

func TestProtectorLeavesOthersProtectionAlone(t *testing.T) {
	ctx := context.Background()
	w := &fakeWorld{nodes: map[string]*corev1.Node{"a": node("a", "i-1", nil)}, group: map[string]string{"i-1": "workers"}, protected: map[string]bool{"i-1": true}}
	p1 := pod("p1", "a", ours, corev1.PodRunning)
	kube := fake.NewClientset(&p1)
	p := &Protector{Pods: kube, Nodes: w, ASG: w, Annotate: w, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := p.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if err := kube.CoreV1().Pods("ns").Delete(ctx, "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := p.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if !w.protected["i-1"] || len(w.calls) != 0 {
		t.Errorf("protection set by someone else was touched: protected %v, calls %v", w.protected, w.calls)
	}
}

func TestProtectorFailedSetKeepsRecord(t *testing.T) {
	ctx := context.Background()
	w := &fakeWorld{nodes: map[string]*corev1.Node{"a": node("a", "i-1", nil)}, group: map[string]string{"i-1": "workers"}, protected: map[string]bool{}, failSet: true}
	p1 := pod("p1", "a", ours, corev1.PodRunning)
	kube := fake.NewClientset(&p1)
	p := &Protector{Pods: kube, Nodes: w, ASG: w, Annotate: w, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := p.Pass(ctx); err == nil {
		t.Fatal("a failed SetInstanceProtection was not reported")
	}
	// The call may have taken effect: the record stays, so that the
	// protection is lifted once the pod is gone.
	if w.nodes["a"].Annotations[AnnotationProtected] != "workers" {
		t.Fatalf("record dropped after a failed call: %v", w.nodes["a"].Annotations)
	}
	w.failSet = false
	w.protected["i-1"] = true // the failed call had taken effect
	if err := kube.CoreV1().Pods("ns").Delete(ctx, "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := p.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if w.protected["i-1"] || w.nodes["a"].Annotations[AnnotationProtected] != "" {
		t.Errorf("protection left behind: %v %v", w.protected, w.nodes["a"].Annotations)
	}
}

func TestProtectorDryRunChangesNothing(t *testing.T) {
	ctx := context.Background()
	w := &fakeWorld{nodes: map[string]*corev1.Node{"a": node("a", "i-1", nil)}, group: map[string]string{"i-1": "workers"}, protected: map[string]bool{}}
	p1 := pod("p1", "a", ours, corev1.PodRunning)
	p := &Protector{Pods: fake.NewClientset(&p1), Nodes: w, ASG: w, Annotate: w, DryRun: true, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for range 2 {
		if err := p.Pass(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(w.calls) != 0 || len(w.nodes["a"].Annotations) != 0 {
		t.Errorf("dry run changed something: calls %v, annotations %v", w.calls, w.nodes["a"].Annotations)
	}
}
