package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/reference"
	"k8s.io/utils/clock"
)

// EventRecorder records Kubernetes Events: the method set of client-go's
// record.EventRecorder, so that client-go's recorder (the full build's, in
// queue mode) and its FakeRecorder satisfy it, without importing
// tools/record, which links the strategic merge patch and with it the
// OpenAPI models (gnostic, kube-openapi).
type EventRecorder interface {
	Event(object runtime.Object, eventtype, reason, message string)
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
	AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any)
}

// Sink is where a Recorder writes (EventSink).
type Sink interface {
	Create(e *corev1.Event) (*corev1.Event, error)
	Patch(e *corev1.Event, data []byte) (*corev1.Event, error)
}

// Recorder is a small EventRecorder for IMDS mode, where one pod records a
// handful of Events on its own node: queued (never blocking the caller;
// dropped when the queue is full, as client-go's broadcaster does), an
// Event equal to one recorded before (same object, type, reason, message)
// counted up with a PATCH instead of created again, and a write the API
// server did not answer retried. It leaves out client-go's aggregation of
// similar Events and its spam filter, which only a cluster-wide recorder
// needs.
type Recorder struct {
	sink   Sink
	source corev1.EventSource
	clock  clock.WithTicker
	log    *slog.Logger
	// retryAfter is the wait before a write is tried again (client-go's
	// broadcaster waits 10 s); tries bounds the attempts.
	retryAfter time.Duration
	tries      int

	queue chan *corev1.Event
	mu    sync.Mutex
	seen  map[eventKey]*corev1.Event // the last written Event of each key
}

// eventKey is what makes two Events the same one counted twice.
type eventKey struct {
	object                 corev1.ObjectReference
	typ, reason, message   string
	component, host        string
	annotationsFingerprint string
}

// maxSeen bounds the Events remembered for counting (one node's Events).
const maxSeen = 256

// NewRecorder returns a Recorder writing to sink; call Run.
func NewRecorder(sink Sink, source corev1.EventSource, clk clock.WithTicker, log *slog.Logger) *Recorder {
	return &Recorder{sink: sink, source: source, clock: clk, log: log, retryAfter: 10 * time.Second, tries: 12,
		queue: make(chan *corev1.Event, 1000), seen: map[eventKey]*corev1.Event{}}
}

func (r *Recorder) Event(obj runtime.Object, eventtype, reason, message string) {
	r.record(obj, nil, eventtype, reason, message)
}

func (r *Recorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.record(obj, nil, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (r *Recorder) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.record(obj, annotations, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (r *Recorder) record(obj runtime.Object, annotations map[string]string, eventtype, reason, message string) {
	ref, err := reference.GetReference(Scheme, obj)
	if err != nil {
		r.log.Error("not recording an Event: no reference to its object", "object", fmt.Sprintf("%T", obj), "reason", reason, "err", err)
		return
	}
	if eventtype != corev1.EventTypeNormal && eventtype != corev1.EventTypeWarning {
		r.log.Error("not recording an Event of an unknown type", "type", eventtype, "reason", reason)
		return
	}
	t := metav1.Time{Time: r.clock.Now()}
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	e := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%v.%x", ref.Name, t.UnixNano()), Namespace: ns, Annotations: annotations},
		InvolvedObject: *ref, Reason: reason, Message: message, Type: eventtype, Source: r.source,
		FirstTimestamp: t, LastTimestamp: t, Count: 1,
		// As client-go's recorder: what events.k8s.io/v1 and
		// `kubectl events` show as the reporting component.
		ReportingController: r.source.Component, ReportingInstance: r.source.Host,
	}
	select {
	case r.queue <- e:
	default:
		r.log.Warn("Event queue full, dropping an Event", "reason", reason, "object", ref.Name)
	}
}

// Run writes the queued Events until ctx ends.
func (r *Recorder) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-r.queue:
			r.write(ctx, e)
		}
	}
}

func key(e *corev1.Event) eventKey {
	var fp string
	for _, k := range slices.Sorted(maps.Keys(e.Annotations)) {
		fp += k + "=" + e.Annotations[k] + ";"
	}
	return eventKey{object: e.InvolvedObject, typ: e.Type, reason: e.Reason, message: e.Message,
		component: e.Source.Component, host: e.Source.Host, annotationsFingerprint: fp}
}

// write creates e, or counts up the equal Event written before, trying
// again while the API server does not answer.
func (r *Recorder) write(ctx context.Context, e *corev1.Event) {
	k := key(e)
	for try := 1; ; try++ {
		err := r.writeOnce(k, e)
		var status apierrors.APIStatus
		if err == nil || errors.As(err, &status) {
			// An answer: done, or a refusal that trying again won't change
			// (client-go's broadcaster gives up on those too).
			if err != nil && !apierrors.IsAlreadyExists(err) {
				r.log.Error("recording an Event failed", "reason", e.Reason, "object", e.InvolvedObject.Name, "err", err)
			}
			return
		}
		if try >= r.tries {
			r.log.Error("recording an Event failed, giving up", "reason", e.Reason, "object", e.InvolvedObject.Name, "tries", try, "err", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-r.clock.After(r.retryAfter):
		}
	}
}

func (r *Recorder) writeOnce(k eventKey, e *corev1.Event) error {
	r.mu.Lock()
	prev := r.seen[k]
	r.mu.Unlock()
	if prev != nil {
		count := prev.Count + 1
		patch := fmt.Sprintf(`{"count":%d,"lastTimestamp":%q,"message":%q}`, count, e.LastTimestamp.UTC().Format(time.RFC3339), e.Message)
		got, err := r.sink.Patch(prev, []byte(patch))
		if err == nil {
			r.remember(k, got)
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		// The Event expired (the API server keeps them an hour): create it
		// again.
	}
	got, err := r.sink.Create(e)
	if err != nil {
		return err
	}
	r.remember(k, got)
	return nil
}

func (r *Recorder) remember(k eventKey, e *corev1.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) >= maxSeen {
		clear(r.seen) // one node's Events: never near, but bounded
	}
	r.seen[k] = e
}
