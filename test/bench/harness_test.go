package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

// Burst kinds of BenchmarkInterruptionBurst (LIFEBOAT_BENCH_KIND).
const (
	// kindSpot: N Spot notices sent at once while lifeboat consumes; the
	// clock of each node starts when its message is sent.
	kindSpot = "spot"
	// kindSpotQueued: the N notices are all on the queue before lifeboat
	// may read them (it is stopped with SIGSTOP, its long polls are let
	// end empty, the notices are sent, then it is continued); every clock
	// starts at SIGCONT. This measures lifeboat,
	// not the rate at which moto accepts messages (~50/s).
	kindSpotQueued = "spot-queued"
	// kindScaleIn: the N nodes are the instances of one Auto Scaling group
	// (the simulator) with a terminate lifecycle hook, scaled in to 0 at
	// once; a node's "message" is its lifecycle action's announcement
	// reaching the queue (time 0 is the first action's start; the
	// simulator's own announcement delay is logged apart), and the
	// action's completion is measured too.
	kindScaleIn = "scale-in"
)

// lifeboatLongPoll is how long lifeboat's receives wait on an empty queue
// (internal/source/sqs longPoll).
const lifeboatLongPoll = 5 * time.Second

// BenchmarkInterruptionBurst is the bench harness of issue 7: N kwok nodes
// (LIFEBOAT_BENCH_NODES, default 50) each running M pods
// (LIFEBOAT_BENCH_PODS_PER_NODE, default 2, grace 0), real SQS (moto) with
// the queue stack, the real lifeboat binary with its defaults, and for
// LIFEBOAT_BENCH_KIND=scale-in the Auto Scaling simulator (hook timeout
// LIFEBOAT_BENCH_HOOK_TIMEOUT s, default 30). N nodes are interrupted at
// once (see the kinds above); it reports message -> cordoned, -> drained
// (and -> lifecycle completed) percentiles, API requests by verb during the
// burst (the API server's, all clients, and lifeboat's own), and lifeboat's
// peak RSS. LIFEBOAT_BENCH_ARGS adds lifeboat flags (space-separated, e.g.
// "--kube-qps 500 --kube-burst 1000"). A text table, JSON and an SVG chart
// go to LIFEBOAT_BENCH_OUT (default out/bench/ under the repository root).
//
// Before lifeboat starts, the same run times the floor (runFloor): a bare
// client sending the same writes to an equivalent fresh set of nodes and
// pods, one after the other so that they never share the cores; the report
// gives lifeboat's times as multiples of it (LIFEBOAT_BENCH_FLOOR=0 skips
// it). The floor also times moto handing as many notices to a bare SQS
// receiver (receiveFloor): no cordon comes before its message, so the
// report also gives all cordoned against the longer of the two. For
// spot-queued it then times a bare client doing the whole job with moto
// sharing the cores (runPipelineFloor; LIFEBOAT_BENCH_PIPELINE_FLOOR=0
// skips it), and gives lifeboat's times against that too. For the
// Spot kinds it also records when lifeboat had received every message. LIFEBOAT_BENCH_PROFILE=S runs a build with -tags pprof and
// writes an S-second CPU profile of lifeboat from the burst's start next to
// the report (<base>.cpu.pprof), and its heap profile at the highest RSS
// sampled every 2 s through the burst (<base>.heap.pprof); LIFEBOAT_BENCH_APISERVER_PROFILE=S one of
// the API server, from the burst's start (<base>.apiserver.pprof) and from
// the floor's (<base>.floor.apiserver.pprof). LIFEBOAT_BENCH_AUDIT=1 adds
// the drains' timeline from the API server's audit log (readTimeline), and
// keeps the log (<base>.audit.log). Every report gives each process's CPU
// seconds over the burst and over the floor.
func BenchmarkInterruptionBurst(b *testing.B) {
	n := burstNodes(b)
	podsPer := envInt(b, "LIFEBOAT_BENCH_PODS_PER_NODE", 2)
	kind := cmp.Or(os.Getenv("LIFEBOAT_BENCH_KIND"), kindSpot)
	if kind != kindSpot && kind != kindSpotQueued && kind != kindScaleIn {
		b.Fatalf("LIFEBOAT_BENCH_KIND=%q: want %s, %s or %s", kind, kindSpot, kindSpotQueued, kindScaleIn)
	}
	failover := failoverMode(b, kind)
	extraArgs := strings.Fields(os.Getenv("LIFEBOAT_BENCH_ARGS"))
	outDir := os.Getenv("LIFEBOAT_BENCH_OUT")
	if outDir == "" {
		outDir = filepath.Join(testenv.RepoRoot(), "out", "bench")
	}
	// go test's -timeout bounds the run: 5,000 nodes, or several binaries,
	// take far longer to set up than 1,000.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	withFloor := os.Getenv("LIFEBOAT_BENCH_FLOOR") != "0"
	profileSeconds := envInt(b, "LIFEBOAT_BENCH_PROFILE", 0)
	apiProfileSeconds := envInt(b, "LIFEBOAT_BENCH_APISERVER_PROFILE", 0)
	opts := testenv.Options{NoScheduler: true}
	// LIFEBOAT_BENCH_AUDIT=1 (always with a failover) has the API server
	// write an audit log (auditPolicy) and the report a per-node timeline
	// of the drains from it (readTimeline).
	auditLog := ""
	if failover != "" || os.Getenv("LIFEBOAT_BENCH_AUDIT") == "1" {
		auditLog, opts.APIServerArgs = auditArgs(b)
	}
	// New nodes are made without the not-ready taint: the node lifecycle
	// controller takes it off about five nodes a second, which set 5,000
	// nodes up in 17 minutes (kwok's nodes are Ready at once; no
	// scheduler, so no pod waits for it).
	opts.APIServerArgs = append(opts.APIServerArgs, "--disable-admission-plugins=TaintNodesByCondition")
	opts.NodeLeaseDuration = fleetLeaseDuration(n)
	if apiProfileSeconds > 0 {
		opts.APIServerArgs = append(opts.APIServerArgs, "--profiling=true") // testenv turns it off
	}
	env, moto, bin, dir := testbed(b, opts)
	procEnv := testenv.AWSEnv()
	pprofAddr := ""
	if profileSeconds > 0 {
		var err error
		if bin, err = testenv.BuildLifeboat(dir, "pprof"); err != nil {
			b.Fatal(err)
		}
		pport, err := testenv.FreePort()
		if err != nil {
			b.Fatal(err)
		}
		pprofAddr = fmt.Sprintf("127.0.0.1:%d", pport)
		procEnv = append(procEnv, "LIFEBOAT_PPROF_ADDR="+pprofAddr)
	}
	baseName := fmt.Sprintf("interruption-burst-%s-n%d-m%d", kind, n, podsPer)
	if failover != "" {
		baseName += "-failover-" + failover
	}
	// LIFEBOAT_BENCH_BINARIES (comma-separated paths, e.g. a build of an
	// earlier commit beside this one's) runs each binary in turn on a fresh
	// fleet in this one run, after one floor: before and after measured in
	// the same minutes. Each report's name ends with its binary's file name.
	bins := []string{bin}
	if v := os.Getenv("LIFEBOAT_BENCH_BINARIES"); v != "" {
		if profileSeconds > 0 {
			b.Fatal("LIFEBOAT_BENCH_BINARIES and LIFEBOAT_BENCH_PROFILE: give a -tags pprof build in the list instead")
		}
		bins = strings.Split(v, ",")
		for _, p := range bins {
			if _, err := os.Stat(p); err != nil {
				b.Fatalf("LIFEBOAT_BENCH_BINARIES: %v", err)
			}
		}
	}
	ns := env.Namespace(b)
	for i := 0; i < b.N*len(bins); i++ {
		bin, base := bins[i%len(bins)], baseName
		if len(bins) > 1 {
			base += "-" + filepath.Base(bin)
			b.Logf("run %d: %s", i, bin)
		}
		var floor *Floor
		if withFloor && i%len(bins) == 0 {
			floor = runFloor(ctx, b, env, moto.Endpoint, i, n, podsPer, apiProfileSeconds, filepath.Join(outDir, baseName+".floor.apiserver.pprof"))
			fmt.Printf("floor: %d nodes cordoned in %.2f s, %d pods evicted in %.2f s, gone in %.2f s; moto handed a bare receiver %d messages in %.2f s (printed at once: a run that dies keeps it)\n",
				floor.Nodes, floor.AllCordoned, floor.Pods, floor.AllEvicted, floor.AllGone, floor.Nodes, floor.AllReceived)
			if kind == kindSpotQueued && os.Getenv("LIFEBOAT_BENCH_PIPELINE_FLOOR") != "0" {
				p := runPipelineFloor(ctx, b, env, moto, i, n, podsPer)
				floor.Pipeline = p
				fmt.Printf("floor, the whole job (moto sharing the cores): %d messages received in %.2f s, nodes cordoned in %.2f s, pods gone in %.2f s, messages deleted in %.2f s\n",
					n, p.AllReceived, p.AllCordoned, p.AllGone, p.AllDeleted)
			}
		}
		stack, err := testenv.CreateQueueStack(ctx, moto.Endpoint, fmt.Sprintf("harness%d", i))
		if err != nil {
			b.Fatal(err)
		}
		setup := time.Now()
		var f *fleet
		if kind == kindScaleIn {
			f = groupFleet(ctx, b, env, moto, ns, fmt.Sprintf("harness%d", i), n, podsPer, int32(envInt(b, "LIFEBOAT_BENCH_HOOK_TIMEOUT", 30)))
		} else {
			f = plainFleet(ctx, b, env, ns, fmt.Sprintf("harness-%d", i), n, podsPer)
		}
		fmt.Printf("set up %d kwok nodes with %d pods each in %v\n", n, podsPer, time.Since(setup).Round(time.Second))

		endpoints := moto.Endpoint
		if f.sim != nil {
			endpoints += ",autoscaling=" + f.sim.Endpoint()
		}
		args := append([]string{"run",
			"--queue-url", stack.QueueURL, "--region", "us-east-1", "--kubeconfig", benchIdentity(ctx, b, env).kubeconfig, "--log-level", "warn",
		}, extraArgs...)
		var proc *testenv.Process
		var metricsURL string
		var lbs *pair // two replicas with leader election (LIFEBOAT_BENCH_FAILOVER)
		if failover != "" {
			lbs = startPair(ctx, b, failover, bin, dir, procEnv, args, moto.Endpoint, endpoints, i)
			proc, metricsURL = lbs.current()
		} else {
			port, err := testenv.FreePort()
			if err != nil {
				b.Fatal(err)
			}
			args = append(args, "--aws-endpoint", endpoints, "--leader-elect=false", "--listen", fmt.Sprintf("127.0.0.1:%d", port))
			if proc, err = testenv.StartProcess(fmt.Sprintf("lifeboat-harness-%d", i), bin, args, procEnv, dir); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				if b.Failed() {
					b.Logf("---- %s log ----\n%s", proc.Name, proc.Tail(60))
				}
			})
			metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
			if err := testenv.WaitHTTP(ctx, proc, nil, metricsURL); err != nil {
				b.Fatal(err)
			}
		}

		// An informer records when each node is first seen cordoned and
		// first seen marked drained.
		idx := map[string]int{}
		for j, name := range f.names {
			idx[name] = j
		}
		var mu sync.Mutex
		cordoned := make([]time.Time, n)
		drained := make([]time.Time, n)
		nCordoned, nDrained := 0, 0
		// How often each node went from schedulable to cordoned.
		transitions, wasCordoned := make([]int, n), make([]bool, n)
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
			if node.Spec.Unschedulable && !wasCordoned[j] {
				transitions[j]++
			}
			wasCordoned[j] = node.Spec.Unschedulable
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
		countersBefore := readAPICounters(ctx, b, env)
		lbProcs := []*testenv.Process{proc}
		if lbs != nil {
			lbProcs = lbs.procs[:]
		}
		cpuPids := burstProcesses(env, moto, lbProcs)
		lbBefore := CountersByLabel(scrape(b, metricsURL), "lifeboat_kube_requests_total", "verb")
		if lbs != nil {
			lbBefore = lbs.requests(b)
		}
		received := func() time.Time { return time.Time{} }
		if kind != kindScaleIn && lbs == nil {
			received = watchReceived(ictx, metricsURL, n)
		}

		sent := make([]time.Time, n)
		var t0 time.Time
		var sendTook time.Duration
		sendDone := make(chan struct{})
		b.ResetTimer()
		switch kind {
		case kindSpot:
			t0 = time.Now()
			go func() {
				defer close(sendDone)
				sendTook = sendSpotNotices(ctx, b, moto.Endpoint, stack.QueueURL, f.ids, func(j int, at time.Time) {
					mu.Lock()
					sent[j] = at
					mu.Unlock()
				})
			}()
		case kindSpotQueued:
			pids := []int{proc.Pid()}
			if lbs != nil {
				pids = lbs.pids()
			}
			for _, pid := range pids {
				if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
					b.Fatal(err)
				}
			}
			// The long polls lifeboat had sent when it stopped are let
			// end empty before the first notice: moto would hand them the
			// first 40 notices, and a stopped lifeboat cannot read them.
			// On SIGCONT their receives' deadlines had passed: lifeboat
			// gave them up (3-4 "receiving from queue failed" at the very
			// start of every 5,000 run, sessions 24 and 25) and their
			// notices stayed hidden for the visibility timeout, a delay no
			// running lifeboat sees.
			time.Sleep(lifeboatLongPoll + time.Second)
			sendTook = sendSpotNotices(ctx, b, moto.Endpoint, stack.QueueURL, f.ids, func(int, time.Time) {})
			t0 = time.Now()
			for _, pid := range pids {
				if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
					b.Fatal(err)
				}
			}
			for j := range sent {
				sent[j] = t0
			}
			close(sendDone)
		case kindScaleIn:
			t0 = time.Now()
			if _, err := f.as.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: aws.String(f.group), DesiredCapacity: aws.Int32(0)}); err != nil {
				b.Fatal(err)
			}
			sendTook = time.Since(t0)
			close(sendDone)
		}
		// From here: for spot-queued the messages are on the queue already
		// (moto's work to take them is not the burst's).
		cpuBefore := cpuNow(cpuPids)
		profiled := make(chan struct{})
		var profiles sync.WaitGroup
		heapDone, stopHeap := make(chan struct{}), make(chan struct{})
		if pprofAddr != "" {
			profiles.Go(func() { profileCPU(b, pprofAddr, profileSeconds, filepath.Join(outDir, base+".cpu.pprof")) })
			go func() {
				defer close(heapDone)
				heapAtPeak(b, pprofAddr, proc.Pid(), 2*time.Second, stopHeap, filepath.Join(outDir, base+".heap.pprof"))
			}()
		} else {
			close(heapDone)
		}
		if apiProfileSeconds > 0 {
			profiles.Go(func() {
				profileAPIServer(ctx, b, env, apiProfileSeconds, filepath.Join(outDir, base+".apiserver.pprof"))
			})
		}
		go func() { profiles.Wait(); close(profiled) }()
		deadline := t0.Add(10 * time.Minute)
		peakSockets, lastCount, lastProgress := 0, time.Time{}, time.Now()
		for {
			if time.Since(lastCount) >= 200*time.Millisecond {
				peakSockets, lastCount = max(peakSockets, openSockets(proc.Pid())), time.Now()
			}
			mu.Lock()
			c, d := nCordoned, nDrained
			mu.Unlock()
			if lbs != nil {
				lbs.maybeFire(ctx, b, c, n)
				proc, metricsURL = lbs.current()
			}
			done := d == n
			if f.sim != nil && f.completed() < n {
				done = false
			}
			if done {
				break
			}
			if time.Now().After(deadline) {
				b.Errorf("after 10 minutes only %d of %d nodes cordoned, %d drained, %d lifecycle actions completed", c, n, d, f.completed())
				break
			}
			if time.Since(lastProgress) >= 30*time.Second {
				lastProgress = time.Now()
				fmt.Printf("%.0f s: %d of %d nodes cordoned, %d drained\n", time.Since(t0).Seconds(), c, n, d)
			}
			time.Sleep(20 * time.Millisecond)
		}
		b.StopTimer()
		close(stopHeap)
		<-heapDone
		b.Logf("lifeboat had at most %d sockets open during the burst (counted every 0.2 s): its connections to the API server, moto and the harness", peakSockets)
		<-sendDone
		// Counts and memory right after the last node drained. lifeboat's
		// metrics are kept (its own cordon and drain durations, from its
		// side of the API server).
		lbMetrics := scrape(b, metricsURL)
		lbAfter := CountersByLabel(lbMetrics, "lifeboat_kube_requests_total", "verb")
		if lbs != nil {
			lbAfter = lbs.requests(b)
		}
		if err := os.MkdirAll(outDir, 0o755); err == nil {
			_ = os.WriteFile(filepath.Join(outDir, base+".metrics.txt"), []byte(lbMetrics), 0o644)
		}
		cpu := cpuSince(cpuBefore, cpuPids)
		countersAfter := readAPICounters(ctx, b, env)
		_, hwm := procMemory(b, proc.Pid())
		<-profiled
		allReceived := received()
		stopInformer()
		if lbs == nil {
			proc.Stop()
		}

		res := &Result{
			Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"),
			Command: fmt.Sprintf("LIFEBOAT_BENCH_KIND=%s LIFEBOAT_BENCH_NODES=%d LIFEBOAT_BENCH_PODS_PER_NODE=%d LIFEBOAT_BENCH_ARGS=%q LIFEBOAT_BENCH_FAILOVER=%s LIFEBOAT_BENCH_IDENTITY=%s LIFEBOAT_BENCH_FLOWSCHEMAS=%s LIFEBOAT_BENCH_AUDIT=%s go test -run '^$' -bench InterruptionBurst -benchtime 1x ./test/bench/",
				kind, n, podsPer, strings.Join(extraArgs, " "), failover, cmp.Or(os.Getenv("LIFEBOAT_BENCH_IDENTITY"), "serviceaccount"), cmp.Or(os.Getenv("LIFEBOAT_BENCH_FLOWSCHEMAS"), "1"), os.Getenv("LIFEBOAT_BENCH_AUDIT")),
			Kind:             kind,
			Lifecycle:        f.sim != nil,
			Nodes:            n,
			PodsPerNode:      podsPer,
			SendSeconds:      sendTook.Seconds(),
			APIRequests:      Diff(countersBefore.Requests, countersAfter.Requests),
			LifeboatRequests: Diff(lbBefore, lbAfter),
			StorageReads:     Diff(countersBefore.Storage, countersAfter.Storage),
			APF:              Diff(countersBefore.APF, countersAfter.APF),
			CPU:              cpu,
			PeakRSSMiB:       hwm / 1024,
			Floor:            floor,
		}
		if !allReceived.IsZero() {
			res.AllReceived = allReceived.Sub(t0).Seconds()
		}
		var started, announced, completed map[string]time.Time
		if f.sim != nil {
			started, announced, completed = f.actionTimes()
			var lag []float64
			for id, at := range announced {
				lag = append(lag, at.Sub(started[id]).Seconds())
			}
			p := percentiles(lag)
			b.Logf("simulator and moto: action started -> announced on the queue p50 %.3f s, p99 %.3f s, max %.3f s", p.P50, p.P99, p.Max)
			// A scale-in's clock starts at the first action, not at the call.
			if first := minTime(started); !first.IsZero() {
				t0 = first
			}
		}
		mu.Lock()
		for j, name := range f.names {
			nt := NodeTimes{Name: name, Sent: since(t0, sent[j]), Cordoned: since(t0, cordoned[j]), Drained: since(t0, drained[j])}
			if f.sim != nil {
				nt.Sent = since(t0, announced[f.ids[j]])
				nt.Completed = since(t0, completed[f.ids[j]])
			}
			res.PerNode = append(res.PerNode, nt)
		}
		moved := slices.Clone(transitions)
		mu.Unlock()
		res.Summarize()
		if lbs != nil {
			res.Failover = lbs.report(ctx, b, t0, res, f, ns, auditLog, moto.Endpoint, stack.QueueURL, moved, podsPer)
		} else if auditLog != "" {
			res.Timeline = fleetTimeline(b, auditLog, f, ns, podsPer, floor, t0)
		}
		if err := writeReport(outDir, base, res); err != nil {
			b.Error(err)
		}
		// lifeboat's log and the audit log beside the report (the test's
		// directory goes).
		keep := map[string]string{}
		if lbs == nil {
			keep[".lifeboat.log"] = proc.LogPath
		}
		if auditLog != "" {
			keep[".audit.log"] = auditLog
		}
		for suffix, path := range keep {
			if raw, err := os.ReadFile(path); err == nil {
				_ = os.WriteFile(filepath.Join(outDir, base+suffix), raw, 0o644)
			}
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
		if res.Lifecycle {
			b.ReportMetric(res.ToCompleted.P99, "completed_p99_s")
			b.ReportMetric(res.AllCompleted, "all_completed_s")
		}
		b.ReportMetric(writes, "lifeboat_writes")
		b.ReportMetric(res.RequestsPerNode, "lifeboat_requests_per_node")
		b.ReportMetric(res.PeakRSSMiB, "peak_rss_MiB")
		if res.AllReceived > 0 {
			b.ReportMetric(res.AllReceived, "all_received_s")
		}
		if res.VsFloor != nil {
			b.ReportMetric(res.VsFloor.Cordoned, "cordoned_vs_floor_x")
			b.ReportMetric(res.VsFloor.Drained, "drained_vs_floor_x")
			if res.VsFloor.CordonedPipeline > 0 {
				b.ReportMetric(res.VsFloor.CordonedPipeline, "cordoned_vs_pipeline_floor_x")
				b.ReportMetric(res.VsFloor.DrainedPipeline, "drained_vs_pipeline_floor_x")
			}
			if res.VsFloor.CordonedWithQueue > 0 {
				b.ReportMetric(res.VsFloor.CordonedWithQueue, "cordoned_vs_floor_with_queue_x")
			}
		}
		for _, name := range f.names {
			_ = env.DeleteNode(ctx, name)
		}
	}
}

// fleet is the burst's nodes: ids[j] is the instance of node names[j]. For
// a scale-in they belong to group in sim.
type fleet struct {
	ids, names []string
	sim        *awssim.Server
	as         *autoscaling.Client
	group      string
}

// fleetLeaseDuration is the node Lease length for a fleet of n kwok nodes
// (testenv.Options.NodeLeaseDuration): the kubelet's 40 s up to 1,000
// nodes, then longer, so that the fleet renews at most 100 Leases a second
// (kwok renews each at a quarter of its length), as 1,000 nodes do at 40 s.
// At 40 s a 5,000-node fleet's 500 renewals a second fell behind on two
// cores while its pods were created; the node lifecycle controller then
// marked nodes unknown and some 400 of their 10,000 pods not Ready, and the
// set-up never finished.
func fleetLeaseDuration(n int) time.Duration {
	return max(40*time.Second, time.Duration(n)*40*time.Millisecond)
}

// plainFleet creates n kwok nodes named <prefix>-NNNN with made-up instance
// IDs, podsPer pods each.
// All nodes are created first and awaited with one list a second, then
// all pods (testenv.CreateNodes, CreatePods): awaiting each with its own
// polls spent the test client's rate limit on polls (1,000 nodes took
// 3m45s to set up).
func plainFleet(ctx context.Context, b *testing.B, env *testenv.Env, ns, prefix string, n, podsPer int) *fleet {
	f := &fleet{ids: make([]string, n), names: make([]string, n)}
	nodeSpecs := make([]testenv.NodeSpec, n)
	var podSpecs []testenv.PodSpec
	for j := range n {
		f.ids[j] = testenv.RandomInstanceID()
		f.names[j] = fleetNodeName(prefix, j)
		nodeSpecs[j] = testenv.NodeSpec{Name: f.names[j], InstanceID: f.ids[j]}
		for k := range podsPer {
			podSpecs = append(podSpecs, testenv.PodSpec{Namespace: ns, Name: podName(f.names[j], k), Node: f.names[j], Grace: -1})
		}
	}
	if err := env.CreateNodes(ctx, nodeSpecs, 32); err != nil {
		b.Fatal(err)
	}
	if err := env.CreatePods(ctx, podSpecs, 32); err != nil {
		b.Fatal(err)
	}
	return f
}

// groupFleet starts the Auto Scaling simulator and creates group with n
// instances; each becomes a kwok node with podsPer pods. It then puts a
// terminate hook with the given heartbeat timeout.
func groupFleet(ctx context.Context, b *testing.B, env *testenv.Env, moto *testenv.Moto, ns, group string, n, podsPer int, hookTimeout int32) *fleet {
	f := &fleet{group: group}
	var mu sync.Mutex
	byID := map[string]string{}
	var joinErr error
	slots := make(chan struct{}, 16) // node and pod creations at once
	sim, err := awssim.New(awssim.Options{
		MotoEndpoint: moto.Endpoint,
		OnInstanceRunning: func(_ context.Context, in awssim.Instance) {
			slots <- struct{}{}
			go func() {
				defer func() { <-slots }()
				err := createNodeWithPods(ctx, env, ns, in.PrivateDNSName, in.ID, in.AvailabilityZone, podsPer)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					joinErr = cmp.Or(joinErr, fmt.Errorf("node of %s: %w", in.ID, err))
					return
				}
				byID[in.ID] = in.PrivateDNSName
			}()
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := sim.Start(ctx, "127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sim.Close() })
	f.sim = sim
	f.as = autoscaling.NewFromConfig(testenv.MotoAWSConfig(), func(o *autoscaling.Options) { o.BaseEndpoint = aws.String(sim.Endpoint()) })
	if _, err := f.as.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String(group), MinSize: aws.Int32(0), MaxSize: aws.Int32(int32(n)), DesiredCapacity: aws.Int32(int32(n)),
		LaunchConfigurationName: aws.String("lc"),
	}); err != nil {
		b.Fatal(err)
	}
	for {
		mu.Lock()
		have, err := len(byID), joinErr
		mu.Unlock()
		if err != nil {
			b.Fatal(err)
		}
		if have == n {
			break
		}
		if ctx.Err() != nil {
			b.Fatalf("only %d of %d instances became nodes: %v", have, n, ctx.Err())
		}
		time.Sleep(100 * time.Millisecond)
	}
	for id, name := range byID {
		f.ids = append(f.ids, id)
		f.names = append(f.names, name)
	}
	if _, err := f.as.PutLifecycleHook(ctx, &autoscaling.PutLifecycleHookInput{AutoScalingGroupName: aws.String(group), LifecycleHookName: aws.String("drain"),
		LifecycleTransition: aws.String("autoscaling:EC2_INSTANCE_TERMINATING"), HeartbeatTimeout: aws.Int32(hookTimeout), DefaultResult: aws.String("ABANDON")}); err != nil {
		b.Fatal(err)
	}
	// The launches' state-change events must not queue ahead of the burst.
	if !sim.Flush(5 * time.Minute) {
		b.Fatal("the simulator's launch announcements did not reach moto within 5 minutes")
	}
	return f
}

// completed counts the fleet's terminate actions that have ended (0
// without the simulator).
func (f *fleet) completed() int {
	if f.sim == nil {
		return 0
	}
	done := 0
	for _, a := range f.sim.Actions() {
		if a.Transition == "autoscaling:EC2_INSTANCE_TERMINATING" && !a.Active() {
			done++
		}
	}
	return done
}

// actionTimes returns, by instance ID, when its terminate action started,
// when its announcement reached the queue, and when lifeboat completed it
// with CONTINUE (absent otherwise: a timeout or another result counts as
// never completed).
func (f *fleet) actionTimes() (started, announced, completed map[string]time.Time) {
	started, announced, completed = map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}
	for _, a := range f.sim.Actions() {
		if a.Transition != "autoscaling:EC2_INSTANCE_TERMINATING" {
			continue
		}
		started[a.InstanceID] = a.Started
		if !a.Announced.IsZero() {
			announced[a.InstanceID] = a.Announced
		}
		if a.CompletedBy == awssim.CompletedByAPI && a.Result == "CONTINUE" {
			completed[a.InstanceID] = a.Completed
		}
	}
	return started, announced, completed
}

func minTime(m map[string]time.Time) time.Time {
	var first time.Time
	for _, t := range m {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	return first
}

func createNodeWithPods(ctx context.Context, env *testenv.Env, ns, name, instanceID, az string, podsPer int) error {
	if _, err := env.CreateNode(ctx, testenv.NodeSpec{Name: name, InstanceID: instanceID, AZ: az}); err != nil {
		return err
	}
	for k := range podsPer {
		if _, err := env.CreatePod(ctx, testenv.PodSpec{Namespace: ns, Name: podName(name, k), Node: name, Grace: -1}); err != nil {
			return err
		}
	}
	return nil
}

// sendSpotNotices puts one Spot interruption notice per instance on the
// queue, ten per SendMessageBatch, calling sent for each as its batch
// leaves, and returns how long it took.
func sendSpotNotices(ctx context.Context, b *testing.B, endpoint, queueURL string, ids []string, sent func(j int, at time.Time)) time.Duration {
	client := sqs.NewFromConfig(testenv.MotoAWSConfig(), func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
	start := time.Now()
	for first := 0; first < len(ids); first += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		now := time.Now()
		for j := first; j < min(first+10, len(ids)); j++ {
			body := fmt.Sprintf(`{"version":"0","id":"harness-%s","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"123456789012","time":%q,"region":"us-east-1","resources":[],"detail":{"instance-id":%q,"instance-action":"terminate"}}`,
				ids[j], now.UTC().Format(time.RFC3339), ids[j])
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String(body)})
			sent(j, now)
		}
		if _, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries}); err != nil {
			b.Error(err)
			break
		}
	}
	return time.Since(start)
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
