package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/test/testenv"
)

// BenchmarkDaemonSetFleet measures what lifeboat costs the API server as the
// cluster grows (issue 28 item 4): LIFEBOAT_BENCH_FLEET (default 100)
// IMDS-mode processes, one per node, as the chart's DaemonSet runs them
// (lifeboat-imds, GOGC=50 GOMEMLIMIT=20MiB GOMAXPROCS=1, every other
// setting the binary's default), each polling its own quiet
// amazon-ec2-metadata-mock; then queue mode's Deployment on the same
// cluster: two replicas with leader election, the chart's default.
//
// Three windows of LIFEBOAT_BENCH_IDLE (default 60 s) each, nothing else
// changing: nothing of lifeboat running (the baseline), the fleet, the
// Deployment. The nodes are plain objects (no kwok, no controller-manager,
// no scheduler), so only lifeboat and the benchmark's own reads talk to
// the API server. Each window reports the API requests (every client's,
// apiserver_request_total differences, by verb), the watches held at its
// end (apiserver_longrunning_requests{verb="WATCH"}), and the CPU (every
// thread's schedstat) and VmRSS of kube-apiserver and etcd; the fleet's and
// the Deployment's figures less the baseline's are lifeboat's, per process
// and extrapolated linearly to 5,000 nodes.
//
//	flock /tmp/lifeboat-testbed.lock go test -timeout 30m -run '^$' -bench DaemonSetFleet -benchtime 1x ./test/bench/
func BenchmarkDaemonSetFleet(b *testing.B) {
	n := envInt(b, "LIFEBOAT_BENCH_FLEET", 100)
	idle := testenv.IdleTime(b, 60*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	env, moto, bin, dir := testbed(b, testenv.Options{NoScheduler: true, NoKwok: true, NoControllerManager: true})
	imdsBin, err := testenv.BuildLifeboat(dir, "imdsonly")
	if err != nil {
		b.Fatal(err)
	}
	stack, err := testenv.CreateQueueStack(ctx, moto.Endpoint, "fleet")
	if err != nil {
		b.Fatal(err)
	}
	server, etcd := controlPlane(b, env)

	nodes := make([]string, n)
	ids := make([]string, n)
	for i := range n {
		ids[i] = testenv.RandomInstanceID()
		nodes[i] = fmt.Sprintf("fleet-%05d", i)
		if _, err := env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: nodes[i]},
			Spec:       corev1.NodeSpec{ProviderID: testenv.ProviderID("us-east-1a", ids[i])},
		}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		base := measureIdle(ctx, b, env, server, etcd, idle)

		var fleet []*testenv.Lifeboat
		for i := range n {
			nodeDir := filepath.Join(dir, nodes[i])
			if err := os.MkdirAll(filepath.Join(nodeDir, "imds"), 0o755); err != nil {
				b.Fatal(err)
			}
			mock, err := testenv.NewIMDS(ctx, filepath.Join(nodeDir, "imds"), testenv.IMDSOptions{InstanceID: ids[i], IMDSv2Only: true})
			if err != nil {
				b.Fatal(err)
			}
			defer mock.Close()
			lb, err := testenv.StartLifeboat(ctx, testenv.LifeboatOptions{Bin: imdsBin, Dir: nodeDir,
				Env: testenv.DaemonSetGoEnv,
				Args: []string{"--mode", "imds", "--node-name", nodes[i], "--imds-endpoint", mock.URL,
					"--kubeconfig", env.Kubeconfig, "--log-level", "warn"}})
			if err != nil {
				b.Fatal(err)
			}
			defer lb.Stop()
			fleet = append(fleet, lb)
		}
		waitReady(ctx, b, fleet)
		daemonSet := measureIdle(ctx, b, env, server, etcd, idle)
		for _, lb := range fleet {
			lb.Stop()
		}

		var deployment []*testenv.Lifeboat
		for i := range 2 {
			queueDir := filepath.Join(dir, fmt.Sprintf("queue-%d", i))
			if err := os.MkdirAll(queueDir, 0o755); err != nil {
				b.Fatal(err)
			}
			lb, err := testenv.StartLifeboat(ctx, testenv.LifeboatOptions{Bin: bin, Dir: queueDir,
				Args: []string{"--queue-url", stack.QueueURL, "--aws-endpoint", moto.Endpoint, "--region", "us-east-1",
					"--kubeconfig", env.Kubeconfig, "--lease-namespace", metav1.NamespaceDefault, "--log-level", "warn",
					// Its identity in the Lease, as the chart's downward API gives
					// it: without, both replicas on this one host would take the
					// host name and both lead.
					"--pod-name", fmt.Sprintf("lifeboat-%d", i)}})
			if err != nil {
				b.Fatal(err)
			}
			defer lb.Stop()
			deployment = append(deployment, lb)
		}
		waitReady(ctx, b, deployment)
		queue := measureIdle(ctx, b, env, server, etcd, idle)

		b.StopTimer()
		report := fleetReport(n, idle, base, daemonSet, queue)
		b.Log("\n" + report)
		b.ReportMetric(daemonSet.reqPerSec()-base.reqPerSec(), "fleet_api_req/s")
		b.ReportMetric(daemonSet.watches-base.watches, "fleet_watches")
		b.ReportMetric(queue.reqPerSec()-base.reqPerSec(), "queue_api_req/s")
		if out := os.Getenv("LIFEBOAT_BENCH_OUT"); out != "" {
			if err := os.WriteFile(filepath.Join(out, fmt.Sprintf("daemonset-fleet-n%d.txt", n)), []byte(report), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// controlPlane returns the PIDs of kube-apiserver and etcd.
func controlPlane(b *testing.B, env *testenv.Env) (server, etcd int) {
	b.Helper()
	for _, p := range env.Processes() {
		switch {
		case strings.HasPrefix(p.Name, "kube-apiserver"):
			server = p.Pid()
		case strings.HasPrefix(p.Name, "etcd"):
			etcd = p.Pid()
		}
	}
	if server == 0 || etcd == 0 {
		b.Fatalf("no kube-apiserver (%d) or etcd (%d) among the testbed's processes", server, etcd)
	}
	return server, etcd
}

// waitReady waits until every process answers /readyz: its node watch is
// running.
func waitReady(ctx context.Context, b *testing.B, lbs []*testenv.Lifeboat) {
	b.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	for _, lb := range lbs {
		for {
			resp, err := client.Get(lb.URL() + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if exited, err := lb.Exited(); exited {
				b.Fatalf("lifeboat exited before it was ready (%v):\n%s", err, strings.Join(lb.Logs(), "\n"))
			}
			select {
			case <-ctx.Done():
				b.Fatalf("waiting for %s/readyz: %v", lb.URL(), ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// idleWindow is what the control plane did during one window.
type idleWindow struct {
	length              time.Duration
	requests            map[string]float64 // by verb, differences
	watches             float64            // held at the end
	serverCPU, etcdCPU  time.Duration
	serverRSS, etcdRSS  float64 // KiB at the end
	serverPeak, etcdHWM float64 // KiB
}

func (w idleWindow) total() float64 {
	var t float64
	for verb, v := range w.requests {
		if verb != "WATCH" { // a watch is counted when it ends
			t += v
		}
	}
	return t
}

func (w idleWindow) reqPerSec() float64 { return w.total() / w.length.Seconds() }

// measureIdle lets the cluster idle for d and returns what its control
// plane did meanwhile. It waits 5 s first so that start-up requests (the
// first lists, the Lease's acquisition) are not counted.
func measureIdle(ctx context.Context, b *testing.B, env *testenv.Env, server, etcd int, d time.Duration) idleWindow {
	b.Helper()
	time.Sleep(5 * time.Second)
	req0, err := env.APIRequestCounts(ctx)
	if err != nil {
		b.Fatal(err)
	}
	s0, e0 := threadsCPU(b, server), threadsCPU(b, etcd)
	start := time.Now()
	time.Sleep(d)
	s1, e1 := threadsCPU(b, server), threadsCPU(b, etcd)
	length := time.Since(start)
	req1, err := env.APIRequestCounts(ctx)
	if err != nil {
		b.Fatal(err)
	}
	watches, err := env.APIMetricSum(ctx, "apiserver_longrunning_requests", map[string]string{"verb": "WATCH"})
	if err != nil {
		b.Fatal(err)
	}
	w := idleWindow{length: length, requests: map[string]float64{}, watches: watches, serverCPU: s1 - s0, etcdCPU: e1 - e0}
	for verb, v := range req1 {
		if dv := v - req0[verb]; dv > 0 {
			w.requests[verb] = dv
		}
	}
	// The benchmark's own two metric reads are GETs of a non-resource URL.
	w.serverRSS, w.serverPeak = procMemory(b, server)
	w.etcdRSS, w.etcdHWM = procMemory(b, etcd)
	return w
}

// threadsCPU is testenv.ProcessCPU, fatal on error.
func threadsCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	d, err := testenv.ProcessCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// fleetReport prints the three windows and lifeboat's share of each.
func fleetReport(n int, idle time.Duration, base, ds, queue idleWindow) string {
	var s strings.Builder
	scale := 5000 / float64(n)
	fmt.Fprintf(&s, "DaemonSet fleet: %d IMDS-mode processes vs queue mode's 2 replicas; windows of %v\n\n", n, idle)
	fmt.Fprintf(&s, "| window | API req/s (no watches) | by verb | watches held | apiserver CPU | etcd CPU | apiserver RSS | etcd RSS |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range []struct {
		name string
		w    idleWindow
	}{{"nothing of lifeboat (baseline)", base}, {fmt.Sprintf("%d IMDS-mode processes", n), ds}, {"queue mode, 2 replicas", queue}} {
		fmt.Fprintf(&s, "| %s | %.2f | %s | %.0f | %.1f ms/s | %.1f ms/s | %.0f MiB | %.0f MiB |\n", r.name, r.w.reqPerSec(), verbs(r.w), r.w.watches,
			perSec(r.w.serverCPU, r.w.length), perSec(r.w.etcdCPU, r.w.length), r.w.serverRSS/1024, r.w.etcdRSS/1024)
	}
	dReq, dWatch := ds.reqPerSec()-base.reqPerSec(), ds.watches-base.watches
	dCPU := perSec(ds.serverCPU, ds.length) - perSec(base.serverCPU, base.length)
	dRSS := (ds.serverRSS - base.serverRSS) / 1024
	fmt.Fprintf(&s, "\nThe fleet's share, per process / at 5,000 nodes (linear): API %.3f / %.1f req/s; watches %.2f / %.0f; apiserver CPU %.2f / %.0f ms/s; apiserver RSS %.2f / %.0f MiB\n",
		dReq/float64(n), dReq*scale, dWatch/float64(n), dWatch*scale, dCPU/float64(n), dCPU*scale, dRSS/float64(n), dRSS*scale)
	qReq, qWatch := queue.reqPerSec()-base.reqPerSec(), queue.watches-base.watches
	qCPU := perSec(queue.serverCPU, queue.length) - perSec(base.serverCPU, base.length)
	fmt.Fprintf(&s, "Queue mode's share (whatever the node count while idle): API %.2f req/s; watches %.0f; apiserver CPU %.1f ms/s; apiserver RSS %+.0f MiB\n",
		qReq, qWatch, qCPU, (queue.serverRSS-base.serverRSS)/1024)
	return s.String()
}

func perSec(d, over time.Duration) float64 {
	return float64(d.Milliseconds()) / over.Seconds()
}

func verbs(w idleWindow) string {
	var keys []string
	for k := range w.requests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, w.requests[k]))
	}
	return strings.Join(parts, ", ")
}
