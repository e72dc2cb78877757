package imds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/internal/event"
)

// fakeIMDS serves documents by path; a missing path answers 404.
type fakeIMDS struct {
	mu    sync.Mutex
	clock *clocktesting.FakeClock
	docs  map[string]string
	// fail, when set, fails these paths (every path when it holds "*").
	fail  map[string]error
	calls []time.Time // fake-clock time of each instance-action read
	reads int
	// perPath counts the reads of each path.
	perPath map[string]int
}

func newFake(docs map[string]string) *fakeIMDS {
	d := map[string]string{PathInstanceID: testInstance}
	for k, v := range docs {
		d[k] = v
	}
	return &fakeIMDS{docs: d, fail: map[string]error{}, perPath: map[string]int{}}
}

func (f *fakeIMDS) set(path, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if body == "" {
		delete(f.docs, path)
	} else {
		f.docs[path] = body
	}
}

func (f *fakeIMDS) setFail(path string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.fail, path)
	} else {
		f.fail[path] = err
	}
}

func (f *fakeIMDS) Get(_ context.Context, path string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	f.perPath[path]++
	if path == PathSpot && f.clock != nil {
		f.calls = append(f.calls, f.clock.Now())
	}
	if err := f.fail["*"]; err != nil {
		return nil, err
	}
	if err := f.fail[path]; err != nil {
		return nil, err
	}
	body, ok := f.docs[path]
	if !ok {
		return nil, statusError(http.StatusNotFound)
	}
	return []byte(body), nil
}

func statusError(code int) error { return &HTTPError{Path: "test", Code: code} }

// tokenError is what Client returns when the token endpoint answers 404
// and IMDSv1 is not allowed.
func tokenError() error { return &TokenError{statusError(http.StatusNotFound)} }

// refused is a connection refused.
func refused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
}

var discard = slog.New(slog.DiscardHandler)

// recorder collects submitted batches.
type recorder struct {
	mu      sync.Mutex
	batches [][]event.Event
}

func (r *recorder) submit(evs []event.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, evs)
}

func (r *recorder) kinds() [][]event.Kind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]event.Kind
	for _, b := range r.batches {
		var ks []event.Kind
		for _, e := range b {
			ks = append(ks, e.Kind)
		}
		out = append(out, ks)
	}
	return out
}

// F2: a state held for an hour of one-second polls is one event, submitted once.
func TestPollEdgeTriggered(t *testing.T) {
	f := newFake(map[string]string{PathTargetState: "InService"})
	s := New(f, clocktesting.NewFakeClock(time.Now()), discard, Options{})
	var r recorder
	poll := func(n int) {
		t.Helper()
		for range n {
			if err := s.Poll(t.Context(), r.submit); err != nil {
				t.Fatal(err)
			}
		}
	}
	poll(10)
	f.set(PathTargetState, "Terminated")
	poll(3600)
	// A Spot notice whose time the service recomputes at every read.
	for i := range 20 {
		f.set(PathSpot, fmt.Sprintf(`{"action":"terminate","time":"2030-01-01T00:02:%02dZ"}`, i))
		poll(1)
	}
	// Two signals appearing together are one batch.
	f.set(PathRebalance, `{"noticeTime":"2030-01-01T00:00:00Z"}`)
	f.set(PathScheduled, `[{"NotBefore":"1 Jan 2030 00:00:00 GMT","Code":"system-reboot","EventId":"instance-event-1","State":"active"}]`)
	poll(100)
	// Gone and back: the same content is the same event.
	f.set(PathTargetState, "")
	poll(5)
	f.set(PathTargetState, "Terminated")
	poll(5)
	want := [][]event.Kind{
		{event.LifecycleTerminate},
		{event.SpotInterruption},
		{event.RebalanceRecommendation, event.ScheduledChange},
	}
	if d := cmp.Diff(want, r.kinds()); d != "" {
		t.Errorf("submitted batches (-want +got):\n%s", d)
	}
}

func TestPollCancellationsWaitForCompleteRead(t *testing.T) {
	canceled := `[{"NotBefore":"1 Jan 2030 00:00:00 GMT","Code":"system-reboot","EventId":"instance-event-1","State":"canceled"}]`
	f := newFake(map[string]string{PathHistory: canceled})
	f.setFail(PathSpot, statusError(http.StatusInternalServerError))
	s := New(f, clocktesting.NewFakeClock(time.Now()), discard, Options{})
	var r recorder
	if err := s.Poll(t.Context(), r.submit); err == nil {
		t.Fatal("Poll with a failing path: no error")
	}
	if got := r.kinds(); len(got) != 0 {
		t.Fatalf("submitted %v while the Spot path failed; a cancellation must wait for a complete read", got)
	}
	f.setFail(PathSpot, nil)
	if err := s.Poll(t.Context(), r.submit); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([][]event.Kind{{event.ScheduledChangeCanceled}}, r.kinds()); d != "" {
		t.Errorf("submitted (-want +got):\n%s", d)
	}
}

func TestPollActionsDoNotWaitForOtherPaths(t *testing.T) {
	f := newFake(map[string]string{PathSpot: `{"action":"terminate","time":"2030-01-01T00:02:00Z"}`})
	f.setFail(PathHistory, statusError(http.StatusInternalServerError))
	s := New(f, clocktesting.NewFakeClock(time.Now()), discard, Options{})
	var r recorder
	if err := s.Poll(t.Context(), r.submit); err == nil {
		t.Error("Poll with a failing path: no error")
	}
	if d := cmp.Diff([][]event.Kind{{event.SpotInterruption}}, r.kinds()); d != "" {
		t.Errorf("submitted (-want +got):\n%s", d)
	}
}

func TestPollSeenAreNeverSubmitted(t *testing.T) {
	body := `[{"NotBefore":"1 Jan 2030 00:00:00 GMT","Code":"system-reboot","EventId":"instance-event-1","State":"active"}]`
	evs, err := Parse(PathScheduled, testInstance, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	f := newFake(map[string]string{PathScheduled: body})
	s := New(f, clocktesting.NewFakeClock(time.Now()), discard, Options{Seen: []string{evs[0].ID}})
	var r recorder
	for range 3 {
		if err := s.Poll(t.Context(), r.submit); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.kinds(); len(got) != 0 {
		t.Errorf("submitted %v, want nothing (already handled)", got)
	}
}

func TestPollErrors(t *testing.T) {
	tests := []struct {
		name string
		// later: the failure starts after a first good poll (the instance
		// ID is known); otherwise from the start.
		later bool
		setup func(f *fakeIMDS)
	}{
		{"no instance ID", false, func(f *fakeIMDS) { f.set(PathInstanceID, "") }},
		{"instance ID garbage", false, func(f *fakeIMDS) { f.set(PathInstanceID, "<html>") }},
		// IMDSv2 required but the token endpoint answers 404: an outage, not "nothing announced".
		{"token endpoint 404", true, func(f *fakeIMDS) { f.setFail("*", tokenError()) }},
		{"connection refused", true, func(f *fakeIMDS) {
			f.setFail("*", refused())
		}},
		{"server error", true, func(f *fakeIMDS) {
			f.setFail(PathRebalance, statusError(http.StatusServiceUnavailable))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(map[string]string{PathTargetState: "InService"})
			s := New(f, clocktesting.NewFakeClock(time.Now()), discard, Options{})
			var r recorder
			if tt.later {
				if err := s.Poll(t.Context(), r.submit); err != nil {
					t.Fatal(err)
				}
			}
			tt.setup(f)
			f.set(PathTargetState, "Terminated")
			f.set(PathHistory, `[{"NotBefore":"1 Jan 2030 00:00:00 GMT","Code":"system-reboot","EventId":"e","State":"completed"}]`)
			if err := s.Poll(t.Context(), r.submit); err == nil {
				t.Error("Poll: no error")
			}
			for _, b := range r.kinds() {
				if !cmp.Equal(b, []event.Kind{event.LifecycleTerminate}) {
					t.Errorf("submitted %v; only the readable action may be", b)
				}
			}
		})
	}
}

func TestPollMalformedBodyIsIgnored(t *testing.T) {
	f := newFake(map[string]string{PathSpot: `<html>oops</html>`, PathTargetState: "Terminated"})
	s := New(f, clocktesting.NewFakeClock(time.Now()), discard, Options{})
	var r recorder
	if err := s.Poll(t.Context(), r.submit); err != nil {
		t.Fatalf("a malformed body is not an outage: %v", err)
	}
	if d := cmp.Diff([][]event.Kind{{event.LifecycleTerminate}}, r.kinds()); d != "" {
		t.Errorf("submitted (-want +got):\n%s", d)
	}
}

// TestRunBackoff: a failing metadata service is polled with a doubling
// delay up to MaxBackoff, reported unhealthy, and at the normal interval
// again once it answers.
func TestRunBackoff(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	fc := clocktesting.NewFakeClock(start)
	f := newFake(nil)
	f.clock = fc
	f.setFail("*", refused())
	var mu sync.Mutex
	var health []bool
	s := New(f, fc, discard, Options{Interval: time.Second, MaxBackoff: 10 * time.Second, OnPoll: func(err error) {
		mu.Lock()
		defer mu.Unlock()
		health = append(health, err == nil)
	}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, func([]event.Event) {}) }()

	// step advances the fake clock in 100 ms steps, each once Run waits.
	step := func(d time.Duration) {
		t.Helper()
		for end := fc.Now().Add(d); fc.Now().Before(end); {
			deadline := time.Now().Add(5 * time.Second)
			for !fc.HasWaiters() {
				if time.Now().After(deadline) {
					t.Fatal("Run is not waiting")
				}
				time.Sleep(time.Millisecond)
			}
			fc.Step(100 * time.Millisecond)
		}
	}
	// The instance ID is the first read: fail it too, then everything.
	step(36 * time.Second) // polls at 0, 1, 3, 7, 15, 25, 35
	f.setFail("*", nil)
	step(14 * time.Second) // 45 (still the backoff of 10 s), then 46, 47, 48, 49, 50
	deadline := time.Now().Add(5 * time.Second)
	for !func() bool { mu.Lock(); defer mu.Unlock(); return len(health) >= 12 }() {
		if time.Now().After(deadline) {
			t.Fatalf("only %d polls reported", len(health))
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	wantHealth := []bool{false, false, false, false, false, false, false, true, true, true, true, true}
	if d := cmp.Diff(wantHealth, health[:12]); d != "" {
		t.Errorf("OnPoll health (-want +got):\n%s", d)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// Spot reads happen only in healthy polls (the instance ID read fails first).
	var at []time.Duration
	for _, c := range f.calls {
		at = append(at, c.Sub(start))
	}
	want := []time.Duration{45 * time.Second, 46 * time.Second, 47 * time.Second, 48 * time.Second, 49 * time.Second}
	if len(at) < len(want) {
		t.Fatalf("spot reads at %v, want at least %v", at, want)
	}
	if d := cmp.Diff(want, at[:len(want)]); d != "" {
		t.Errorf("healthy polls at (-want +got):\n%s", d)
	}
	// Failing polls: one read each (the instance ID), 7 of them in 36 s.
	if failing := f.perPath[PathInstanceID] - 1; failing != 7 {
		t.Errorf("failing polls = %d, want 7 (backoff 1, 2, 4, 8, 10, 10 s)", failing)
	}
}

// A service that does not answer at all ends the poll at the first path
// (each read would fail alike after the client's retries); one answering a
// path with an HTTP error does not.
func TestPollStopsWhenUnreachable(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		wantReads int
	}{
		{"connection refused", refused(), 1},
		{"no token", tokenError(), 1},
		{"HTTP 500 on every path", statusError(http.StatusInternalServerError), len(Paths)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(nil)
			s := New(f, clocktesting.NewFakeClock(time.Now()), discard, Options{})
			if err := s.Poll(t.Context(), func([]event.Event) {}); err != nil {
				t.Fatal(err)
			}
			f.setFail("*", tt.err)
			before := f.reads
			if err := s.Poll(t.Context(), func([]event.Event) {}); err == nil {
				t.Fatal("Poll: no error")
			}
			if got := f.reads - before; got != tt.wantReads {
				t.Errorf("reads in the failing poll = %d, want %d", got, tt.wantReads)
			}
		})
	}
}

// Periods name every signal path once, in polling order; the Spot notice is
// read at every poll; a poll that reads the maintenance history (the
// source of cancellations) reads every path, so that a cancellation is
// submitted from a poll in which every path answered.
func TestPeriods(t *testing.T) {
	var paths []string
	every := map[string]int{}
	for _, p := range Periods {
		paths = append(paths, p.Path)
		every[p.Path] = p.Every
		if p.Every < 1 {
			t.Errorf("%s: every %d polls", p.Path, p.Every)
		}
	}
	want := []string{PathSpot, PathRebalance, PathScheduled, PathHistory, PathTargetState}
	if d := cmp.Diff(want, paths); d != "" {
		t.Errorf("Periods' paths (-want +Periods):\n%s", d)
	}
	if d := cmp.Diff(want, Paths); d != "" {
		t.Errorf("Paths (-want +got):\n%s", d)
	}
	if every[PathSpot] != 1 {
		t.Errorf("%s read every %d polls, want every poll", PathSpot, every[PathSpot])
	}
	for _, p := range Periods {
		if every[PathHistory]%p.Every != 0 {
			t.Errorf("%s every %d polls is not a multiple of %s's %d", PathHistory, every[PathHistory], p.Path, p.Every)
		}
	}
}

// pathsAt(n) is every path whose period divides n, in polling order, and
// costs a poll no allocation (it is computed once: cycle).
func TestPathsAt(t *testing.T) {
	for n := range 200 {
		var want []string
		for _, p := range Periods {
			if n%p.Every == 0 {
				want = append(want, p.Path)
			}
		}
		if d := cmp.Diff(want, pathsAt(n)); d != "" {
			t.Errorf("pathsAt(%d) (-want +got):\n%s", n, d)
		}
	}
	for _, n := range []int{0, 1, 5, 30, 31} {
		if a := testing.AllocsPerRun(100, func() { _ = pathsAt(n) }); a != 0 {
			t.Errorf("pathsAt(%d): %v allocations, want 0", n, a)
		}
	}
}
