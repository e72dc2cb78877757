package drain_test

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/kube/clientset"
)

// Issue 16: node writes go through Options.NodeClient (a client with its
// own rate limiter, so that a cordon never waits behind evictions), and
// the eviction client sends none.
func TestNodeWritesUseTheNodeClient(t *testing.T) {
	ctx := context.Background()
	pods := fake.NewClientset()
	nodeLane := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	d := drain.New(clientset.New(pods), clock.RealClock{}, slog.New(slog.NewTextHandler(io.Discard, nil)), drain.Options{NodeClient: clientset.New(nodeLane)})
	if _, err := d.Cordon(ctx, "n", []string{"lifeboat.io/spot-interruption"}, "spot", map[string]string{"lifeboat.io/events": "[]"}); err != nil {
		t.Fatalf("Cordon: %v", err)
	}
	if err := d.SetAnnotations(ctx, "n", map[string]string{"lifeboat.io/drained": "now"}); err != nil {
		t.Fatalf("SetAnnotations: %v", err)
	}
	if _, err := d.Uncordon(ctx, "n", "lifeboat.io/", []string{"lifeboat.io/events"}); err != nil {
		t.Fatalf("Uncordon: %v", err)
	}
	if n := len(pods.Actions()); n != 0 {
		t.Errorf("the eviction client made %d node requests: %v", n, pods.Actions())
	}
	var writes int
	for _, a := range nodeLane.Actions() {
		if a.GetVerb() == "update" || a.GetVerb() == "patch" {
			writes++
		}
	}
	if writes != 3 {
		t.Errorf("node lane made %d writes, want 3 (cordon, annotations, uncordon)", writes)
	}
}

// Issue 28: the list of a node's pods and the pod watch a drain waits on
// go through Options.PodReadClient (a lane of its own: in a burst a
// thousand lists and watches took two thousand of the evictions'
// rate-limiter tokens); the eviction client lists and watches nothing, and
// evicts.
func TestDrainReadsThroughThePodReadClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "u1"}, Spec: corev1.PodSpec{NodeName: "n"}}
	main := fake.NewClientset(pod)
	readLane := fake.NewClientset(pod)
	readLane.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		// The API server's list carries its resourceVersion, the watch's start.
		return true, &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "5"}, Items: []corev1.Pod{*pod}}, nil
	})
	watching := make(chan struct{})
	readLane.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFake()
		go func() {
			close(watching)
			w.Delete(pod)
		}()
		return true, w, nil
	})
	d := drain.New(clientset.New(main), clock.RealClock{}, slog.New(slog.NewTextHandler(io.Discard, nil)), drain.Options{PodReadClient: clientset.New(readLane)})
	res, err := d.Drain(ctx, "n", drain.Deadline{}, nil)
	if err != nil || res.Evicted != 1 {
		t.Fatalf("Drain: %+v, %v; want the pod evicted and gone", res, err)
	}
	<-watching
	verbs := func(cs *fake.Clientset) map[string]int {
		m := map[string]int{}
		for _, a := range cs.Actions() {
			m[a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource()]++
		}
		return m
	}
	if got, want := verbs(main), map[string]int{"create pods/eviction": 1}; !maps.Equal(got, want) {
		t.Errorf("eviction client: %v, want %v", got, want)
	}
	if got, want := verbs(readLane), map[string]int{"list pods/": 1, "watch pods/": 1}; !maps.Equal(got, want) {
		t.Errorf("pod read client: %v, want %v", got, want)
	}
}
