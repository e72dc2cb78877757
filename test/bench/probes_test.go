package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"lifeboat.dev/lifeboat/test/testenv"
)

// probe is one of the kubelet's HTTP probes of a container: a GET of path
// every period; a startup probe only until it first answers 200, and the
// others only from then on (as the kubelet runs them).
type probe struct {
	path    string
	period  time.Duration
	startup bool
}

func (p probe) String() string {
	if p.startup {
		return fmt.Sprintf("%s every %v until ready", p.path, p.period)
	}
	return fmt.Sprintf("%s every %v", p.path, p.period)
}

// chartProbes are the IMDS-mode DaemonSet's startup, liveness and readiness
// probes as the chart renders them at its defaults.
func chartProbes(b testing.TB) []probe {
	b.Helper()
	r, err := testenv.RenderChart("lifeboat", "lifeboat", map[string]any{"mode": "imds"})
	if err != nil {
		b.Fatal(err)
	}
	var probes []probe
	for _, obj := range r.Objects {
		if obj.GetKind() != "DaemonSet" {
			continue
		}
		var ds appsv1.DaemonSet
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &ds); err != nil {
			b.Fatal(err)
		}
		for _, c := range ds.Spec.Template.Spec.Containers {
			for _, kp := range []struct {
				kind string
				p    *corev1.Probe
			}{{"liveness", c.LivenessProbe}, {"readiness", c.ReadinessProbe}, {"startup", c.StartupProbe}} {
				kind, p := kp.kind, kp.p
				if p == nil {
					continue
				}
				if p.HTTPGet == nil {
					b.Fatalf("the chart's %s probe is not an HTTP GET: %+v", kind, p)
				}
				period := p.PeriodSeconds
				if period == 0 {
					period = 10 // the kubelet's default periodSeconds
				}
				probes = append(probes, probe{path: p.HTTPGet.Path, period: time.Duration(period) * time.Second, startup: kind == "startup"})
			}
		}
	}
	if len(probes) == 0 {
		b.Fatal("the chart's DaemonSet has no probes")
	}
	return probes
}

// benchProbes is, for each of n processes, the probes to send it:
// LIFEBOAT_BENCH_PROBES, comma-separated and in the order of the
// binaries, "chart" (the chart's, the default), "none", or probes written
// out as path@period joined by "+" ("/healthz@10s+/readyz@5s": the
// chart's before session 26, for a comparison in one run).
func benchProbes(b testing.TB, n int) [][]probe {
	b.Helper()
	kinds := make([]string, n)
	for k := range kinds {
		kinds[k] = "chart"
	}
	if v := os.Getenv("LIFEBOAT_BENCH_PROBES"); v != "" {
		given := strings.Split(v, ",")
		if len(given) != n {
			b.Fatalf("LIFEBOAT_BENCH_PROBES names %d processes' probes, there are %d binaries", len(given), n)
		}
		kinds = given
	}
	out := make([][]probe, n)
	for k, kind := range kinds {
		switch kind {
		case "chart":
			out[k] = chartProbes(b)
		case "none":
		default:
			for _, one := range strings.Split(kind, "+") {
				path, period, ok := strings.Cut(one, "@")
				d, err := time.ParseDuration(period)
				if !ok || !strings.HasPrefix(path, "/") || err != nil || d <= 0 {
					b.Fatalf("LIFEBOAT_BENCH_PROBES: %q is not chart, none or path@period[+path@period...]", kind)
				}
				out[k] = append(out[k], probe{path: path, period: d})
			}
		}
	}
	return out
}

// runProbes sends the probes to base (http://host:port) until ctx ends,
// as the kubelet's prober does: the startup probes first, each every
// period until it answers 200; then the others, each first after a random
// part of its period (the kubelet's probe workers start so, which keeps a
// pod's probes apart), then every period, a new connection for each GET
// (its transport disables keep-alives), the body read and the connection
// closed. It returns how many probes failed, once ctx has ended (one
// count for each probe; a startup probe's failures before its 200 are not
// counted: the kubelet allows them).
func runProbes(ctx context.Context, base string, probes []probe) <-chan int {
	failed := make(chan int, len(probes))
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true}}
	get := func(path string) bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		req.Header.Set("User-Agent", "kube-probe/1.34")
		req.Header.Set("Accept", "*/*")
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	started := make(chan struct{})
	go func() {
		ready := true
		for _, p := range probes {
			if !p.startup {
				continue
			}
			for ready && !get(p.path) {
				select {
				case <-ctx.Done():
					ready = false // never ready: one failure
				case <-time.After(p.period):
				}
			}
			if ready {
				failed <- 0
			} else {
				failed <- 1
			}
		}
		if ready {
			close(started)
		}
	}()
	for _, p := range probes {
		if p.startup {
			continue
		}
		go func() {
			n := 0
			select {
			case <-ctx.Done():
				failed <- n
				return
			case <-started:
			}
			select {
			case <-ctx.Done():
				failed <- n
				return
			case <-time.After(time.Duration(rand.Int64N(int64(p.period)))):
			}
			t := time.NewTicker(p.period)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					failed <- n
					return
				case <-t.C:
				}
				if !get(p.path) && ctx.Err() == nil {
					n++
				}
			}
		}()
	}
	return failed
}

// The probes the stand-in sends: the chart's as rendered, none, or
// written out; anything else is refused.
func TestBenchProbes(t *testing.T) {
	chart := chartProbes(t)
	want := []probe{{"/healthz", 20 * time.Second, false}, {"/readyz", 15 * time.Second, false}, {"/readyz", time.Second, true}}
	if fmt.Sprint(chart) != fmt.Sprint(want) {
		t.Errorf("the chart's probes %v, want %v (update this test and docs/benchmarks.md with the chart)", chart, want)
	}
	t.Setenv("LIFEBOAT_BENCH_PROBES", "chart,none,/healthz@100ms+/readyz@2s")
	got := benchProbes(t, 3)
	wantAll := [][]probe{chart, nil, {{"/healthz", 100 * time.Millisecond, false}, {"/readyz", 2 * time.Second, false}}}
	for k := range wantAll {
		if fmt.Sprint(got[k]) != fmt.Sprint(wantAll[k]) {
			t.Errorf("process %d: %v, want %v", k, got[k], wantAll[k])
		}
	}
}

// runProbes runs a startup probe until it answers, then the others; a
// process never ready counts one failure and gets no other probe.
func TestRunProbes(t *testing.T) {
	for _, tc := range []struct {
		name        string
		readyAfter  int // startup probes answered 503 before the first 200; -1: never
		wantFailed  int
		wantHealthz bool
	}{
		{"ready at once", 0, 0, true},
		{"ready at the third", 2, 0, true},
		{"never ready", -1, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var readyz, healthz int
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				switch r.URL.Path {
				case "/readyz":
					readyz++
					if tc.readyAfter < 0 || readyz <= tc.readyAfter {
						w.WriteHeader(http.StatusServiceUnavailable)
					}
				case "/healthz":
					healthz++
				}
			}))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			probes := []probe{{"/readyz", 10 * time.Millisecond, true}, {"/healthz", 5 * time.Millisecond, false}}
			failed := runProbes(ctx, srv.URL, probes)
			n := 0
			for range probes {
				n += <-failed
			}
			mu.Lock()
			defer mu.Unlock()
			if n != tc.wantFailed {
				t.Errorf("%d failed, want %d", n, tc.wantFailed)
			}
			if tc.readyAfter >= 0 && readyz != tc.readyAfter+1 {
				t.Errorf("/readyz probed %d times, want %d (until its first 200, then never)", readyz, tc.readyAfter+1)
			}
			if (healthz > 0) != tc.wantHealthz {
				t.Errorf("/healthz probed %d times; want probed: %v", healthz, tc.wantHealthz)
			}
		})
	}
}
