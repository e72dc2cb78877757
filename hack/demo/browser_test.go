package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium is Debian's browser, installed by `make deps`
// (hack/debian-deps.sh, DEBIAN_PACKAGES in the Makefile).
const chromium = "/usr/bin/chromium"

// renderedScene is what the browser drew of one scene (see sceneJS).
type renderedScene struct {
	Scene     string         `json:"scene"`
	Title     string         `json:"title"`
	Lanes     []renderedLane `json:"lanes"`
	Deadlines int            `json:"deadlines"`
	// WorkloadNote is whether the legend saying that the workload markers
	// come from the real process's own record is shown.
	WorkloadNote bool `json:"workloadNote"`
}

type renderedLane struct {
	Name      string `json:"name"`
	Label     string `json:"label"`
	Bars      int    `json:"bars"`
	Shutdowns int    `json:"shutdowns"`
	Timeouts  int    `json:"timeouts"`
	Markers   int    `json:"markers"`
	// Workload counts the markers taken from a workload's own record.
	Workload int `json:"workload"`
	Width    int `json:"width"`
}

// sceneJS collects, for every scene, the rows and bars the browser laid
// out with a non-empty box: what a reader of the page sees.
const sceneJS = `(() => {
  const shown = el => { if (!el) return false; const r = el.getBoundingClientRect(); return r.width > 0 || r.height > 0; }; // a horizontal line has no height
  const count = (root, sel) => Array.from(root.querySelectorAll(sel)).filter(shown).length;
  return Array.from(document.querySelectorAll('section.scene')).map(sec => ({
    scene: sec.dataset.scene,
    title: shown(sec.querySelector('h2')) ? sec.querySelector('h2').innerText : '',
    deadlines: count(sec, 'g.deadline'),
    workloadNote: shown(document.querySelector('p.workload-note')) && /from the real process itself/.test(document.querySelector('p.workload-note').innerText),
    lanes: Array.from(sec.querySelectorAll('g.lane')).filter(shown).map(g => ({
      name: g.dataset.lane,
      label: shown(g.querySelector('text.lane-name')) ? g.querySelector('text.lane-name').textContent : '',
      bars: count(g, 'rect.bar'),
      shutdowns: count(g, 'g.shutdown rect'),
      timeouts: count(g, 'g.timeout line'),
      markers: count(g, 'g.fact'),
      workload: count(g, 'g.fact[data-source=workload]'),
      width: Math.round(g.getBoundingClientRect().width),
    })),
  }));
})()`

// renderInBrowser opens the page in a headless Chromium and returns what
// it laid out. A missing browser fails the test, naming the fix.
func renderInBrowser(t *testing.T, path string) []renderedScene {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("the demo page test needs Chromium at %s (%v): run `make deps`, which installs Debian's chromium package", chromium, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc() // stops the browser and waits for it
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	if err := chromedp.Do(bctx, chromedp.Navigate("file://"+abs), chromedp.WaitReady("body")); err != nil {
		t.Fatalf("opening %s in %s: %v", path, chromium, err)
	}
	scenes, err := chromedp.Run(bctx, chromedp.Evaluate[[]renderedScene](sceneJS))
	if err != nil {
		t.Fatalf("reading the page %s in %s: %v", path, chromium, err)
	}
	return scenes
}

// checkRendered fails unless the browser drew every scene of r: its title,
// a visible row for every object with its name, the life bars, each
// evicted pod's shutdown, each lifecycle timeout and AWS's deadlines.
func checkRendered(t reporter, got []renderedScene, r report) {
	t.Helper()
	if len(got) != len(r.Scenes) {
		t.Errorf("the browser shows %d scenes, the report has %d", len(got), len(r.Scenes))
		return
	}
	for i, s := range r.Scenes {
		g := got[i]
		if g.Scene != s.Name || !strings.Contains(g.Title, s.Title[:min(len(s.Title), 30)]) {
			t.Errorf("scene %d: shown as %q (%q), want %s (%q)", i+1, g.Scene, g.Title, s.Name, s.Title)
		}
		lanes := map[string]renderedLane{}
		for _, l := range g.Lanes {
			lanes[l.Name] = l
		}
		bars := 0
		for _, l := range g.Lanes {
			bars += l.Bars
		}
		if bars == 0 {
			t.Errorf("scene %s: no timing bar is drawn", s.Name)
		}
		if g.Deadlines != len(s.Deadlines) {
			t.Errorf("scene %s: %d deadlines drawn, want %d", s.Name, g.Deadlines, len(s.Deadlines))
		}
		want := map[string]*renderedLane{}
		for _, f := range r.Facts {
			if f.Scene != s.Name {
				continue
			}
			w, ok := want[f.Lane]
			if !ok {
				w = &renderedLane{Name: f.Lane}
				want[f.Lane] = w
			}
			w.Markers++
			if f.Source == srcWorkload {
				w.Workload++
				if !g.WorkloadNote {
					t.Errorf("scene %s: the page shows facts from a workload's record but not the legend saying they come from the real process", s.Name)
				}
			}
			if f.Step == stepEvicted {
				w.Shutdowns = 1
			}
			if !f.Until.IsZero() {
				w.Timeouts += 2 // the dashed line and its end tick
			}
		}
		for name, w := range want {
			l, ok := lanes[name]
			switch {
			case !ok:
				t.Errorf("scene %s: no visible row for %q", s.Name, name)
				continue
			case l.Label == "" || !strings.HasPrefix(name, strings.TrimSuffix(l.Label, "…")):
				t.Errorf("scene %s: row %q is labelled %q", s.Name, name, l.Label)
			case l.Markers != w.Markers:
				t.Errorf("scene %s, row %q: %d markers visible, want %d", s.Name, name, l.Markers, w.Markers)
			case l.Workload != w.Workload:
				t.Errorf("scene %s, row %q: %d markers from the workload's own record visible, want %d", s.Name, name, l.Workload, w.Workload)
			case l.Shutdowns < w.Shutdowns:
				t.Errorf("scene %s, row %q: the pod's shutdown (preStop, SIGTERM, exit) is not drawn", s.Name, name)
			case l.Timeouts != w.Timeouts:
				t.Errorf("scene %s, row %q: %d timeout lines visible, want %d", s.Name, name, l.Timeouts, w.Timeouts)
			}
		}
	}
}

// TestTimelineInBrowser renders a timeline of all three scenes (made up,
// no testbed) in the real browser. TestDemo does the same with the page
// of a real run.
func TestTimelineInBrowser(t *testing.T) {
	r := sampleReport(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "demo-timeline.html")
	if err := writeHTML(path, r); err != nil {
		t.Fatal(err)
	}
	checkRendered(t, renderInBrowser(t, path), r)
}

// A page without its rows fails the check: the test sees what is drawn,
// not what the file says.
func TestTimelineCheckFailsOnHiddenRows(t *testing.T) {
	r := sampleReport(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "demo-timeline.html")
	if err := writeHTML(path, r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hidden := strings.Replace(string(b), "</style>", "g.lane[data-source=pod] { display: none; }\n</style>", 1)
	if err := os.WriteFile(path, []byte(hidden), 0o644); err != nil {
		t.Fatal(err)
	}
	got := renderInBrowser(t, path)
	rec := &failures{}
	checkRendered(rec, got, r)
	if len(rec.msgs) == 0 {
		t.Error("checkRendered passed a page whose pod rows are hidden")
	}
}

// A page whose markers from the workloads' records are not drawn, or
// whose legend does not say where they come from, fails the check.
func TestTimelineCheckFailsOnHiddenWorkloadFacts(t *testing.T) {
	r := sampleReport(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	for _, hide := range []string{"g.fact[data-source=workload]", "p.workload-note"} {
		path := filepath.Join(t.TempDir(), "demo-timeline.html")
		if err := writeHTML(path, r); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		hidden := strings.Replace(string(b), "</style>", hide+" { display: none; }\n</style>", 1)
		if err := os.WriteFile(path, []byte(hidden), 0o644); err != nil {
			t.Fatal(err)
		}
		rec := &failures{}
		checkRendered(rec, renderInBrowser(t, path), r)
		if len(rec.msgs) == 0 {
			t.Errorf("checkRendered passed a page with %s hidden", hide)
		}
	}
}

// sampleReport is a run of the three scenes as the demo records it.
func sampleReport(t0 time.Time) report {
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	r := report{Generated: t0, HookTimeout: "2s", PodShutdown: "6s", BootDelay: "3s"}
	r.Scenes = []*sceneState{
		{Name: sceneSpot, Title: "Spot interruption: node a (i-0a) runs 2 pods to move", Start: t0, End: at(20),
			Summary: []string{"drained in 18s"}, Deadlines: []deadline{{At: at(120), Label: "AWS takes the instance (notice + 2m0s)"}}},
		{Name: sceneScaleIn, Title: "Scale-in: batch goes from 1 to 0", Start: at(30), End: at(45), Summary: []string{"completed CONTINUE"}},
		{Name: sceneWarmPool, Title: "Warm pool: an instance joins", Start: at(50), End: at(60), Summary: []string{"launched"}},
	}
	add := func(scene, source, step, lane string, s float64, until float64) {
		f := Fact{At: at(s), Scene: scene, Source: source, Step: step, Lane: lane, Text: step + " of " + lane, Label: step}
		if until > 0 {
			f.Until = at(until)
		}
		r.Facts = append(r.Facts, f)
	}
	add(sceneSpot, srcAWS, stepSignal, "EventBridge", 0.1, 0)
	add(sceneSpot, srcLifeboat, stepReceived, "lifeboat node a", 0.5, 0)
	add(sceneSpot, srcLifeboat, stepDrained, "lifeboat node a", 18, 0)
	add(sceneSpot, srcNode, stepCordoned, "node a", 0.6, 0)
	add(sceneSpot, srcNode, stepNodeDeleted, "node a", 19, 0)
	for i, p := range []string{"pod shop/web-1", "pod shop/checkout-1"} {
		add(sceneSpot, srcPod, stepEvicting, p, 1+float64(i)*5, 0)
		add(sceneSpot, srcPod, stepEvicted, p, 4+float64(i)*5, 0)
	}
	// A real pod's own record: preStop, SIGTERM, exit.
	for i, step := range []string{stepPreStopBegin, stepPreStopEnd, stepSIGTERM, stepExit} {
		add(sceneSpot, srcWorkload, step, "pod shop/checkout-1", 6.1+float64(i)*0.9, 0)
	}
	lane := "terminate hook i-0b"
	add(sceneScaleIn, srcAWS, stepSignal, "Auto Scaling API", 30, 0)
	add(sceneScaleIn, srcASG, stepAction, lane, 30.5, 32.5)
	for s := 31.5; s < 43; s += 1 {
		add(sceneScaleIn, srcASG, stepHeartbeat, lane, s, s+2)
	}
	add(sceneScaleIn, srcASG, stepCompleted, lane, 43.5, 0)
	add(sceneScaleIn, srcPod, stepEvicting, "pod batch/report-job", 31, 0)
	add(sceneScaleIn, srcPod, stepEvicted, "pod batch/report-job", 43, 0)
	add(sceneWarmPool, srcAWS, stepSignal, "Auto Scaling API", 50, 0)
	add(sceneWarmPool, srcASG, stepAction, "launch hook i-0c WarmPool→ASG", 51, 53)
	add(sceneWarmPool, srcASG, stepCompleted, "launch hook i-0c WarmPool→ASG", 57, 0)
	add(sceneWarmPool, srcNode, stepNodeJoined, "node c", 54, 0)
	add(sceneWarmPool, srcNode, stepNodeReady, "node c", 56, 0)
	return r
}

// reporter is the part of testing.T checkRendered uses.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

// failures records what checkRendered reports, without failing the test.
type failures struct{ msgs []string }

func (f *failures) Helper() {}
func (f *failures) Errorf(format string, args ...any) {
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
}
