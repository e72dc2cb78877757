package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	testclock "k8s.io/utils/clock/testing"
)

// sinkCall is one write the fake sink received.
type sinkCall struct {
	verb  string // create or patch
	event *corev1.Event
	patch string
}

// fakeSink records writes; fail, if set, answers a write instead.
type fakeSink struct {
	mu    sync.Mutex
	calls chan sinkCall
	fail  func(n int) error // n counts writes from 1
	n     int
}

func newFakeSink() *fakeSink { return &fakeSink{calls: make(chan sinkCall, 100)} }

func (s *fakeSink) answer(c sinkCall) (*corev1.Event, error) {
	s.mu.Lock()
	s.n++
	n, fail := s.n, s.fail
	s.mu.Unlock()
	s.calls <- c
	if fail != nil {
		if err := fail(n); err != nil {
			return nil, err
		}
	}
	out := c.event.DeepCopy()
	if c.verb == "patch" {
		out.Count++
	}
	return out, nil
}

func (s *fakeSink) Create(e *corev1.Event) (*corev1.Event, error) {
	return s.answer(sinkCall{verb: "create", event: e})
}

func (s *fakeSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	return s.answer(sinkCall{verb: "patch", event: e, patch: string(data)})
}

func (s *fakeSink) next(t *testing.T) sinkCall {
	t.Helper()
	select {
	case c := <-s.calls:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no write")
		return sinkCall{}
	}
}

func (s *fakeSink) none(t *testing.T) {
	t.Helper()
	select {
	case c := <-s.calls:
		t.Fatalf("unexpected write %s %s", c.verb, c.event.Reason)
	case <-time.After(100 * time.Millisecond):
	}
}

var start = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func runRecorder(t *testing.T, sink *fakeSink) (*Recorder, *testclock.FakeClock) {
	clk := testclock.NewFakeClock(start)
	r := NewRecorder(sink, corev1.EventSource{Component: "lifeboat"}, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r, clk
}

var nodeRef = &corev1.ObjectReference{Kind: "Node", Name: "n", UID: "n"}

// An Event is created in the default namespace for a Node, with the
// client-go recorder's fields; the same Event again is counted up with a
// patch; another message is another Event.
func TestRecorderCreatesThenCounts(t *testing.T) {
	sink := newFakeSink()
	r, clk := runRecorder(t, sink)
	r.AnnotatedEventf(nodeRef, map[string]string{"team": "a", "z": "1"}, corev1.EventTypeNormal, "Cordoned", "cordoned for %s", "spot")
	c := sink.next(t)
	e := c.event
	if c.verb != "create" || e.Namespace != "default" || e.Name != fmt.Sprintf("n.%x", start.UnixNano()) ||
		e.InvolvedObject.Kind != "Node" || e.InvolvedObject.Name != "n" || e.Reason != "Cordoned" || e.Message != "cordoned for spot" ||
		e.Type != corev1.EventTypeNormal || e.Source.Component != "lifeboat" || e.Count != 1 || !e.FirstTimestamp.Time.Equal(start) ||
		e.Annotations["team"] != "a" {
		t.Fatalf("created %s %+v", c.verb, e)
	}
	clk.Step(time.Minute)
	r.AnnotatedEventf(nodeRef, map[string]string{"z": "1", "team": "a"}, corev1.EventTypeNormal, "Cordoned", "cordoned for %s", "spot")
	c = sink.next(t)
	if c.verb != "patch" || c.event.Name != e.Name || c.patch != `{"count":2,"lastTimestamp":"2030-01-01T00:01:00Z","message":"cordoned for spot"}` {
		t.Fatalf("repeat: %s %s %s", c.verb, c.event.Name, c.patch)
	}
	r.Event(nodeRef, corev1.EventTypeNormal, "Cordoned", "cordoned for rebalance")
	if c = sink.next(t); c.verb != "create" {
		t.Fatalf("another message: %s, want create", c.verb)
	}
	r.Event(nodeRef, "Bogus", "Cordoned", "x") // not a type Kubernetes knows
	sink.none(t)
}

// A write the API server did not answer is tried again after RetryAfter,
// a refusal is not; an expired Event counted up is created again.
func TestRecorderRetries(t *testing.T) {
	sink := newFakeSink()
	sink.fail = func(n int) error {
		switch n {
		case 1:
			return errors.New("connection refused")
		case 3:
			return apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "x", errors.New("no"))
		case 4:
			return apierrors.NewNotFound(schema.GroupResource{Resource: "events"}, "x")
		}
		return nil
	}
	r, clk := runRecorder(t, sink)
	r.Event(nodeRef, corev1.EventTypeWarning, "DrainFailed", "stuck")
	sink.next(t) // refused: no answer
	sink.none(t)
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(r.retryAfter)
	if c := sink.next(t); c.verb != "create" {
		t.Fatalf("retry: %s", c.verb)
	}
	r.Event(&corev1.ObjectReference{Kind: "Node", Name: "m"}, corev1.EventTypeWarning, "DrainFailed", "stuck")
	sink.next(t) // 403: given up
	sink.none(t)
	r.Event(nodeRef, corev1.EventTypeWarning, "DrainFailed", "stuck") // counted up: gone (404), created again
	if c := sink.next(t); c.verb != "patch" {
		t.Fatalf("repeat: %s", c.verb)
	}
	if c := sink.next(t); c.verb != "create" || c.event.Count != 1 {
		t.Fatalf("after 404: %s count %d", c.verb, c.event.Count)
	}
}
