package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// testConfig is the demo with shorter scaled times: a whole run takes
// about 40 s after the testbed is up.
func testConfig(t *testing.T) config {
	cfg := defaultConfig()
	cfg.OutDir = t.TempDir()
	cfg.HookTimeout = 2 * time.Second
	cfg.PodShutdown = 6 * time.Second
	cfg.BootDelay = 3 * time.Second
	return cfg
}

// TestDemo runs the whole demo, as `make demo` does (lifeboat built by the
// run itself), and checks the HTML timeline holds every step of the three
// scenes in order, and that nothing is left running or on disk.
func TestDemo(t *testing.T) {
	cfg := testConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var out bytes.Buffer
	res, err := run(ctx, cfg, &out)
	t.Logf("terminal output:\n%s", out.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	checkStopped(t, res)

	for _, want := range []string{"── 1/3  Spot interruption", "── 2/3  Scale-in", "── 3/3  Warm pool", "timeline: " + res.TimelinePath, "done in"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("terminal output lacks %q", want)
		}
	}
	if n := strings.Count(out.String(), "✓"); n < 8 {
		t.Errorf("terminal output has %d summary lines (✓), want at least 8", n)
	}

	page, err := os.ReadFile(res.TimelinePath)
	if err != nil {
		t.Fatal(err)
	}
	checkSelfContained(t, page)
	r := timelineData(t, page)
	if r.Error != "" {
		t.Errorf("timeline reports an error: %s", r.Error)
	}
	// What an operator sees: the page opened in a real browser.
	checkRendered(t, renderInBrowser(t, res.TimelinePath), r)
	if len(r.Scenes) != 3 {
		t.Fatalf("timeline has %d scenes, want 3", len(r.Scenes))
	}
	byScene := map[string][]Fact{}
	for _, f := range r.Facts {
		byScene[f.Scene] = append(byScene[f.Scene], f)
	}

	// The steps each scene must show, at least so many times.
	want := map[string]map[string]int{
		sceneSpot: {
			stepSignal: 2, stepReceived: 1, stepCordoned: 1, stepDraining: 1, stepEvicting: 4, stepRefused: 1,
			stepEvicted: 4, stepDrained: 1, stepNodeReady: 1, stepPodReady: 4, stepReplacing: 1, stepReplaced: 1,
		},
		sceneScaleIn: {
			stepSignal: 1, stepAction: 1, stepReceived: 1, stepCordoned: 1, stepEvicting: 1, stepHeartbeat: 3,
			stepEvicted: 1, stepDrained: 1, stepCompleted: 1, stepLifecycleReport: 1, stepNodeDeleted: 1,
		},
		sceneWarmPool: {
			stepSignal: 2, stepAction: 3, stepHeartbeat: 2, stepNodeReady: 1, stepCompleted: 3, stepLifecycleReport: 3,
		},
	}
	for scene, steps := range want {
		got := map[string]int{}
		for _, f := range byScene[scene] {
			got[f.Step]++
		}
		for step, n := range steps {
			if got[step] < n {
				t.Errorf("scene %s: %d %q steps, want at least %d (got %v)", scene, got[step], step, n, got)
			}
		}
		for _, bad := range []string{stepTimedOut, stepFailed, stepDeadline} {
			if got[bad] > 0 {
				t.Errorf("scene %s has %d %q steps: %v", scene, got[bad], bad, texts(byScene[scene], bad))
			}
		}
	}

	// Issue 23 item 6: worker's 300 s grace exceeds the notice, but its
	// shutdown (a 2 s preStop exec hook) takes seconds, and checkout's
	// budget frees a disruption once a replacement is Ready: the forecast's
	// worst case is only logged, never warned about (the drain makes it).
	if got := texts(byScene[sceneSpot], stepForecast); len(got) > 0 {
		t.Errorf("spot scene: DrainForecastMiss for a drain that makes it: %v", got)
	}
	// Progress counts up to the whole drain.
	if !hasFact(byScene[sceneSpot], stepEvicted, "gone 4/4") {
		t.Errorf("spot scene: no fact with progress gone 4/4: %v", texts(byScene[sceneSpot], stepEvicted))
	}
	// The real node's pods, from their own records.
	checkRealPods(t, byScene[sceneSpot], out.String())
	// Issue 25: replacement first on the timeline, the frontend's
	// replacement Ready before its old pod was evicted.
	checkFrontend(t, byScene[sceneSpot], out.String())
	// The order of the brief: signal received → cordoned → evicting →
	// heartbeat → completed, and completed only once the pod is gone.
	scaleIn := byScene[sceneScaleIn]
	order := []string{stepSignal, stepReceived, stepEvicting, stepEvicted, stepCompleted}
	for i := 1; i < len(order); i++ {
		a, b := firstAt(scaleIn, order[i-1]), firstAt(scaleIn, order[i])
		if b.Before(a.Add(-500 * time.Millisecond)) {
			t.Errorf("scale-in: %s at %v comes before %s at %v", order[i], b, order[i-1], a)
		}
	}
	if hb, c := firstAt(scaleIn, stepHeartbeat), firstAt(scaleIn, stepCompleted); !hb.Before(c) {
		t.Errorf("scale-in: first heartbeat %v not before the completion %v", hb, c)
	}
	if !hasFact(scaleIn, stepCompleted, "CONTINUE") {
		t.Errorf("scale-in: the terminate action was not completed with CONTINUE: %v", texts(scaleIn, stepCompleted))
	}
	// Warm pool: the way out completed only once the node was Ready.
	warm := byScene[sceneWarmPool]
	var out2 time.Time
	for _, f := range warm {
		if f.Step == stepCompleted && strings.Contains(f.Lane, "WarmPool→ASG") {
			out2 = f.At
		}
	}
	// Two observers: lifeboat completes on its own watch's Ready, the
	// timeline notes Ready from the demo's watch, which may see it a
	// moment later (ci16: the completion 0.25 ms "before" Ready). A
	// completion before the node booted would be seconds early (BootDelay).
	if ready := firstAt(warm, stepNodeReady); out2.IsZero() || out2.Before(ready.Add(-100*time.Millisecond)) {
		t.Errorf("warm pool: leaving the pool completed at %v, node Ready at %v", out2, ready)
	}
}

// TestDemoInterrupted cancels the run (as Ctrl-C does) during the second
// scene: the run ends with errInterrupted, stops everything, removes its
// temporary directory and still writes the timeline of what happened.
func TestDemoInterrupted(t *testing.T) {
	cfg := testConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w := &cancelOn{marker: "── 2/3", cancel: cancel}
	res, err := run(ctx, cfg, w)
	t.Logf("terminal output:\n%s", w.String())
	if !errors.Is(err, errInterrupted) {
		t.Fatalf("run returned %v, want errInterrupted", err)
	}
	if !w.fired() {
		t.Fatal("the run ended before the second scene began")
	}
	checkStopped(t, res)
	page, err := os.ReadFile(res.TimelinePath)
	if err != nil {
		t.Fatal(err)
	}
	r := timelineData(t, page)
	if r.Error == "" || len(r.Scenes) < 2 || len(r.Scenes[0].Summary) == 0 {
		t.Errorf("timeline of the interrupted run: error %q, %d scenes; want an error and the finished first scene", r.Error, len(r.Scenes))
	}
}

// checkStopped fails unless every process of the run is gone and its
// temporary directory removed.
func checkStopped(t *testing.T, res *result) {
	t.Helper()
	if len(res.ProcessGroups) < 9 {
		t.Errorf("run reports %d processes, want 9 (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, moto, lifeboat, the real node's containerd and kubelet)", len(res.ProcessGroups))
	}
	groups := map[int]bool{}
	for _, g := range res.ProcessGroups {
		groups[g] = true
	}
	if left := processesInGroups(groups); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
	}
	if _, err := os.Stat(res.TempDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary directory %s still there (stat: %v)", res.TempDir, err)
	}
	if _, err := os.Stat(res.LogPath); err != nil {
		t.Errorf("lifeboat's log: %v", err)
	}
}

var dataBlock = regexp.MustCompile(`(?s)<script type="application/json" id="timeline-data">(.*?)</script>`)

func timelineData(t *testing.T, page []byte) report {
	t.Helper()
	m := dataBlock.FindSubmatch(page)
	if m == nil {
		t.Fatal("timeline has no data block")
	}
	var r report
	if err := json.Unmarshal(m[1], &r); err != nil {
		t.Fatalf("timeline data: %v", err)
	}
	return r
}

// checkSelfContained fails on anything the page would fetch.
func checkSelfContained(t *testing.T, page []byte) {
	t.Helper()
	s := strings.ReplaceAll(string(page), `xmlns="http://www.w3.org/2000/svg"`, "")
	for _, bad := range []string{"http://", "https://", "<link", " src=", "@import", "url("} {
		if strings.Contains(s, bad) {
			t.Errorf("timeline is not self-contained: it contains %q", bad)
		}
	}
	if n := strings.Count(s, "<svg "); n != 3 {
		t.Errorf("timeline has %d inline SVGs, want 3", n)
	}
}

func firstAt(facts []Fact, step string) time.Time {
	for _, f := range facts {
		if f.Step == step {
			return f.At
		}
	}
	return time.Time{}
}

func hasFact(facts []Fact, step, substr string) bool {
	for _, f := range facts {
		if f.Step == step && (strings.Contains(f.Text, substr) || strings.Contains(f.Progress, substr)) {
			return true
		}
	}
	return false
}

func texts(facts []Fact, step string) []string {
	var out []string
	for _, f := range facts {
		if f.Step == step {
			out = append(out, f.Text+" "+f.Progress)
		}
	}
	return out
}

// cancelOn is a terminal that cancels the run once marker was printed.
type cancelOn struct {
	marker string
	cancel context.CancelFunc

	mu   sync.Mutex
	buf  bytes.Buffer
	done bool
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if !c.done && strings.Contains(c.buf.String(), c.marker) {
		c.done = true
		c.cancel()
	}
	return len(p), nil
}

func (c *cancelOn) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

func (c *cancelOn) fired() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}
