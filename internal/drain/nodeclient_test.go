package drain_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// Issue 28: the pod watch a drain waits on goes through
// Options.WatchClient (a lane of its own: in a burst a thousand watches
// took a thousand of the evictions' rate-limiter tokens); the eviction
// client opens none.
func TestWaitWatchUsesTheWatchClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "u1"}, Spec: corev1.PodSpec{NodeName: "n"}}
	main := fake.NewClientset()
	watchLane := fake.NewClientset(pod)
	watching := make(chan struct{})
	watchLane.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFake()
		go func() {
			close(watching)
			w.Delete(pod)
		}()
		return true, w, nil
	})
	d := drain.New(clientset.New(main), clock.RealClock{}, slog.New(slog.NewTextHandler(io.Discard, nil)), drain.Options{WatchClient: clientset.New(watchLane)})
	left, err := d.WaitGone(ctx, "n", []corev1.Pod{*pod}, "1", time.Time{})
	if err != nil || left != 0 {
		t.Fatalf("WaitGone: %d left, %v; want the pod gone", left, err)
	}
	<-watching
	for _, a := range main.Actions() {
		if a.GetVerb() == "watch" {
			t.Errorf("the eviction client opened a watch: %v", a)
		}
	}
}
