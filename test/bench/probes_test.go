package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"lifeboat.dev/lifeboat/test/testenv"
)

// probe is one of the kubelet's HTTP probes of a container: a GET of path
// every period.
type probe struct {
	path   string
	period time.Duration
}

func (p probe) String() string { return fmt.Sprintf("%s every %v", p.path, p.period) }

// chartProbes are the IMDS-mode DaemonSet's liveness and readiness probes
// as the chart renders them at its defaults.
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
				probes = append(probes, probe{path: p.HTTPGet.Path, period: time.Duration(period) * time.Second})
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
// chart's before issue 28, for a comparison in one run).
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
// as the kubelet's prober does: each probe first after a random part of
// its period (the kubelet's probe workers start so, which keeps a pod's
// probes apart), then every period, a new connection for each GET (its
// transport disables keep-alives), the body read and the connection
// closed. It returns how many probes failed, once ctx has ended.
func runProbes(ctx context.Context, base string, probes []probe) <-chan int {
	failed := make(chan int, len(probes))
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true}}
	for _, p := range probes {
		go func() {
			n := 0
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
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+p.path, nil)
				req.Header.Set("User-Agent", "kube-probe/1.34")
				req.Header.Set("Accept", "*/*")
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						n++
					}
					continue
				}
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
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
	if len(chart) != 2 || chart[0] != (probe{"/healthz", 10 * time.Second}) || chart[1] != (probe{"/readyz", 5 * time.Second}) {
		t.Errorf("the chart's probes %v, want /healthz every 10s and /readyz every 5s (update this test and docs/benchmarks.md with the chart)", chart)
	}
	t.Setenv("LIFEBOAT_BENCH_PROBES", "chart,none,/healthz@100ms+/readyz@2s")
	got := benchProbes(t, 3)
	want := [][]probe{chart, nil, {{"/healthz", 100 * time.Millisecond}, {"/readyz", 2 * time.Second}}}
	for k := range want {
		if fmt.Sprint(got[k]) != fmt.Sprint(want[k]) {
			t.Errorf("process %d: %v, want %v", k, got[k], want[k])
		}
	}
}
