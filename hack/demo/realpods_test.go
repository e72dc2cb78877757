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
func checkRealPods(t *testing.T, facts []Fact, terminal string) {
	t.Helper()
	for _, p := range realPods() {
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
				t.Errorf("%s: workload fact %q does not say it comes from the record", p.name, f.Text)
			}
			if (f.Source == srcWorkload) != (f.Step == stepPreStopBegin || f.Step == stepPreStopEnd || f.Step == stepSIGTERM ||
				f.Step == stepExit || f.Step == stepCutOff) {
				t.Errorf("%s: step %s from source %s", p.name, f.Step, f.Source)
			}
			at[f.Step] = append(at[f.Step], f.At)
		}
		if n := len(at[stepCutOff]); n > 0 {
			t.Errorf("%s: the real process was cut off (facts: %v)", p.name, at)
		}
		for _, step := range []string{stepEvicting, stepPreStopBegin, stepPreStopEnd, stepSIGTERM, stepExit, stepEvicted} {
			if n := len(at[step]); n != 1 {
				t.Errorf("%s: %d %s facts, want 1 (facts: %v)", p.name, n, step, at)
			}
		}
		if t.Failed() {
			continue
		}
		first := func(step string) time.Time { return at[step][0] }
		// The demo sees the eviction through a watch; the kubelet starts the
		// hook through its own: allow a little skew between the two.
		const skew = 500 * time.Millisecond
		order := []string{stepEvicting, stepPreStopBegin, stepPreStopEnd, stepSIGTERM, stepExit, stepEvicted}
		for i := 1; i < len(order); i++ {
			if a, b := first(order[i-1]), first(order[i]); b.Before(a.Add(-skew)) {
				t.Errorf("%s: %s at %v before %s at %v", p.name, order[i], b.Format(time.StampMilli), order[i-1], a.Format(time.StampMilli))
			}
		}
		if took := first(stepPreStopEnd).Sub(first(stepPreStopBegin)); took < p.preStop-100*time.Millisecond {
			t.Errorf("%s: preStop took %v, its hook takes %v", p.name, took, p.preStop)
		}
		if took := first(stepExit).Sub(first(stepSIGTERM)); took < p.shutdown-100*time.Millisecond {
			t.Errorf("%s: exited %v after SIGTERM, its handler works %v", p.name, took, p.shutdown)
		}
		if !strings.Contains(terminal, "real process "+p.name+", from its own record: preStop ran") {
			t.Errorf("terminal output has no summary of %s's own record", p.name)
		}
	}
}
