package message

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"lifeboat.dev/lifeboat/internal/event"
)

// checkResult reports what no input may make Parse return.
func checkResult(t *testing.T, res Result, err error) {
	t.Helper()
	if !slices.Contains([]string{"", FormatEventBridge, FormatAutoScaling, FormatSNS}, res.Format) {
		t.Errorf("unknown format %q", res.Format)
	}
	if err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("error %v is not ErrMalformed", err)
		}
		if r := Reason(err); !slices.Contains(MalformedReasons, r) {
			t.Errorf("error reason %q is not one of MalformedReasons", r)
		}
		if len(res.Events) > 0 || res.Ignored != "" {
			t.Errorf("error %v came with events or an ignore reason: %+v", err, res)
		}
		return
	}
	if (len(res.Events) == 0) == (res.Ignored == "") {
		t.Errorf("want either events or an ignore reason, got %d events and Ignored %q", len(res.Events), res.Ignored)
	}
	if res.Ignored != "" && !slices.Contains(IgnoredReasons, res.Ignored) {
		t.Errorf("ignore reason %q is not one of IgnoredReasons", res.Ignored)
	}
	seen := make(map[string]bool)
	for _, ev := range res.Events {
		if !event.ValidInstanceID(ev.InstanceID) {
			t.Errorf("event %+v: invalid instance ID %q", ev, ev.InstanceID)
		}
		if !slices.Contains(event.Kinds, ev.Kind) {
			t.Errorf("event %+v: unknown kind %q", ev, ev.Kind)
		}
		if !strings.HasPrefix(ev.ID, string(ev.Kind)+"-") {
			t.Errorf("event %+v: ID %q is not a %s ID", ev, ev.ID, ev.Kind)
		}
		if seen[ev.ID] {
			t.Errorf("event ID %s appears twice in one result", ev.ID)
		}
		seen[ev.ID] = true
		if ev.Source != event.SourceSQS {
			t.Errorf("event %+v: source %q", ev, ev.Source)
		}
		isLifecycle := ev.Kind == event.LifecycleLaunch || ev.Kind == event.LifecycleTerminate
		if isLifecycle != (ev.Lifecycle != nil) {
			t.Errorf("event %+v: kind %s with lifecycle %v", ev, ev.Kind, ev.Lifecycle)
		}
	}
}

// FuzzParse: Parse never panics, every event it returns is valid, every
// reason is from the fixed sets, and the same body always gives the same
// result. Seeded with every testdata/ body, raw and wrapped in SNS.
func FuzzParse(f *testing.F) {
	for _, fx := range loadFixtures(f) {
		f.Add(fx.body)
		f.Add(snsEnvelope(fx.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := Parse(body)
		checkResult(t, res, err)
		again, err2 := Parse(body)
		if Reason(err) != Reason(err2) || !cmp.Equal(res, again, resultOptions...) {
			t.Errorf("Parse is not deterministic: %+v, %v then %+v, %v", res, err, again, err2)
		}
	})
}

// BenchmarkParse parses the real samples of testdata/ in turn, one message
// per op, and reports messages per second of wall time (msgs/s) and per
// second of CPU time used by the process (msgs/cpu-s, garbage collection
// included). On a busy machine the second is the one-core figure; the first
// also counts time the benchmark spent waiting for a core. "acted-on" keeps
// only the samples that yield events (the full path, including event IDs).
//
//	go test -bench Parse -run '^$' -cpu 1 ./internal/message/
func BenchmarkParse(b *testing.B) {
	var all, actedOn [][]byte
	for _, fx := range loadFixtures(b) {
		all = append(all, fx.body)
		if res, err := Parse(fx.body); err == nil && len(res.Events) > 0 {
			actedOn = append(actedOn, fx.body)
		}
	}
	for _, bm := range []struct {
		name   string
		bodies [][]byte
	}{
		{"all", all},
		{"acted-on", actedOn},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			cpu := processCPUTime()
			for b.Loop() {
				_, _ = Parse(bm.bodies[i%len(bm.bodies)])
				i++
			}
			cpu = processCPUTime() - cpu
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			if cpu > 0 {
				b.ReportMetric(float64(b.N)/cpu.Seconds(), "msgs/cpu-s")
			}
		})
	}
}
