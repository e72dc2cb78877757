// Package bench measures lifeboat end to end on the testbed: the real binary
// in queue mode, a real kube-apiserver with kwok nodes, moto's SQS. Run with
//
//	go test -run '^$' -bench . -benchtime 1x ./test/bench/
//
// Figures are printed as benchmark metrics; docs/benchmarks.md records them.
package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/test/testenv"
)

// burstNodes is the burst size: LIFEBOAT_BENCH_NODES, default 50.
func burstNodes(b *testing.B) int {
	if v := os.Getenv("LIFEBOAT_BENCH_NODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("LIFEBOAT_BENCH_NODES=%q: want a positive number", v)
		}
		return n
	}
	return 50
}

// BenchmarkSpotBurst sends N Spot interruption notices for N nodes at once
// and reports message sent -> node cordoned latency percentiles.
func BenchmarkSpotBurst(b *testing.B) {
	n := burstNodes(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env, moto, bin, dir := testbed(b, testenv.Options{NoScheduler: true})
	for i := 0; i < b.N; i++ {
		stack, err := testenv.CreateQueueStack(ctx, moto.Endpoint, fmt.Sprintf("bench%d", i))
		if err != nil {
			b.Fatal(err)
		}
		ids := make([]string, n)
		names := make([]string, n)
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(16)
		for j := range n {
			ids[j] = testenv.RandomInstanceID()
			names[j] = fmt.Sprintf("burst-%d-%d", i, j)
			g.Go(func() error {
				// Plain nodes (not kwok's): a cordon needs no kubelet, and
				// 1,000 kwok heartbeats would load the machine we measure on.
				_, err := env.Client.CoreV1().Nodes().Create(gctx, &corev1.Node{
					ObjectMeta: metav1.ObjectMeta{Name: names[j]},
					Spec:       corev1.NodeSpec{ProviderID: testenv.ProviderID("us-east-1a", ids[j])},
				}, metav1.CreateOptions{})
				return err
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		proc, err := testenv.StartProcess(fmt.Sprintf("lifeboat-%d", i), bin, []string{"run",
			"--queue-url", stack.QueueURL, "--aws-endpoint", moto.Endpoint, "--region", "us-east-1",
			"--kubeconfig", env.Kubeconfig, "--leader-elect=false", "--listen", "", "--log-level", "info",
		}, testenv.AWSEnv(), dir)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			if b.Failed() {
				b.Logf("---- %s log ----\n%s", proc.Name, proc.Tail(60))
			}
		})
		lat := burst(ctx, b, env, moto.Endpoint, stack.QueueURL, ids, names)
		proc.Stop()
		slices.Sort(lat)
		pct := func(p float64) float64 { return lat[min(len(lat)-1, int(p*float64(len(lat))))].Seconds() }
		b.ReportMetric(float64(n), "nodes")
		b.ReportMetric(pct(0.50), "p50_s")
		b.ReportMetric(pct(0.90), "p90_s")
		b.ReportMetric(pct(0.99), "p99_s")
		b.ReportMetric(lat[len(lat)-1].Seconds(), "max_s")
		for _, name := range names {
			_ = env.DeleteNode(ctx, name)
		}
	}
}

// burst puts one Spot notice per instance on the queue (batches of ten, as
// fast as SQS takes them) and returns, per node, the time from its message
// being sent to the node being seen cordoned.
func burst(ctx context.Context, b *testing.B, env *testenv.Env, endpoint, queueURL string, ids, names []string) []time.Duration {
	b.Helper()
	want := map[string]int{}
	for j, name := range names {
		want[name] = j
	}
	// An informer (list + watch, reconnecting) records when each node is
	// first seen unschedulable.
	var cmu sync.Mutex
	cordoned := map[string]time.Time{}
	factory := informers.NewSharedInformerFactory(env.Client, 0)
	inf := factory.Core().V1().Nodes().Informer()
	seen := func(obj any) {
		n, ok := obj.(*corev1.Node)
		if !ok || !n.Spec.Unschedulable {
			return
		}
		if _, mine := want[n.Name]; !mine {
			return
		}
		cmu.Lock()
		if _, done := cordoned[n.Name]; !done {
			cordoned[n.Name] = time.Now()
		}
		cmu.Unlock()
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, n any) { seen(n) }}); err != nil {
		b.Fatal(err)
	}
	ictx, stopInformer := context.WithCancel(ctx)
	defer stopInformer()
	go inf.RunWithContext(ictx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		b.Fatal("node informer did not sync")
	}
	sent := make([]time.Time, len(ids))
	var mu sync.Mutex
	b.ResetTimer()
	go func() {
		took := sendSpotNotices(ctx, b, endpoint, queueURL, ids, func(j int, at time.Time) {
			mu.Lock()
			sent[j] = at
			mu.Unlock()
		})
		b.Logf("sent %d messages in %v", len(ids), took.Round(time.Millisecond))
	}()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		cmu.Lock()
		n := len(cordoned)
		cmu.Unlock()
		if n == len(ids) {
			break
		}
		if time.Now().After(deadline) {
			for j, name := range names {
				cmu.Lock()
				_, ok := cordoned[name]
				cmu.Unlock()
				if !ok {
					b.Errorf("node %s (instance %s) never cordoned", name, ids[j])
				}
			}
			b.Fatalf("only %d of %d nodes cordoned after 5 minutes", n, len(ids))
		}
		time.Sleep(20 * time.Millisecond)
	}
	lat := make([]time.Duration, 0, len(ids))
	mu.Lock()
	for j, name := range names {
		lat = append(lat, cordoned[name].Sub(sent[j]))
	}
	mu.Unlock()
	b.StopTimer()
	return lat
}
