package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/test/testenv"
)

// floorConcurrency is how many requests the bare client keeps in flight:
// enough to keep the API server busy on two cores, few enough not to
// measure its queueing instead of its throughput.
const floorConcurrency = 32

// floorCordonPatch is what lifeboat's cordon of a Spot notice writes: the
// node unschedulable, its taint and the annotation that lifeboat cordoned
// it.
const floorCordonPatch = `{"metadata":{"annotations":{"lifeboat.io/cordoned":"true"}},"spec":{"unschedulable":true,"taints":[{"key":"lifeboat.io/spot-interruption","value":"spot-interruption","effect":"NoSchedule"}]}}`

// floorGrace is the grace period of the floor's evictions (lifeboat's
// shortest, internal/drain's minGrace).
var floorGrace int64 = 1

// runFloor creates a fresh set of n nodes with podsPer pods each (named
// floor-<i>-NNNN, in a namespace of their own), then sends, as fast as the
// API server takes them, exactly the writes lifeboat needs for them: every
// cordon+taint PATCH, then every Eviction, floorConcurrency at once with no
// client rate limit. It waits until kwok has deleted every evicted pod,
// deletes the nodes again and returns the times.
//
// Then it times moto's delivery of n notices to a bare receiver
// (receiveFloor).
//
// With profileSeconds > 0 it writes a CPU profile of the API server over
// that many seconds from its first request to profilePath.
func runFloor(ctx context.Context, b *testing.B, env *testenv.Env, motoEndpoint string, i, n, podsPer, profileSeconds int, profilePath string) *Floor {
	ns, f, client, pods := floorFleet(ctx, b, env, fmt.Sprintf("floor-%d", i), n, podsPer)
	defer f.deleteNodes(ctx, env)

	wctx, stop := context.WithCancel(ctx)
	defer stop()
	w := watchFloor(wctx, b, env, ns, f.names, len(pods.Items))
	countersBefore := readAPICounters(ctx, b, env)
	pids := burstProcesses(env, nil, nil)
	cpuBefore := cpuNow(pids)

	t0 := time.Now()
	profiled := make(chan struct{})
	go func() {
		defer close(profiled)
		if profileSeconds > 0 {
			profileAPIServer(ctx, b, env, profileSeconds, profilePath)
		}
	}()
	defer func() { <-profiled }()
	each := func(count int, do func(context.Context, int) error) time.Duration {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(floorConcurrency)
		for j := range count {
			g.Go(func() error { return do(gctx, j) })
		}
		if err := g.Wait(); err != nil {
			b.Fatalf("floor: %v", err)
		}
		return time.Since(t0)
	}
	cordoned := each(n, func(ctx context.Context, j int) error {
		return floorCordon(ctx, client, f.names[j])
	})
	evicted := each(len(pods.Items), func(ctx context.Context, j int) error {
		return floorEvict(ctx, client, ns, pods.Items[j].Name)
	})
	w.waitGone(b, 10*time.Minute)
	cpu := cpuSince(cpuBefore, pids)
	countersAfter := readAPICounters(ctx, b, env)
	gone, cordonSeen := w.times(b, t0)
	received := receiveFloor(ctx, b, motoEndpoint, i, n)
	return &Floor{Nodes: n, Pods: len(pods.Items), Concurrency: floorConcurrency, Namespace: ns,
		AllReceived: received, Receivers: receiveFloorPollers,
		AllCordoned: cordonSeen, CordonsAnswered: cordoned.Seconds(), AllEvicted: evicted.Seconds(), AllGone: gone,
		APIRequests: Diff(countersBefore.Requests, countersAfter.Requests), StorageReads: Diff(countersBefore.Storage, countersAfter.Storage),
		APF: Diff(countersBefore.APF, countersAfter.APF), CPU: cpu}
}

// floorFleet creates a floor's fresh fleet of n nodes (named after
// prefix) with podsPer pods each, in a namespace of its own, and returns
// the namespace, the fleet, a client as floorClient's and the pods.
func floorFleet(ctx context.Context, b *testing.B, env *testenv.Env, prefix string, n, podsPer int) (string, *fleet, *kubernetes.Clientset, *corev1.PodList) {
	ns := env.Namespace(b)
	f := plainFleet(ctx, b, env, ns, prefix, n, podsPer)
	client, pods := floorClient(ctx, b, env, ns, n*podsPer)
	return ns, f, client, pods
}

// deleteNodes deletes the fleet's nodes, ignoring errors.
func (f *fleet) deleteNodes(ctx context.Context, env *testenv.Env) {
	for _, name := range f.names {
		_ = env.DeleteNode(ctx, name)
	}
}

// floorClient returns a client with lifeboat's identity and no client-side
// rate limit, and the pods of namespace ns, failing unless there are want.
func floorClient(ctx context.Context, b *testing.B, env *testenv.Env, ns string, want int) (*kubernetes.Clientset, *corev1.PodList) {
	cfg := rest.CopyConfig(benchIdentity(ctx, b, env).config) // lifeboat's
	cfg.QPS = -1                                              // no client-side rate limiter
	cfg.RateLimiter = nil
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if len(pods.Items) != want {
		b.Fatalf("floor: %d pods in %s, want %d", len(pods.Items), ns, want)
	}
	return client, pods
}

// floorCordon sends lifeboat's cordon of a Spot notice's node.
func floorCordon(ctx context.Context, client *kubernetes.Clientset, node string) error {
	_, err := client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(floorCordonPatch), metav1.PatchOptions{})
	return err
}

// floorEvict evicts a pod with the grace period lifeboat asks for: never
// below 1 s (0 would be a force deletion; internal/drain's minGrace), so
// the harness's pods (their own grace 0) take the same second to go in
// both.
func floorEvict(ctx context.Context, client *kubernetes.Clientset, ns, pod string) error {
	return client.CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns},
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &floorGrace}})
}

// floorWatch sees a floor's work land: a node watch the cordons of its
// nodes (as the harness's sees lifeboat's), a pod watch on its namespace
// kwok deleting the evicted pods.
type floorWatch struct {
	mu         sync.Mutex
	mine       map[string]bool // nodes not yet seen cordoned
	lastCordon time.Time
	left       int // pods not yet seen deleted
	lastGone   time.Time
	allGone    chan struct{}
}

// watchFloor starts watching until ctx ends, for nodes names and the pods
// of namespace ns (pods of them), and returns once both caches synced.
func watchFloor(ctx context.Context, b *testing.B, env *testenv.Env, ns string, names []string, pods int) *floorWatch {
	w := &floorWatch{mine: map[string]bool{}, left: pods, allGone: make(chan struct{})}
	for _, name := range names {
		w.mine[name] = true
	}
	seen := func(obj any) {
		node, ok := obj.(*corev1.Node)
		if !ok || !node.Spec.Unschedulable {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.mine[node.Name] {
			delete(w.mine, node.Name)
			w.lastCordon = time.Now()
		}
	}
	inf := informers.NewSharedInformerFactoryWithOptions(env.Client, 0, informers.WithNamespace(ns)).Core().V1().Pods().Informer()
	nodeInf := informers.NewSharedInformerFactory(env.Client, 0).Core().V1().Nodes().Informer()
	if _, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) }}); err != nil {
		b.Fatal(err)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(any) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.left--
		if w.left == 0 {
			w.lastGone = time.Now()
			close(w.allGone)
		}
	}}); err != nil {
		b.Fatal(err)
	}
	go inf.RunWithContext(ctx)
	go nodeInf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced, nodeInf.HasSynced) {
		b.Fatal("floor: the node and pod informers did not sync")
	}
	return w
}

// waitGone waits until every watched pod is deleted, failing the
// benchmark after within.
func (w *floorWatch) waitGone(b *testing.B, within time.Duration) {
	select {
	case <-w.allGone:
	case <-time.After(within):
		w.mu.Lock()
		defer w.mu.Unlock()
		b.Fatalf("floor: %d evicted pods still there after %v", w.left, within)
	}
}

// times returns the seconds from t0 to the last pod's deletion and to the
// last node's cordon, failing the benchmark if a node was never seen
// cordoned.
func (w *floorWatch) times(b *testing.B, t0 time.Time) (gone, cordoned float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.mine) > 0 {
		b.Fatalf("floor: the node watch saw %d nodes never cordoned", len(w.mine))
	}
	return w.lastGone.Sub(t0).Seconds(), w.lastCordon.Sub(t0).Seconds()
}

// watchReceived polls lifeboat's lifeboat_events_received_total every
// 100 ms from now until it has grown by n or ctx ends, and returns a
// function that gives the moment it did (zero if it did not yet).
func watchReceived(ctx context.Context, metricsURL string, n int) func() time.Time {
	count := func() (float64, bool) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
		if err != nil {
			return 0, false
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, false
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, false
		}
		sum := 0.0
		for _, v := range CountersByLabel(string(body), "lifeboat_events_received_total", "source") {
			sum += v
		}
		return sum, true
	}
	base, _ := count()
	var mu sync.Mutex
	var at time.Time
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if c, ok := count(); ok && c-base >= float64(n) {
				mu.Lock()
				at = time.Now()
				mu.Unlock()
				return
			}
		}
	}()
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return at
	}
}

// profileCPU fetches a CPU profile of the given length from a pprof
// endpoint and writes it to path; errors are logged, not fatal (the
// profile is an aid, not a figure).
func profileCPU(b *testing.B, addr string, seconds int, path string) {
	data, err := fetchProfile(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, seconds))
	if err == nil {
		err = writeProfile(path, data)
	}
	if err != nil {
		b.Logf("CPU profile: %v", err)
		return
	}
	b.Logf("CPU profile of lifeboat (%d s from the burst's start) written to %s", seconds, path)
}

// profileAPIServer writes a CPU profile of the testbed's kube-apiserver
// (its /debug/pprof, on by default) over the next seconds to path, and
// says so; a failure is logged, not fatal (the run's figures stand).
func profileAPIServer(ctx context.Context, b *testing.B, env *testenv.Env, seconds int, path string) {
	data, err := env.Client.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", strconv.Itoa(seconds)).Timeout(time.Duration(seconds+30) * time.Second).DoRaw(ctx)
	if err == nil {
		err = writeProfile(path, data)
	}
	if err != nil {
		b.Logf("CPU profile of kube-apiserver: %v", err)
		return
	}
	b.Logf("CPU profile of kube-apiserver (%d s) written to %s", seconds, path)
}

// openSockets counts the sockets a process has open (0 if unreadable).
func openSockets(pid int) int {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(target, "socket:") {
			n++
		}
	}
	return n
}
