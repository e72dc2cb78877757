package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/test/testenv"
)

// BenchmarkInterruptionBurst is the bench harness of issue 7: N kwok nodes
// (LIFEBOAT_BENCH_NODES, default 50) each running M pods
// (LIFEBOAT_BENCH_PODS_PER_NODE, default 2, grace 0), real SQS (moto) with
// the queue stack, the real lifeboat binary with its defaults. N Spot
// notices are sent at once; it reports message -> cordoned and message ->
// drained percentiles, API requests by verb during the burst (the API
// server's, all clients, and lifeboat's own), and lifeboat's peak RSS. A
// text table, JSON and an SVG chart go to LIFEBOAT_BENCH_OUT (default
// out/bench/ under the repository root).
func BenchmarkInterruptionBurst(b *testing.B) {
	n := burstNodes(b)
	podsPer := envInt(b, "LIFEBOAT_BENCH_PODS_PER_NODE", 2)
	outDir := os.Getenv("LIFEBOAT_BENCH_OUT")
	if outDir == "" {
		outDir = filepath.Join(testenv.RepoRoot(), "out", "bench")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	env, moto, bin, dir := testbed(b, testenv.Options{NoScheduler: true})
	ns := env.Namespace(b)
	for i := 0; i < b.N; i++ {
		stack, err := testenv.CreateQueueStack(ctx, moto.Endpoint, fmt.Sprintf("harness%d", i))
		if err != nil {
			b.Fatal(err)
		}
		ids := make([]string, n)
		names := make([]string, n)
		setup := time.Now()
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(16)
		for j := range n {
			ids[j] = testenv.RandomInstanceID()
			names[j] = fmt.Sprintf("harness-%d-%04d", i, j)
			g.Go(func() error {
				if _, err := env.CreateNode(gctx, testenv.NodeSpec{Name: names[j], InstanceID: ids[j]}); err != nil {
					return err
				}
				for range podsPer {
					if _, err := env.CreatePod(gctx, testenv.PodSpec{Namespace: ns, Node: names[j], Grace: -1}); err != nil {
						return err
					}
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		b.Logf("set up %d kwok nodes with %d pods each in %v", n, podsPer, time.Since(setup).Round(time.Second))

		port, err := testenv.FreePort()
		if err != nil {
			b.Fatal(err)
		}
		proc, err := testenv.StartProcess(fmt.Sprintf("lifeboat-harness-%d", i), bin, []string{"run",
			"--queue-url", stack.QueueURL, "--aws-endpoint", moto.Endpoint, "--region", "us-east-1",
			"--kubeconfig", env.Kubeconfig, "--leader-elect=false", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--log-level", "warn",
		}, testenv.AWSEnv(), dir)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			if b.Failed() {
				b.Logf("---- %s log ----\n%s", proc.Name, proc.Tail(60))
			}
		})
		metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
		if err := testenv.WaitHTTP(ctx, proc, nil, metricsURL); err != nil {
			b.Fatal(err)
		}

		// An informer records when each node is first seen cordoned and
		// first seen marked drained.
		idx := map[string]int{}
		for j, name := range names {
			idx[name] = j
		}
		var mu sync.Mutex
		cordoned := make([]time.Time, n)
		drained := make([]time.Time, n)
		nCordoned, nDrained := 0, 0
		seen := func(obj any) {
			node, ok := obj.(*corev1.Node)
			if !ok {
				return
			}
			j, mine := idx[node.Name]
			if !mine {
				return
			}
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if node.Spec.Unschedulable && cordoned[j].IsZero() {
				cordoned[j] = now
				nCordoned++
			}
			if node.Annotations["lifeboat.io/drained"] != "" && drained[j].IsZero() {
				drained[j] = now
				nDrained++
			}
		}
		factory := informers.NewSharedInformerFactory(env.Client, 0)
		inf := factory.Core().V1().Nodes().Informer()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) }}); err != nil {
			b.Fatal(err)
		}
		ictx, stopInformer := context.WithCancel(ctx)
		go inf.RunWithContext(ictx)
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			b.Fatal("node informer did not sync")
		}
		// Let lifeboat's informer settle: count only the burst's requests.
		time.Sleep(2 * time.Second)
		apiBefore, err := env.APIRequestCounts(ctx)
		if err != nil {
			b.Fatal(err)
		}
		lbBefore := CountersByLabel(scrape(b, metricsURL), "lifeboat_kube_requests_total", "verb")

		client := sqs.NewFromConfig(testenv.MotoAWSConfig(), func(o *sqs.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) })
		sent := make([]time.Time, n)
		b.ResetTimer()
		t0 := time.Now()
		var sendTook time.Duration
		sendDone := make(chan struct{})
		go func() {
			defer close(sendDone)
			for start := 0; start < n; start += 10 {
				var entries []sqstypes.SendMessageBatchRequestEntry
				now := time.Now()
				for j := start; j < min(start+10, n); j++ {
					body := fmt.Sprintf(`{"version":"0","id":"harness-%s","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"123456789012","time":%q,"region":"us-east-1","resources":[],"detail":{"instance-id":%q,"instance-action":"terminate"}}`,
						ids[j], now.UTC().Format(time.RFC3339), ids[j])
					entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String(body)})
					mu.Lock()
					sent[j] = now
					mu.Unlock()
				}
				if _, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(stack.QueueURL), Entries: entries}); err != nil {
					b.Error(err)
					return
				}
			}
			sendTook = time.Since(t0)
		}()
		deadline := t0.Add(10 * time.Minute)
		for {
			mu.Lock()
			done := nDrained == n
			c, d := nCordoned, nDrained
			mu.Unlock()
			if done {
				break
			}
			if time.Now().After(deadline) {
				b.Errorf("after 10 minutes only %d of %d nodes cordoned, %d drained", c, n, d)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		b.StopTimer()
		<-sendDone
		// Counts and memory right after the last node drained.
		lbAfter := CountersByLabel(scrape(b, metricsURL), "lifeboat_kube_requests_total", "verb")
		apiAfter, err := env.APIRequestCounts(ctx)
		if err != nil {
			b.Fatal(err)
		}
		_, hwm := procMemory(b, proc.Pid())
		stopInformer()
		proc.Stop()

		res := &Result{
			Date:             time.Now().UTC().Format("2006-01-02 15:04 UTC"),
			Command:          fmt.Sprintf("LIFEBOAT_BENCH_NODES=%d LIFEBOAT_BENCH_PODS_PER_NODE=%d go test -run '^$' -bench InterruptionBurst -benchtime 1x ./test/bench/", n, podsPer),
			Nodes:            n,
			PodsPerNode:      podsPer,
			SendSeconds:      sendTook.Seconds(),
			APIRequests:      Diff(apiBefore, apiAfter),
			LifeboatRequests: Diff(lbBefore, lbAfter),
			PeakRSSMiB:       hwm / 1024,
		}
		mu.Lock()
		for j, name := range names {
			res.PerNode = append(res.PerNode, NodeTimes{Name: name, Sent: since(t0, sent[j]), Cordoned: since(t0, cordoned[j]), Drained: since(t0, drained[j])})
		}
		mu.Unlock()
		res.Summarize()
		if err := writeReport(outDir, fmt.Sprintf("interruption-burst-n%d-m%d", n, podsPer), res); err != nil {
			b.Error(err)
		}
		fmt.Printf("\n%s(written to %s)\n", res.Table(), outDir)

		var writes float64
		for _, v := range []string{"POST", "PUT", "PATCH", "DELETE"} {
			writes += res.LifeboatRequests[v]
		}
		b.ReportMetric(float64(n), "nodes")
		b.ReportMetric(res.ToCordoned.P50, "cordon_p50_s")
		b.ReportMetric(res.ToCordoned.P90, "cordon_p90_s")
		b.ReportMetric(res.ToCordoned.P99, "cordon_p99_s")
		b.ReportMetric(res.ToCordoned.Max, "cordon_max_s")
		b.ReportMetric(res.ToDrained.P50, "drain_p50_s")
		b.ReportMetric(res.ToDrained.P90, "drain_p90_s")
		b.ReportMetric(res.ToDrained.P99, "drain_p99_s")
		b.ReportMetric(res.ToDrained.Max, "drain_max_s")
		b.ReportMetric(res.AllDrained, "all_drained_s")
		b.ReportMetric(writes, "lifeboat_writes")
		b.ReportMetric(res.PeakRSSMiB, "peak_rss_MiB")
		for _, name := range names {
			_ = env.DeleteNode(ctx, name)
		}
	}
}

// scrape returns the text of a /metrics endpoint.
func scrape(b *testing.B, url string) string {
	b.Helper()
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return string(body)
}

// writeReport writes <base>.txt, <base>.json and <base>.svg into dir.
func writeReport(dir, base string, r *Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := r.JSON()
	if err != nil {
		return err
	}
	for ext, data := range map[string][]byte{".txt": []byte(r.Table()), ".json": js, ".svg": r.SVG()} {
		if err := os.WriteFile(filepath.Join(dir, base+ext), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
