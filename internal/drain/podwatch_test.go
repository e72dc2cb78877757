package drain_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/podwatch"
	"lifeboat.dev/lifeboat/test/testenv"
)

// watchCounter counts the pod watches a client opens, and those of every
// pod (no field selector: the shared watch's).
type watchCounter struct {
	rt             http.RoundTripper
	watches, whole atomic.Int64
}

func (c *watchCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/pods") && r.URL.Query().Get("watch") == "true" {
		c.watches.Add(1)
		if r.URL.Query().Get("fieldSelector") == "" {
			c.whole.Add(1)
		}
	}
	return c.rt.RoundTrip(r)
}

// sharedReads returns a pod-read client that counts its watches and a
// shared pod watch over it, as queue mode wires them.
func sharedReads(t *testing.T) (*kube.REST, *podwatch.Hub, *watchCounter) {
	t.Helper()
	counter := &watchCounter{}
	reads := readsThrough(t, func(rt http.RoundTripper) http.RoundTripper { counter.rt = rt; return counter })
	return reads, podwatch.New(reads.Pods(metav1.NamespaceAll).Watch, clock.RealClock{}, quiet), counter
}

// readsThrough returns a pod-read client (lifeboat's protobuf REST client)
// whose transport wrap wraps: a counter of its requests.
func readsThrough(t *testing.T, wrap func(http.RoundTripper) http.RoundTripper) *kube.REST {
	t.Helper()
	rc := protobufConfig()
	rc.Wrap(wrap)
	reads, err := kube.NewREST(rc)
	if err != nil {
		t.Fatal(err)
	}
	return reads
}

// protobufConfig is the drainer's client configuration: lifeboat's
// protobuf, against the testbed's API server.
func protobufConfig() *rest.Config {
	rc := rest.CopyConfig(env.Config)
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return rc
}

// Drains of several nodes at once wait on one shared pod watch (queue
// mode's internal/podwatch), not one each, and every one of them sees its
// pods go.
func TestDrainsShareOnePodWatch(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, 2*time.Minute)
	ns := env.Namespace(t)
	reads, hub, counter := sharedReads(t)
	d := newDrainer(drain.Options{PodReadClient: reads, PodWatch: hub})
	const nodes = 6
	names := make([]string, nodes)
	var pods []*corev1.Pod
	for i := range names {
		names[i] = newNode(t)
		for range 2 {
			pods = append(pods, newPod(t, ctx, testenv.PodSpec{Namespace: ns, Node: names[i], Grace: 30 * time.Second, ShutdownAfter: time.Second}))
		}
	}
	var wg sync.WaitGroup
	results := make([]drain.Result, nodes)
	errs := make([]error, nodes)
	for i, node := range names {
		wg.Go(func() { results[i], errs[i] = d.Drain(ctx, node, drain.Deadline{}, func(drain.Progress) {}) })
	}
	wg.Wait()
	for i := range names {
		if errs[i] != nil || results[i].Evicted != 2 || results[i].Remaining != 0 {
			t.Errorf("node %s: %+v, %v; want 2 evicted, none left", names[i], results[i], errs[i])
		}
	}
	for _, p := range pods {
		if podExists(t, ctx, p) {
			t.Errorf("pod %s still exists after its drain", p.Name)
		}
	}
	if n, whole := counter.watches.Load(), counter.whole.Load(); n != 1 || whole != 1 {
		t.Errorf("%d pod watches opened for %d drains (%d of every pod), want the one shared watch", n, nodes, whole)
	}
}

// listCounter records the node pod lists a client sends, as
// "resourceVersion/resourceVersionMatch" ("/" for a consistent list).
type listCounter struct {
	rt    http.RoundTripper
	mu    sync.Mutex
	lists []string
}

func (c *listCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	if strings.HasSuffix(r.URL.Path, "/pods") && q.Get("watch") != "true" && strings.HasPrefix(q.Get("fieldSelector"), "spec.nodeName=") {
		c.mu.Lock()
		c.lists = append(c.lists, q.Get("resourceVersion")+"/"+q.Get("resourceVersionMatch"))
		c.mu.Unlock()
	}
	return c.rt.RoundTrip(r)
}

func (c *listCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.lists
	c.lists = nil
	return out
}

// A drain lists its node's pods NotOlderThan its cordon (from the API
// server's watch cache, never etcd) once the shared pod watch has seen
// the cache get there, and consistently when nothing says so (before the
// hub runs; a quiet watch is internal/podwatch's TestCaughtUp). Either way
// the pods created just before the cordon are evicted.
func TestDrainListsFromThePodCache(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, 2*time.Minute)
	ns := env.Namespace(t)
	counter := &listCounter{}
	reads := readsThrough(t, func(rt http.RoundTripper) http.RoundTripper { counter.rt = rt; return counter })
	hub := podwatch.New(reads.Pods(metav1.NamespaceAll).Watch, clock.RealClock{}, quiet)
	// A node cache, as lifeboat always has (its informer's): here one that
	// has not seen the cordon yet, so the drain goes by the cordon's own
	// answer.
	notYet := func(string) (*corev1.Node, bool) { return nil, false }
	d := newDrainer(drain.Options{PodReadClient: reads, PodWatch: hub, NodeCache: notYet})
	drainNode := func(t *testing.T) {
		t.Helper()
		node := newNode(t)
		pods := []*corev1.Pod{
			newPod(t, ctx, testenv.PodSpec{Namespace: ns, Node: node, ShutdownAfter: 100 * time.Millisecond}),
			newPod(t, ctx, testenv.PodSpec{Namespace: ns, Node: node, ShutdownAfter: 100 * time.Millisecond}),
		}
		if _, err := d.Cordon(ctx, node, nil, "test", nil); err != nil {
			t.Fatal(err)
		}
		res, err := d.Drain(ctx, node, drain.Deadline{}, nil)
		if err != nil || res.Evicted != len(pods) {
			t.Fatalf("drain of %s: %+v, %v; want %d evicted", node, res, err, len(pods))
		}
		for _, p := range pods {
			if podExists(t, ctx, p) {
				t.Errorf("pod %s still exists after its drain", p.Name)
			}
		}
	}
	first := func(lists []string) string {
		if len(lists) == 0 {
			return "none"
		}
		return lists[0]
	}

	// No shared watch yet: consistent (the drain's wait then starts it).
	drainNode(t)
	if got := first(counter.take()); got != "/" {
		t.Errorf("the first drain listed %q, want a consistent list", got)
	}

	// The hub's watch moves: another pod changes every 50 ms.
	busy := newPod(t, ctx, testenv.PodSpec{Namespace: ns, Node: newNode(t)})
	keep, ok := hub.WatchNode(busy.Spec.NodeName, busy.ResourceVersion)
	if !ok {
		t.Fatal("the hub does not serve the busy node")
	}
	defer keep.Stop()
	bctx, stopBusy := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; bctx.Err() == nil; i++ {
			patch := []byte(`{"metadata":{"annotations":{"tick":"` + strconv.Itoa(i) + `"}}}`)
			_, _ = env.Client.CoreV1().Pods(ns).Patch(bctx, busy.Name, types.MergePatchType, patch, metav1.PatchOptions{})
			time.Sleep(50 * time.Millisecond)
		}
	})
	drainNode(t)
	if got := first(counter.take()); !strings.HasSuffix(got, "/NotOlderThan") || got == "/NotOlderThan" {
		t.Errorf("a drain while the shared watch moves listed %q, want NotOlderThan the cordon", got)
	}
	stopBusy()
	wg.Wait()
}
