package nodes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/kube/clientset"
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

// Nodes outside the label selector are not in the index (issue 17: a
// node Karpenter manages, or another lifeboat's, is as absent as another
// cluster's).
func TestLabelSelectorScopesTheIndex(t *testing.T) {
	mk := func(name, id string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + id}}
	}
	client := fake.NewClientset(
		mk("ours", "i-0000000000000000a", map[string]string{"cluster": "a"}),
		mk("karpenter", "i-0000000000000000b", map[string]string{"cluster": "a", "karpenter.sh/nodepool": "default"}),
		mk("theirs", "i-0000000000000000c", map[string]string{"cluster": "b"}),
	)
	x := New(clientset.New(client), Options{LabelSelector: "cluster=a,!karpenter.sh/nodepool"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go x.Run(ctx)
	if err := x.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if n, ok := x.ByInstance("i-0000000000000000a"); !ok || n.Name != "ours" {
		t.Errorf("ByInstance(ours) = %v, %v", n, ok)
	}
	for _, id := range []string{"i-0000000000000000b", "i-0000000000000000c"} {
		if n, ok := x.ByInstance(id); ok {
			t.Errorf("ByInstance(%s) = %s; want it out of scope", id, n.Name)
		}
	}
	if l := x.List(); len(l) != 1 {
		t.Errorf("List() has %d nodes, want 1", len(l))
	}
}

// OnListWatch hears the outcome of every list and watch request, so that
// readiness can follow the watch without asking the API server (issue 22).
func TestOnListWatchReportsEachRequest(t *testing.T) {
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	var failing atomic.Bool
	failing.Store(true)
	client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing.Load() {
			return true, nil, errors.New("etcd is gone")
		}
		return false, nil, nil
	})
	heard := make(chan error, 100)
	x := New(clientset.New(client), Options{OnListWatch: func(err error) { heard <- err }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go x.Run(ctx)
	if err := <-heard; err == nil || !strings.Contains(err.Error(), "etcd is gone") {
		t.Fatalf("first report %v, want the list's error", err)
	}
	failing.Store(false)
	// The reflector lists again after its backoff (about a second), then
	// watches: both answered.
	for ok := 0; ok < 2; {
		select {
		case err := <-heard:
			if err == nil {
				ok++
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("heard %d answered requests after the list recovered, want 2 (list and watch)", ok)
		}
	}
	if err := x.WaitSynced(ctx); err != nil {
		t.Error(err)
	}
}

// pagedNodes serves nodes two to a page, and records on each later page's
// request whether the pages it already sent still carry their images.
type pagedNodes struct {
	kube.NodeClient // unused methods
	nodes           []corev1.Node
	sent            []*corev1.NodeList
	imagesHeld      []int // per request after the first: images still in earlier pages
}

func (p *pagedNodes) Nodes() kube.NodeClient { return p }

func (p *pagedNodes) List(_ context.Context, o metav1.ListOptions) (*corev1.NodeList, error) {
	if o.Continue != "" {
		held := 0
		for _, l := range p.sent {
			for _, n := range l.Items {
				held += len(n.Status.Images)
			}
		}
		p.imagesHeld = append(p.imagesHeld, held)
	}
	start := 2 * len(p.sent)
	l := &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}}
	for _, n := range p.nodes[start:min(start+2, len(p.nodes))] {
		l.Items = append(l.Items, *n.DeepCopy())
	}
	if start+2 < len(p.nodes) {
		l.Continue = fmt.Sprint(len(p.sent) + 1)
	}
	p.sent = append(p.sent, l)
	return l, nil
}

func (p *pagedNodes) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return watch.NewFake(), nil
}

// The reflector's pager keeps every page until the last one arrives: each
// page must be stripped as it arrives, or the first list of a big cluster
// holds every node's images at once (issue 28: 5,000 nodes' images were
// most of queue mode's memory).
func TestPagesAreStrippedAsTheyArrive(t *testing.T) {
	p := &pagedNodes{}
	for i := range 5 {
		p.nodes = append(p.nodes, corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i)},
			Spec:       corev1.NodeSpec{ProviderID: fmt.Sprintf("aws:///us-east-1a/i-0000000000000000%d", i)},
			Status:     corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"big"}}}},
		})
	}
	x := New(p, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go x.Run(ctx)
	if err := x.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]int{0, 0}, p.imagesHeld); d != "" {
		t.Errorf("images still held by earlier pages when the next was asked for (-want +got):\n%s", d)
	}
	if n, ok := x.ByInstance("i-00000000000000004"); !ok || n.Name != "n4" || n.Status.Images != nil {
		t.Errorf("ByInstance(i-00000000000000004) = %v, %v; want n4 stripped", n, ok)
	}
}
