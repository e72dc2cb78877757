package bench

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/test/testenv"
)

// BenchmarkIMDSIdleStandIn measures the CPU of idle IMDS-mode processes
// without the testbed (so without its lock): the binaries run side by
// side, in the same minutes, so that the machine's load weighs on each
// alike, each polling the same quiet metadata mock (IMDSv2 only) at the
// chart's interval (1 s) with the chart's Go settings (GOGC=50,
// GOMEMLIMIT=20MiB, GOMAXPROCS=1), and each watching its node on the
// stand-in API server of BenchmarkQueueModeMemoryStandIn (one node, an
// idle watch over HTTP/1.1; the real API server's is HTTP/2 with a ping
// every 30 s). CPU is every thread's schedstat over LIFEBOAT_BENCH_IDLE
// (default 2m), from 30 s after the process is ready, extrapolated to an
// hour. LIFEBOAT_BENCH_BINARIES (comma-separated paths) names the
// binaries, e.g. a build of an earlier commit beside this one's; by
// default it is this tree's release lifeboat-imds. Each process gets the
// kubelet's probes of the chart's DaemonSet (liveness and readiness, a
// new connection each, as the kubelet sends them), or none:
// LIFEBOAT_BENCH_PROBES, for each binary in order "chart" (the default),
// "none" or probes written out (benchProbes). Beside them run two floors
// (test/bench/idlefloor): a bare net/http client reading the same Spot
// path once a second with the same Go settings, and nothing else, with
// a 5 s timeout per read (as any poller needs) and without one; each
// binary's figure is printed with its ratio to the first.
//
//	LIFEBOAT_BENCH_IDLE=10m LIFEBOAT_BENCH_BINARIES=/tmp/lifeboat-imds.before,/tmp/lifeboat-imds.after \
//	  go test -count=1 -run '^$' -bench IMDSIdleStandIn -benchtime 1x -timeout 30m ./test/bench/
func BenchmarkIMDSIdleStandIn(b *testing.B) {
	idle := testenv.IdleTime(b, 2*time.Minute)
	dir := b.TempDir()
	var bins []string
	if v := os.Getenv("LIFEBOAT_BENCH_BINARIES"); v != "" {
		bins = strings.Split(v, ",")
	} else {
		bin, err := testenv.BuildRelease(b.Context(), testenv.Release{Pkg: "./cmd/lifeboat", Out: filepath.Join(dir, "lifeboat-imds"), Tags: []string{"imdsonly"}, Version: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		bins = []string{bin}
	}
	probes := benchProbes(b, len(bins))
	floorBin, err := testenv.BuildIdleFloor(b.Context(), dir)
	if err != nil {
		b.Fatal(err)
	}
	mock := testenv.StartIMDS(b, testenv.IMDSOptions{Scenario: testenv.IMDSQuiet, IMDSv2Only: true})
	srv := httptest.NewServer(standInAPI(b, 1))
	defer srv.Close()
	kubeconfig := standInKubeconfig(b, dir, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), idle+5*time.Minute)
	defer cancel()
	for range b.N {
		lbs := make([]*testenv.Lifeboat, len(bins))
		for k, bin := range bins {
			logs := filepath.Join(dir, strconv.Itoa(k))
			if err := os.Mkdir(logs, 0o755); err != nil {
				b.Fatal(err)
			}
			lb, err := testenv.StartLifeboat(ctx, testenv.LifeboatOptions{Bin: bin, Dir: logs, Args: []string{
				"--mode", "imds", "--node-name", memNode(0).Name, "--pod-name", "lifeboat", "--pod-namespace", "lifeboat",
				"--imds-endpoint", mock.URL, "--imds-poll-interval", "1s", "--kubeconfig", kubeconfig, "--log-level", "warn",
			}, Env: testenv.DaemonSetGoEnv})
			if err != nil {
				b.Fatalf("%s: %v", bin, err)
			}
			defer lb.Stop()
			lbs[k] = lb
		}
		waitReady(ctx, b, lbs)
		floors := []*exec.Cmd{testenv.StartIdleFloor(ctx, b, floorBin, mock.URL, "5s"), testenv.StartIdleFloor(ctx, b, floorBin, mock.URL, "0")}
		probeCtx, stopProbes := context.WithCancel(ctx)
		failed := make([]<-chan int, len(lbs))
		for k, lb := range lbs {
			failed[k] = runProbes(probeCtx, lb.URL(), probes[k])
		}
		time.Sleep(30 * time.Second)
		load0 := loadAverage(b)
		cpu0 := make([]time.Duration, len(lbs))
		for k, lb := range lbs {
			cpu0[k] = threadsCPU(b, lb.Process().Pid())
		}
		floor0 := make([]time.Duration, len(floors))
		for k, f := range floors {
			floor0[k] = threadsCPU(b, f.Process.Pid)
		}
		time.Sleep(idle)
		floorPerHour := make([]float64, len(floors))
		for k, f := range floors {
			floorPerHour[k] = (threadsCPU(b, f.Process.Pid) - floor0[k]).Seconds() / idle.Hours()
			b.ReportMetric(floorPerHour[k], fmt.Sprintf("floor-cpu-s/h-%d", k))
			fmt.Printf("floor %d (test/bench/idlefloor %s: net/http reading the Spot path once a second, nothing else), the chart's Go settings: %.2f s/h\n", k, strings.Join(f.Args[1:], " "), floorPerHour[k])
		}
		for k, lb := range lbs {
			used := threadsCPU(b, lb.Process().Pid()) - cpu0[k]
			perHour := used.Seconds() / idle.Hours()
			b.ReportMetric(perHour, fmt.Sprintf("cpu-s/h-%d", k))
			fmt.Printf("IMDS mode idle (stand-in), %s, poll 1 s, the chart's Go settings, probes %v: CPU %.3f s in %v = %.2f s/h, %.2f × floor 0\n", bins[k], probes[k], used.Seconds(), idle, perHour, perHour/floorPerHour[0])
		}
		stopProbes()
		for k := range lbs {
			n := 0
			for range probes[k] {
				n += <-failed[k]
			}
			if n > 0 {
				b.Fatalf("%s: %d of the kubelet's probes failed", bins[k], n)
			}
		}
		fmt.Printf("load average: %s at the start, %s at the end\n", load0, loadAverage(b))
	}
}

// loadAverage is the machine's 1, 5 and 15-minute load averages.
func loadAverage(b *testing.B) string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		b.Fatal(err)
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}
