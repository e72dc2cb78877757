package drain_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/test/testenv"
)

// listQueries records the query of every pod list sent through it.
type listQueries struct {
	mu   sync.Mutex
	got  []map[string]string
	next http.RoundTripper
}

func (l *listQueries) RoundTrip(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	if r.Method == http.MethodGet && r.URL.Path == "/api/v1/pods" && q.Get("watch") != "true" {
		l.mu.Lock()
		l.got = append(l.got, map[string]string{"resourceVersion": q.Get("resourceVersion"), "resourceVersionMatch": q.Get("resourceVersionMatch")})
		l.mu.Unlock()
	}
	return l.next.RoundTrip(r)
}

// A drain of a node its cache shows cordoned lists the node's pods from
// that version (NotOlderThan) on the real API server, which answers from
// its watch cache with the pod bound before the cordon; the drain evicts
// it.
func TestDrainListsFromTheCordonedVersionOnTheAPIServer(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, time.Minute)
	ns := env.Namespace(t)
	node := newNode(t)
	pod := newPod(t, ctx, testenv.PodSpec{Namespace: ns, Node: node, Grace: time.Second})

	queries := &listQueries{}
	rc := rest.CopyConfig(env.Config)
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { queries.next = rt; return queries })
	c, err := kube.NewREST(rc)
	if err != nil {
		t.Fatal(err)
	}
	var cached *corev1.Node
	d := drain.New(c, clock.RealClock{}, quiet, drain.Options{Backoff: 200 * time.Millisecond, NodeCache: func(string) (*corev1.Node, bool) { return cached, cached != nil }})
	if _, err := d.Cordon(ctx, node, []string{"lifeboat.io/spot-interruption"}, "spot-interruption", nil); err != nil {
		t.Fatal(err)
	}
	// The informer's copy: the cordoned node as the API server has it now.
	if cached, err = env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := d.Drain(ctx, node, drain.Deadline{}, nil)
	if err != nil {
		t.Fatalf("Drain: %v (%+v)", err, res)
	}
	if res.Evicted != 1 {
		t.Errorf("evicted %d pods, want 1 (%s/%s)", res.Evicted, ns, pod.Name)
	}
	if podExists(t, ctx, pod) {
		t.Errorf("pod %s still there after the drain", pod.Name)
	}
	queries.mu.Lock()
	defer queries.mu.Unlock()
	if len(queries.got) == 0 {
		t.Fatal("the drain listed no pods")
	}
	want := map[string]string{"resourceVersion": cached.ResourceVersion, "resourceVersionMatch": "NotOlderThan"}
	if first := queries.got[0]; first["resourceVersion"] != want["resourceVersion"] || first["resourceVersionMatch"] != want["resourceVersionMatch"] {
		t.Errorf("the drain's list asked for %v, want %v", first, want)
	}
}
