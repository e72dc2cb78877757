package fault

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"lifeboat.dev/lifeboat/test/testenv"
)

// soakSample is one reading of lifeboat's resources.
type soakSample struct {
	at         time.Duration
	rss        int64
	goroutines float64
	fds        float64
	cycles     int64
}

// TestSoak runs a stream of interruptions for LIFEBOAT_SOAK_DURATION
// (default 45s in CI; the long variant is 30m): eight workers each create a node
// with a pod, interrupt it with a Spot notice, wait until lifeboat drained
// it, and replace the node (deleted, and a new instance joins under the
// same name, as a node restart does). Every 5 s lifeboat's RSS
// (/proc/<pid>/status), go_goroutines and process_open_fds are sampled.
// Memory, goroutines and file descriptors must stay flat: after the work
// stops, goroutines and descriptors are back near their level after the
// warm-up, and RSS in the last third is not far above the first.
func TestSoak(t *testing.T) {
	d := envDuration(t, "LIFEBOAT_SOAK_DURATION", 45*time.Second)
	w := newWorld(t, worldOptions{flags: []string{"--unknown-instance", "delete", "--log-level", "info"}, timeout: d + 3*time.Minute})
	ns := kube.Namespace(t)
	var cycles atomic.Int64
	sample := func(start time.Time) soakSample {
		rss, err := w.lb.RSS()
		if err != nil {
			t.Fatal(err)
		}
		return soakSample{at: time.Since(start), rss: rss, cycles: cycles.Load(),
			goroutines: w.Metric("go_goroutines", nil), fds: w.Metric("process_open_fds", nil)}
	}
	start := time.Now()
	var mu sync.Mutex
	samples := []soakSample{sample(start)}
	// Canceled after d rather than given a deadline: client-go's rate
	// limiter refuses at once a wait that would pass a context's deadline,
	// with an error the workers would not recognise as the soak's end.
	ctx, stop := context.WithCancel(w.ctx)
	defer stop()
	time.AfterFunc(d, stop)
	g, gctx := errgroup.WithContext(ctx)
	for worker := range 8 {
		g.Go(func() error {
			name := fmt.Sprintf("ip-10-250-%d-%d.ec2.internal", worker, time.Now().UnixNano()%200)
			for gctx.Err() == nil {
				if err := soakCycle(gctx, w, ns, name); err != nil {
					if gctx.Err() != nil {
						return nil
					}
					return err
				}
				cycles.Add(1)
			}
			return nil
		})
	}
	g.Go(func() error {
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-gctx.Done():
				return nil
			case <-tick.C:
			}
			s := sample(start)
			mu.Lock()
			samples = append(samples, s)
			mu.Unlock()
		}
	})
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	// Let the last work finish, then take the final reading.
	w.Eventually(60*time.Second, "no node in flight", func() bool { return w.Metric("lifeboat_nodes_in_flight", nil) == 0 })
	w.Eventually(60*time.Second, "the queue to be empty", w.QueueEmpty)
	time.Sleep(2 * time.Second) // let goroutines of finished work exit
	final := sample(start)
	samples = append(samples, final)

	var rows []string
	for _, s := range samples {
		rows = append(rows, fmt.Sprintf("%6.0fs  cycles %4d  rss %6.1f MiB  goroutines %4.0f  fds %3.0f", s.at.Seconds(), s.cycles, float64(s.rss)/(1<<20), s.goroutines, s.fds))
	}
	t.Logf("soak of %v: %d interruptions (node created, drained, replaced)\n%s", d, final.cycles, strings.Join(rows, "\n"))
	if final.cycles < 10 {
		t.Fatalf("only %d interruptions in %v: the soak did not run", final.cycles, d)
	}
	// Warm-up: the first fifth (caches, connection pools, heap growth).
	body := samples[1 : len(samples)-1]
	if len(body) < 3 {
		t.Fatalf("only %d samples", len(body))
	}
	warm := body[len(body)/5:]
	third := max(len(warm)/3, 1)
	median := func(ss []soakSample, f func(soakSample) float64) float64 {
		v := make([]float64, 0, len(ss))
		for _, s := range ss {
			v = append(v, f(s))
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	rss := func(s soakSample) float64 { return float64(s.rss) / (1 << 20) }
	firstRSS, lastRSS := median(warm[:third], rss), median(warm[len(warm)-third:], rss)
	t.Logf("RSS median: first third %.1f MiB, last third %.1f MiB; goroutines after warm-up %.0f, at the end %.0f; fds after warm-up %.0f, at the end %.0f",
		firstRSS, lastRSS, warm[0].goroutines, final.goroutines, warm[0].fds, final.fds)
	if lastRSS > firstRSS*1.25+8 {
		t.Errorf("RSS grew from %.1f MiB to %.1f MiB over the soak", firstRSS, lastRSS)
	}
	baseG := slices.MinFunc(warm, func(a, b soakSample) int { return int(a.goroutines - b.goroutines) }).goroutines
	if final.goroutines > baseG+15 {
		t.Errorf("goroutines: %.0f at the end, %.0f at least during the soak: a leak", final.goroutines, baseG)
	}
	baseF := slices.MinFunc(warm, func(a, b soakSample) int { return int(a.fds - b.fds) }).fds
	if final.fds > baseF+10 {
		t.Errorf("open file descriptors: %.0f at the end, %.0f at least during the soak: a leak", final.fds, baseF)
	}
}

// soakCycle is one node's life: it joins with a pod, gets a Spot notice,
// is drained by lifeboat, and is replaced.
func soakCycle(ctx context.Context, w *world, ns, name string) error {
	id := testenv.RandomInstanceID()
	if _, err := kube.CreateNode(ctx, testenv.NodeSpec{Name: name, InstanceID: id}); err != nil {
		return err
	}
	defer func() { _ = kube.DeleteNode(context.WithoutCancel(ctx), name) }()
	if _, err := kube.CreatePod(ctx, testenv.PodSpec{Namespace: ns, Node: name, Grace: -1}); err != nil {
		return err
	}
	body := fmt.Sprintf(`{"version":"0","id":"soak-%s","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"123456789012","time":%q,"region":"us-east-1","resources":[],"detail":{"instance-id":%q,"instance-action":"terminate"}}`,
		id, time.Now().UTC().Format(time.RFC3339), id)
	if _, err := w.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(w.Stack.QueueURL), MessageBody: aws.String(body)}); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := kube.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pods, err := kube.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String()})
		if err != nil {
			return err
		}
		if n.Annotations["lifeboat.io/drained"] != "" && len(pods.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s (%s) not drained within 30 s", name, id)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
