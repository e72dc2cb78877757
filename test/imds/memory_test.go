package imds

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	imdssrc "lifeboat.dev/lifeboat/internal/source/imds"
	"lifeboat.dev/lifeboat/test/testenv"
)

// BenchmarkIMDSMemory measures what IMDS mode costs a node while idle: the
// release build (the Makefile's flags, stripped) of each binary that can
// run IMDS mode, polling a quiet metadata mock at the chart's default
// interval (1 s) against the real API server, for LIFEBOAT_BENCH_IDLE
// (default 90 s) after it is ready. It prints the binary's size, VmRSS,
// VmHWM, the file-backed and anonymous parts of the RSS, the Go heap in
// use and the CPU time (every thread's schedstat), extrapolated to an hour. The binaries run one after
// another in the same run, so the figures compare. LIFEBOAT_BENCH_BINARIES
// (comma-separated paths) runs given binaries instead, e.g. a build of an
// earlier commit beside this one's. LIFEBOAT_BENCH_GOENV (comma-separated
// NAME=value, e.g. GOGC=50,GOMEMLIMIT=20MiB) runs each binary a second
// time with that environment; with LIFEBOAT_BENCH_GOENV_ONLY=1 only with it
// (the chart's DaemonSet alone, e.g. for a 10-minute run of two builds).
//
//	flock /tmp/lifeboat-testbed.lock go test -count=1 -p 1 ./test/imds -run '^$' -bench IMDSMemory -benchtime 1x
//	LIFEBOAT_BENCH_IDLE=10m ... (the 10 minutes)
func BenchmarkIMDSMemory(b *testing.B) {
	idle := testenv.IdleTime(b, 90*time.Second)
	var bins []string
	if v := os.Getenv("LIFEBOAT_BENCH_BINARIES"); v != "" {
		bins = strings.Split(v, ",")
	} else {
		for _, pkg := range imdsBinaries {
			bins = append(bins, releaseBinary(b, pkg))
		}
	}
	envs := [][]string{nil}
	if v := os.Getenv("LIFEBOAT_BENCH_GOENV"); v != "" {
		envs = append(envs, strings.Split(v, ","))
		if os.Getenv("LIFEBOAT_BENCH_GOENV_ONLY") == "1" {
			envs = envs[1:]
		}
	}
	for _, bin := range bins {
		for _, env := range envs {
			name := filepath.Base(bin)
			if env != nil {
				name += "/" + strings.Join(env, ",")
			}
			b.Run(name, func(b *testing.B) {
				for range b.N {
					benchIMDSMemory(b, bin, env, idle)
				}
			})
		}
	}
}

// imdsBinaries are the packages whose binary runs IMDS mode.
var imdsBinaries = []string{"./cmd/lifeboat"}

func benchIMDSMemory(b *testing.B, bin string, env []string, idle time.Duration) {
	fi, err := os.Stat(bin)
	if err != nil {
		b.Fatal(err)
	}
	w := newWorld(b, worldOptions{
		imds: testenv.IMDSOptions{Scenario: testenv.IMDSQuiet, IMDSv2Only: true},
		poll: time.Second, bin: bin, env: env, flags: []string{"--log-level", "info"},
		life: idle + 4*time.Minute, // the default 4 min ended a 10-minute run before its metrics were read
	})
	w.eventually(30*time.Second, "ready", func() bool { return w.readyz() == 200 })
	ready := time.Since(w.started)
	// The first poll: the process's first read of a signal path (the
	// proxy records when each path is first asked for).
	firstPoll, ok := w.proxy.served(imdssrc.PathSpot)
	if !ok {
		b.Fatal("ready, but the metadata was never polled")
	}
	toPoll := firstPoll.Sub(w.started)
	pid := w.lb.Process().Pid()
	cpu0, err := testenv.ProcessCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(idle)
	cpu1, err := testenv.ProcessCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	heap := w.metric("go_memstats_heap_inuse_bytes")
	st, err := procStatus(pid)
	if err != nil {
		b.Fatal(err)
	}
	cpuPerHour := (cpu1 - cpu0).Seconds() / idle.Hours()
	b.ReportMetric(float64(st["VmRSS"])/(1<<10), "rss-MiB")
	b.ReportMetric(float64(st["VmHWM"])/(1<<10), "hwm-MiB")
	b.ReportMetric(float64(st["RssFile"])/(1<<10), "rss-file-MiB")
	b.ReportMetric(float64(st["RssAnon"])/(1<<10), "rss-anon-MiB")
	b.ReportMetric(heap/(1<<20), "heap-inuse-MiB")
	b.ReportMetric(cpuPerHour, "cpu-s/h")
	b.ReportMetric(float64(fi.Size())/1e6, "binary-MB")
	b.ReportMetric(float64(toPoll.Milliseconds()), "start-to-poll-ms")
	fmt.Printf("%s %v: process start → first metadata poll %v, → ready %v\n", filepath.Base(bin), env, toPoll.Round(time.Millisecond), ready.Round(time.Millisecond))
	fmt.Printf("IMDS mode idle, %s %v (%.1f MB stripped), poll 1 s, %v: VmRSS %.1f MiB, VmHWM %.1f MiB (file-backed %.1f MiB, anonymous %.1f MiB), Go heap in use %.1f MiB, CPU %.3f s in %v = %.1f s/h\n",
		filepath.Base(bin), env, float64(fi.Size())/1e6, idle, mib(st["VmRSS"]), mib(st["VmHWM"]), mib(st["RssFile"]), mib(st["RssAnon"]),
		heap/(1<<20), (cpu1 - cpu0).Seconds(), idle, cpuPerHour)
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

// releaseBinary builds pkg with the Makefile's release flags (stripped)
// and returns its path.
func releaseBinary(b *testing.B, pkg string) string {
	b.Helper()
	bin, err := testenv.BuildRelease(b.Context(), testenv.Release{Pkg: pkg, Out: filepath.Join(b.TempDir(), filepath.Base(pkg)), Version: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	return bin
}

// procStatus returns the kB fields of /proc/PID/status (VmRSS, VmHWM,
// RssAnon, RssFile…) in KiB.
func procStatus(pid int) (map[string]int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		v, isKB := strings.CutSuffix(strings.TrimSpace(v), " kB")
		if !ok || !isKB {
			continue
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, sc.Err()
}
