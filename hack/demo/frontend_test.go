package main

import (
	"strings"
	"testing"
	"time"
)

// checkFrontend fails unless the Spot scene shows replacement first for
// the frontend Deployment: lifeboat's ReplacementStarted, then the new
// pod Ready on another node, ReplacementReady, and only then the old
// pod's eviction, whose real process (from its own record) began its
// preStop hook after the new pod was Ready and shut down to its end.
func checkFrontend(t reporter, facts []Fact, terminal string) {
	t.Helper()
	const prefix = "pod " + frontend + "-"
	var old, repl string
	for _, f := range facts {
		if !strings.HasPrefix(f.Lane, prefix) {
			continue
		}
		switch f.Step {
		case stepEvicting:
			old = f.Lane
		case stepPodReady:
			repl = f.Lane
		}
	}
	if old == "" || repl == "" || old == repl {
		t.Errorf("frontend: old pod %q evicted, replacement %q Ready: want two pods (facts: %v)", old, repl, laneFacts(facts, prefix))
		return
	}
	at := func(step, lane string) time.Time {
		var found []time.Time
		for _, f := range facts {
			if f.Step == step && (lane == "" || f.Lane == lane) {
				found = append(found, f.At)
			}
		}
		if len(found) != 1 {
			t.Errorf("frontend: %d %s facts in %q, want 1", len(found), step, lane)
			return time.Time{}
		}
		return found[0]
	}
	for _, step := range []string{stepReplacing, stepReplaced} {
		for _, f := range facts {
			if f.Step == step && !strings.Contains(f.Text, "deployment "+nsShop+"/"+frontend) {
				t.Errorf("frontend: %s fact %q does not name the Deployment", step, f.Text)
			}
		}
	}
	// The demo sees lifeboat's Events and the pods through watches, the
	// kubelet runs the hook through its own: a little skew between them.
	const skew = 500 * time.Millisecond
	started, ready, replaced := at(stepReplacing, ""), at(stepPodReady, repl), at(stepReplaced, "")
	evicting, preStop := at(stepEvicting, old), at(stepPreStopBegin, old)
	at(stepExit, old)
	if n := len(laneFacts(facts, old+"\x00"+stepCutOff)); n > 0 {
		t.Errorf("frontend: the old pod's process was cut off")
	}
	order := []struct {
		a, b   string
		ta, tb time.Time
		skew   time.Duration
	}{
		{"ReplacementStarted", "the replacement Ready", started, ready, 0},
		{"the replacement Ready", "ReplacementReady", ready, replaced, skew},
		// The point of it all: no moment without a ready replica.
		{"the replacement Ready", "the old pod's eviction", ready, evicting, 0},
		{"the replacement Ready", "the old pod's preStop (its own record)", ready, preStop, 0},
	}
	for _, o := range order {
		if o.ta.IsZero() || o.tb.IsZero() || !o.tb.After(o.ta.Add(-o.skew)) {
			t.Errorf("frontend: %s at %s is not after %s at %s", o.b, o.tb.Format(time.StampMilli), o.a, o.ta.Format(time.StampMilli))
		}
	}
	if !strings.Contains(terminal, "frontend: its replacement "+strings.TrimPrefix(repl, "pod ")+" was Ready on ") ||
		!strings.Contains(terminal, "never 0 ready replicas") {
		t.Errorf("terminal output has no summary of frontend's replacement")
	}
}

// laneFacts returns the texts of facts whose lane has prefix, or, for
// "lane\x00step", of that step in that lane.
func laneFacts(facts []Fact, key string) []string {
	lane, step, exact := strings.Cut(key, "\x00")
	var out []string
	for _, f := range facts {
		if exact && f.Lane == lane && f.Step == step || !exact && strings.HasPrefix(f.Lane, lane) {
			out = append(out, f.Step+" "+f.Text)
		}
	}
	return out
}

// sampleFrontendFacts is what the Spot scene records of the frontend when
// its replacement comes first.
func sampleFrontendFacts(t0 time.Time) ([]Fact, string) {
	old, repl := "pod frontend-5d8f7c9b4-abcde", "pod frontend-6c7d8e9f5-fghij"
	f := func(after time.Duration, source, step, lane, text string) Fact {
		return Fact{At: t0.Add(after), Scene: sceneSpot, Source: source, Step: step, Lane: lane, Text: text}
	}
	facts := []Fact{
		f(300*time.Millisecond, srcLifeboat, stepReplacing, "lifeboat", "ReplacementStarted: deployment shop/frontend: waiting"),
		f(400*time.Millisecond, srcPod, stepPodCreated, repl, "created, Pending"),
		f(5*time.Second, srcPod, stepPodReady, repl, "Running and Ready"),
		f(5500*time.Millisecond, srcLifeboat, stepReplaced, "lifeboat", "ReplacementReady: deployment shop/frontend: 1 new pod(s) Ready"),
		f(5600*time.Millisecond, srcPod, stepEvicting, old, "evicted: terminating"),
		f(5700*time.Millisecond, srcWorkload, stepPreStopBegin, old, "recorded: preStop hook began"),
		f(7700*time.Millisecond, srcWorkload, stepPreStopEnd, old, "recorded: preStop hook ended"),
		f(7710*time.Millisecond, srcWorkload, stepSIGTERM, old, "recorded: SIGTERM"),
		f(9710*time.Millisecond, srcWorkload, stepExit, old, "recorded: exit"),
		f(10*time.Second, srcPod, stepEvicted, old, "gone"),
	}
	return facts, "✓ frontend: its replacement frontend-6c7d8e9f5-fghij was Ready on ip-10-1-2-3 600ms before the old pod's eviction (evicted by lifeboat after ReplacementReady): never 0 ready replicas\n"
}

// checkFrontend passes replacement first and fails an eviction before the
// replacement was Ready, a missing ReplacementReady, and a cut-off process.
func TestCheckFrontend(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	facts, terminal := sampleFrontendFacts(t0)
	ok := &failures{}
	checkFrontend(ok, facts, terminal)
	if len(ok.msgs) > 0 {
		t.Fatalf("replacement first fails the check: %v", ok.msgs)
	}
	for name, edit := range map[string]func([]Fact) []Fact{
		"evicted before the replacement was Ready": func(fs []Fact) []Fact {
			for i := range fs {
				if fs[i].Step == stepPodReady {
					fs[i].At = fs[i].At.Add(10 * time.Second)
				}
			}
			return fs
		},
		"no ReplacementReady": func(fs []Fact) []Fact {
			var out []Fact
			for _, f := range fs {
				if f.Step != stepReplaced {
					out = append(out, f)
				}
			}
			return out
		},
		"cut off": func(fs []Fact) []Fact {
			for i := range fs {
				if fs[i].Step == stepExit {
					fs[i].Step = stepCutOff
				}
			}
			return fs
		},
	} {
		facts, terminal := sampleFrontendFacts(t0)
		got := &failures{}
		checkFrontend(got, edit(facts), terminal)
		if len(got.msgs) == 0 {
			t.Errorf("%s: checkFrontend passed", name)
		}
	}
}
