package main

import (
	"strings"
	"testing"
	"time"
)

// checkRealPods fails unless each pod the Spot scene evicted from its real
// node shows, on its row and taken from its own record, a preStop hook that
// began after the eviction and ran to its end, then SIGTERM, then an exit
// by itself before the pod was gone; and nothing cut off.
func checkRealPods(t reporter, facts []Fact, terminal string) {
	t.Helper()
	for _, p := range realPods() {
		failed := false
		errorf := func(format string, args ...any) {
			failed = true
			t.Errorf(format, args...)
		}
		if p.preStop == 0 {
			continue // log-shipper (DaemonSet) is not evicted
		}
		lane := "pod " + p.name
		at := map[string][]time.Time{}
		for _, f := range facts {
			if f.Lane != lane {
				continue
			}
			if f.Source == srcWorkload && !strings.Contains(f.Text, "recorded") {
				errorf("%s: workload fact %q does not say it comes from the record", p.name, f.Text)
			}
			if (f.Source == srcWorkload) != (f.Step == stepPreStopBegin || f.Step == stepPreStopEnd || f.Step == stepSIGTERM ||
				f.Step == stepExit || f.Step == stepCutOff) {
				errorf("%s: step %s from source %s", p.name, f.Step, f.Source)
			}
			at[f.Step] = append(at[f.Step], f.At)
		}
		if n := len(at[stepCutOff]); n > 0 {
			errorf("%s: the real process was cut off (facts: %v)", p.name, at)
		}
		for _, step := range []string{stepEvicting, stepPreStopBegin, stepPreStopEnd, stepSIGTERM, stepExit, stepEvicted} {
			if n := len(at[step]); n != 1 {
				errorf("%s: %d %s facts, want 1 (facts: %v)", p.name, n, step, at)
			}
		}
		if failed {
			continue
		}
		first := func(step string) time.Time { return at[step][0] }
		// The demo sees the eviction through a watch; the kubelet starts the
		// hook through its own: allow a little skew between the two.
		const skew = 500 * time.Millisecond
		order := []string{stepEvicting, stepPreStopBegin, stepPreStopEnd, stepSIGTERM, stepExit, stepEvicted}
		for i := 1; i < len(order); i++ {
			if a, b := first(order[i-1]), first(order[i]); b.Before(a.Add(-skew)) {
				errorf("%s: %s at %v before %s at %v", p.name, order[i], b.Format(time.StampMilli), order[i-1], a.Format(time.StampMilli))
			}
		}
		if took := first(stepPreStopEnd).Sub(first(stepPreStopBegin)); took < p.preStop-100*time.Millisecond {
			errorf("%s: preStop took %v, its hook takes %v", p.name, took, p.preStop)
		}
		if took := first(stepExit).Sub(first(stepSIGTERM)); took < p.shutdown-100*time.Millisecond {
			errorf("%s: exited %v after SIGTERM, its handler works %v", p.name, took, p.shutdown)
		}
		if !strings.Contains(terminal, "real process "+p.name+", from its own record: preStop ran") {
			errorf("terminal output has no summary of %s's own record", p.name)
		}
	}
}

// sampleRealPodFacts is what the Spot scene records of its real pods: for
// each evicted one, the eviction, its workload's record and the pod gone.
func sampleRealPodFacts(t0 time.Time) ([]Fact, string) {
	var facts []Fact
	var terminal strings.Builder
	for i, p := range realPods() {
		if p.preStop == 0 {
			continue
		}
		at := t0.Add(time.Duration(i) * time.Second)
		add := func(source, step string, after time.Duration) {
			facts = append(facts, Fact{At: at.Add(after), Scene: sceneSpot, Source: source, Step: step, Lane: "pod " + p.name,
				Text: p.name + " (pid 1) recorded: " + step})
		}
		add(srcPod, stepEvicting, 0)
		add(srcWorkload, stepPreStopBegin, 100*time.Millisecond)
		add(srcWorkload, stepPreStopEnd, 100*time.Millisecond+p.preStop)
		add(srcWorkload, stepSIGTERM, 110*time.Millisecond+p.preStop)
		add(srcWorkload, stepExit, 110*time.Millisecond+p.preStop+p.shutdown)
		add(srcPod, stepEvicted, time.Second+p.preStop+p.shutdown)
		terminal.WriteString("real process " + p.name + ", from its own record: preStop ran 2.0s\n")
	}
	return facts, terminal.String()
}

// checkRealPods passes the scene's real pods when their records show a
// whole shutdown, and fails them when a process was cut off, its preStop
// hook never ran, or SIGTERM came before the hook ended.
func TestCheckRealPods(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	facts, terminal := sampleRealPodFacts(t0)
	ok := &failures{}
	checkRealPods(ok, facts, terminal)
	if len(ok.msgs) > 0 {
		t.Fatalf("a whole shutdown fails the check: %v", ok.msgs)
	}
	for name, edit := range map[string]func([]Fact) []Fact{
		"cut off": func(fs []Fact) []Fact {
			for i := range fs {
				if fs[i].Step == stepExit {
					fs[i].Step = stepCutOff
				}
			}
			return fs
		},
		"no preStop": func(fs []Fact) []Fact {
			var out []Fact
			for _, f := range fs {
				if f.Step != stepPreStopBegin && f.Step != stepPreStopEnd {
					out = append(out, f)
				}
			}
			return out
		},
		"SIGTERM before the hook ended": func(fs []Fact) []Fact {
			for i := range fs {
				if fs[i].Step == stepSIGTERM {
					fs[i].At = fs[i].At.Add(-1500 * time.Millisecond)
				}
			}
			return fs
		},
		"not from the record": func(fs []Fact) []Fact {
			for i := range fs {
				if fs[i].Source == srcWorkload {
					fs[i].Source = srcPod
				}
			}
			return fs
		},
	} {
		facts, terminal := sampleRealPodFacts(t0)
		got := &failures{}
		checkRealPods(got, edit(facts), terminal)
		if len(got.msgs) == 0 {
			t.Errorf("%s: checkRealPods passed", name)
		}
	}
}
