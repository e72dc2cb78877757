// Package imds is lifeboat's IMDS-mode event source: it polls the instance
// metadata service (IMDSv2, through its own small client: Client) of the
// node lifeboat runs on and turns what it announces (Spot instance-action,
// rebalance recommendation, scheduled maintenance and its history, Auto
// Scaling target-lifecycle-state) into events.
//
// It owns the metadata paths, their parsing (Parse, pure), edge triggering
// (an event is submitted once, the first time its content-derived ID is
// seen, however often it is read again) and the rule that says when a
// reboot-type maintenance is over (Rebooted). It must not talk to the
// Kubernetes API, decide what to do with a node (package plan) or keep
// state beyond the IDs it has submitted.
package imds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/event"
)

// metadataAPI reads one metadata path (Client is one): its body, an
// error with HTTPStatusCode() for an answer other than 200, a *TokenError
// when no session token could be had.
type metadataAPI interface {
	Get(ctx context.Context, path string) ([]byte, error)
}

var _ metadataAPI = (*Client)(nil)

// maxBody bounds what is read of one metadata document.
const maxBody = 1 << 20

// Period is how often Run reads one signal path: at every Every-th poll.
type Period struct {
	Path  string
	Every int
}

// Periods say how often Run reads each signal path, in polling order:
// each signal as often as its own deadline needs, not all at the fastest
// rate, because an idle DaemonSet's CPU follows its metadata reads (the
// thread wake-ups of each round trip; docs/benchmarks.md, issue 28). At
// the default interval (--imds-poll-interval 1s):
//
//   - spot/instance-action, every poll (1 s). The notice comes two minutes
//     before the action (best effort; at once for hibernation), and
//     lifeboat's target is to read it within 1 s of its appearing.
//   - events/recommendations/rebalance, every 5th poll (5 s). A
//     recommendation is advisory and has no deadline; AWS recommends
//     checking it every 5 s (../shared/fixtures/NOTES.md §3). When it
//     comes with an interruption notice, the Spot path, read at every
//     poll, carries the deadline.
//   - autoscaling/target-lifecycle-state, every 5th poll (5 s). Terminated
//     is shown while a terminate lifecycle hook holds the instance, for
//     the hook's heartbeat timeout until a heartbeat
//     (--imds-complete-lifecycle sends them once it has read the state):
//     30 s at least, 3600 s by default (DESIGN.md, "Lifecycle hook
//     limits"). Reading it 4 s later at most costs 13 % of the shortest
//     hook and 0.1 % of the default.
//   - events/maintenance/scheduled and …/history, every 30th poll (30 s):
//     AWS announces maintenance days to weeks ahead. 30 is a multiple of
//     every other period, so a poll that reads the history (where
//     cancellations come from) reads every path: cancellations are
//     submitted only from a poll in which every path answered.
//
// The periods are counted in polls, so they scale with the interval (as
// the scheduled paths' always did): the interval is the one setting of
// how fast lifeboat reacts, and test/imds runs at a tenth of it. Every
// path is read at the first poll and at the poll after a failed one (what
// failed may be a path read seldom), and the count starts again there. At
// the default interval an idle second is 1 + 2/5 + 2/30 ≈ 1.47 GETs,
// where reading the three fast paths at every poll made it 3.07.
var Periods = []Period{
	{PathSpot, 1},
	{PathRebalance, 5},
	{PathScheduled, 30},
	{PathHistory, 30},
	{PathTargetState, 5},
}

// cycle lists the paths Run reads at each poll of a cycle as long as the
// least common multiple of the periods, computed once: at poll n since
// the last one that read every path, cycle[n % len(cycle)]. Every period
// divides 0, so cycle[0] is every path.
var cycle = cycleOf(Periods)

// Paths are every signal path, in polling order (Periods').
var Paths = cycle[0]

func cycleOf(periods []Period) [][]string {
	n := 1
	for _, p := range periods {
		n = lcm(n, p.Every)
	}
	out := make([][]string, n)
	for i := range out {
		for _, p := range periods {
			if i%p.Every == 0 {
				out[i] = append(out[i], p.Path)
			}
		}
	}
	return out
}

func lcm(a, b int) int {
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return a / x * b
}

// pathsAt returns the paths Run reads at the n-th poll since the last one
// that read every path (n = 0 is that poll).
func pathsAt(n int) []string { return cycle[n%len(cycle)] }

// maxSeen bounds the remembered event IDs; an instance sees a handful.
const maxSeen = 1024

// Options configure a Source.
type Options struct {
	// Interval is the time between two polls (default 1 s).
	Interval time.Duration
	// MaxBackoff bounds the time between polls while the metadata service
	// fails; the delay starts at Interval and doubles (default 10 s).
	MaxBackoff time.Duration
	// Seen are event IDs already handled before this process started (a
	// reboot maintenance undone after the reboot): they are never submitted.
	Seen []string
	// OnPoll is called after every poll: nil when every path answered (200
	// or 404), else the error. It feeds readiness and metrics.
	OnPoll func(err error)
}

// Source polls the instance metadata of one instance.
type Source struct {
	api   metadataAPI
	clock clock.WithTicker
	log   *slog.Logger
	o     Options

	mu         sync.Mutex
	instanceID string
	seen       map[string]bool
	order      []string        // seen IDs, oldest first
	malformed  map[string]bool // paths whose last body did not parse
}

// New returns a Source reading from api.
func New(api metadataAPI, clk clock.WithTicker, log *slog.Logger, o Options) *Source {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.MaxBackoff < o.Interval {
		o.MaxBackoff = max(10*time.Second, o.Interval)
	}
	if o.OnPoll == nil {
		o.OnPoll = func(error) {}
	}
	s := &Source{api: api, clock: clk, log: log, o: o, seen: map[string]bool{}, malformed: map[string]bool{}}
	for _, id := range o.Seen {
		s.remember(id)
	}
	return s
}

// InstanceID returns the instance ID read from the metadata ("" before the
// first successful poll).
func (s *Source) InstanceID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.instanceID
}

// Run polls until ctx ends and hands every batch of new events to submit
// (one call per poll that found something new, never concurrently). A
// failing metadata service is retried with a doubling delay up to
// MaxBackoff, reported through OnPoll and logged when it starts and stops
// failing; it never ends Run. Run returns nil when ctx ends.
func (s *Source) Run(ctx context.Context, submit func([]event.Event)) error {
	failing := false
	backoff := s.o.Interval
	// n counts the polls since the last that read every path (Periods).
	n := 0
	for {
		err := s.poll(ctx, submit, pathsAt(n))
		n++
		if err != nil {
			n = 0
		}
		if ctx.Err() != nil {
			return nil
		}
		s.o.OnPoll(err)
		delay := s.o.Interval
		switch {
		case err != nil:
			if !failing {
				s.log.Warn("instance metadata unavailable; retrying with backoff", "instanceID", s.InstanceID(), "error", err.Error())
			}
			failing = true
			delay = backoff
			backoff = min(2*backoff, s.o.MaxBackoff)
		case failing:
			s.log.Info("instance metadata available again", "instanceID", s.InstanceID())
			failing = false
			backoff = s.o.Interval
		}
		t := s.clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

// Poll reads every signal path once and submits the events not seen
// before, all in one batch (Run reads most paths at some polls only:
// Periods). It returns the errors of the paths that did not answer; when the service does not answer at all it stops at the
// first such path. Cancellations (canceled or completed maintenance) are held
// back until a poll in which every path answered, so that an undo is never
// planned without the signals that would keep the node cordoned.
func (s *Source) Poll(ctx context.Context, submit func([]event.Event)) error {
	return s.poll(ctx, submit, Paths)
}

// poll reads paths (Paths or those pathsAt a poll) once: Poll's work.
func (s *Source) poll(ctx context.Context, submit func([]event.Event), paths []string) error {
	id, err := s.readInstanceID(ctx)
	if err != nil {
		return err
	}
	var errs []error
	var found []event.Event
	for _, p := range paths {
		body, ok, err := s.get(ctx, p)
		if err != nil {
			errs = append(errs, fmt.Errorf("reading %s: %w", p, err))
			if unreachable(err) {
				break // the service is down: the other paths would fail alike, each after its retries
			}
			continue
		}
		if !ok {
			s.setMalformed(p, nil)
			continue
		}
		evs, err := Parse(p, id, body)
		s.setMalformed(p, err)
		found = append(found, evs...)
	}
	complete := len(errs) == 0
	var fresh []event.Event
	for _, e := range found {
		if e.Kind == event.ScheduledChangeCanceled && !complete {
			continue
		}
		if s.remember(e.ID) {
			s.log.Info("instance metadata announced an event", "instanceID", id, "eventID", e.ID, "kind", e.Kind, "action", e.Action, "deadline", e.Deadline)
			fresh = append(fresh, e)
		}
	}
	if len(fresh) > 0 {
		submit(fresh)
	}
	return errors.Join(errs...)
}

// readInstanceID reads the instance ID once; every event carries it.
func (s *Source) readInstanceID(ctx context.Context) (string, error) {
	if id := s.InstanceID(); id != "" {
		return id, nil
	}
	body, ok, err := s.get(ctx, PathInstanceID)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", PathInstanceID, err)
	}
	if !ok {
		return "", fmt.Errorf("reading %s: not found", PathInstanceID)
	}
	id := event.NormalizeInstanceID(string(body))
	if id == "" {
		return "", fmt.Errorf("reading %s: %q is not an instance ID", PathInstanceID, strings.TrimSpace(string(body)))
	}
	s.mu.Lock()
	s.instanceID = id
	s.mu.Unlock()
	s.log.Info("reading instance metadata", "instanceID", id, "interval", s.o.Interval)
	return id, nil
}

// get reads one metadata path: its body, or ok false for a 404.
func (s *Source) get(ctx context.Context, path string) (body []byte, ok bool, err error) {
	body, err = s.api.Get(ctx, path)
	if err != nil {
		var status interface{ HTTPStatusCode() int }
		if errors.As(err, &status) && status.HTTPStatusCode() == http.StatusNotFound && !tokenFailed(err) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return body, true, nil
}

// unreachable reports whether err means the service did not answer at
// all (connection refused or reset, timeout, no token), rather than
// answering one path with an HTTP error.
func unreachable(err error) bool {
	var status interface{ HTTPStatusCode() int }
	return !errors.As(err, &status) || tokenFailed(err)
}

// setMalformed logs a path whose body stopped parsing, once until it parses again.
func (s *Source) setMalformed(path string, err error) {
	s.mu.Lock()
	was := s.malformed[path]
	s.malformed[path] = err != nil
	s.mu.Unlock()
	if err != nil && !was {
		s.log.Warn("ignoring unreadable instance metadata", "instanceID", s.InstanceID(), "path", path, "error", err.Error())
	}
}

// remember records id and reports whether it is new.
func (s *Source) remember(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[id] {
		return false
	}
	s.seen[id] = true
	s.order = append(s.order, id)
	if len(s.order) > maxSeen {
		delete(s.seen, s.order[0])
		s.order = s.order[1:]
	}
	return true
}

// tokenFailed reports whether err is the failure to get an IMDSv2 token
// rather than the answer to the metadata read itself: a 404 from the token
// endpoint must not read as "nothing announced".
func tokenFailed(err error) bool {
	var terr *TokenError
	return errors.As(err, &terr)
}
