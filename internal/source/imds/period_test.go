package imds

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/internal/event"
)

// pollLog is what runPolls saw.
type pollLog struct {
	paths     [][]string         // the signal paths each poll read, in order
	submitted map[event.Kind]int // the poll (1-based) that first submitted each kind
}

// runPolls runs Run with the default Options on f for n polls, one a
// second of a fake clock. between(i), if set, runs after the i-th poll,
// before the clock reaches the next.
func runPolls(t *testing.T, f *fakeIMDS, n int, between func(poll int)) pollLog {
	t.Helper()
	fc := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	log := pollLog{submitted: map[event.Kind]int{}}
	s := New(f, fc, discard, Options{OnPoll: func(error) {
		f.mu.Lock()
		var read []string
		for _, p := range Paths {
			if f.perPath[p] > 0 {
				read = append(read, p)
			}
		}
		f.perPath = map[string]int{}
		f.mu.Unlock()
		mu.Lock()
		defer mu.Unlock()
		log.paths = append(log.paths, read)
	}})
	submit := func(evs []event.Event) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range evs {
			if _, ok := log.submitted[e.Kind]; !ok {
				log.submitted[e.Kind] = len(log.paths) + 1 // submit comes before OnPoll
			}
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, submit) }()
	for i := 1; i <= n; i++ {
		deadline := time.Now().Add(5 * time.Second)
		for !func() bool { mu.Lock(); defer mu.Unlock(); return len(log.paths) >= i && fc.HasWaiters() }() {
			if time.Now().After(deadline) {
				t.Fatalf("only %d polls, want %d", len(log.paths), i)
			}
			time.Sleep(time.Millisecond)
		}
		if between != nil {
			between(i)
		}
		if i < n {
			fc.Step(time.Second)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return log
}

// Issue 28: an idle minute at the default 1 s interval is 89 metadata
// reads (the instance ID once; spot 60, rebalance and target-lifecycle-state
// 12 each, scheduled and history 2 each), not 185 (three paths at every
// poll: fails before Periods).
func TestRunIdleMinuteReads(t *testing.T) {
	f := newFake(nil)
	runPolls(t, f, 60, nil)
	if f.reads != 89 {
		t.Errorf("metadata reads in an idle minute = %d, want 89", f.reads)
	}
}

// Each poll reads the paths due at it (Periods, at the default 1 s
// interval): every path at the first poll and at the one after a failed
// poll, the count starting again there.
func TestRunReadsEachPathAtItsPeriod(t *testing.T) {
	fast := []string{PathSpot, PathRebalance, PathTargetState}
	spot := []string{PathSpot}
	tests := []struct {
		name    string
		between func(f *fakeIMDS, poll int)
		want    map[int][]string // poll (1-based) → paths read
	}{
		{"quiet", nil, map[int][]string{
			1: Paths, 2: spot, 5: spot, 6: fast, 7: spot, 11: fast, 26: fast, 30: spot,
			31: Paths, 32: spot, 36: fast, 56: fast, 60: spot, 61: Paths,
		}},
		{"a failed poll", func(f *fakeIMDS, poll int) {
			switch poll {
			case 2: // poll 3 fails on the spot path
				f.setFail(PathSpot, statusError(http.StatusInternalServerError))
			case 3:
				f.setFail(PathSpot, nil)
			}
		}, map[int][]string{
			1: Paths, 2: spot, 3: spot, 4: Paths, 5: spot, 8: spot, 9: fast, 14: fast, 33: spot, 34: Paths, 35: spot,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(nil)
			var between func(int)
			if tt.between != nil {
				between = func(poll int) { tt.between(f, poll) }
			}
			log := runPolls(t, f, 61, between)
			got := map[int][]string{}
			for poll := range tt.want {
				got[poll] = log.paths[poll-1]
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("paths read at poll (-want +got):\n%s", d)
			}
			for i, read := range log.paths {
				if len(read) == 0 || read[0] != PathSpot {
					t.Errorf("poll %d read %v: the Spot notice is read at every poll", i+1, read)
				}
			}
		})
	}
}

// A signal is submitted at most its period after it appears, whenever in
// the cycle it appears: the Spot notice at the next poll, a rebalance
// recommendation and a Terminated target state within 5, maintenance
// within 30.
func TestRunSeesSignalWithinItsPeriod(t *testing.T) {
	tests := []struct {
		path, body string
		kind       event.Kind
		within     int
	}{
		{PathSpot, `{"action":"terminate","time":"2030-01-01T00:02:00Z"}`, event.SpotInterruption, 1},
		{PathRebalance, `{"noticeTime":"2030-01-01T00:00:00Z"}`, event.RebalanceRecommendation, 5},
		{PathTargetState, "Terminated", event.LifecycleTerminate, 5},
		{PathScheduled, `[{"NotBefore":"1 Jan 2030 00:10:00 GMT","Code":"system-reboot","EventId":"instance-event-1","State":"active"}]`, event.ScheduledChange, 30},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			// The signal appears after poll `after`, at every phase of the cycle.
			for after := 1; after <= tt.within+1; after++ {
				f := newFake(nil)
				log := runPolls(t, f, after+tt.within, func(poll int) {
					if poll == after {
						f.set(tt.path, tt.body)
					}
				})
				at, ok := log.submitted[tt.kind]
				if !ok || at <= after || at > after+tt.within {
					t.Errorf("appearing after poll %d: submitted at poll %d (seen %v), want within %d polls", after, at, ok, tt.within)
				}
			}
		})
	}
}
