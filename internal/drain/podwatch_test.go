package drain_test

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	rc := protobufConfig()
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.rt = rt; return counter })
	reads, err := kube.NewREST(rc)
	if err != nil {
		t.Fatal(err)
	}
	return reads, podwatch.New(reads.Pods(metav1.NamespaceAll).Watch, clock.RealClock{}, quiet), counter
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
