package controller

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/plan"
)

// nodeRecorder is a drainer for the IMDS-mode entry (SubmitNode): it counts
// drains, the most in flight at once, and the annotations of each cordon.
type nodeRecorder struct {
	mu          sync.Mutex
	drains      int
	inFlight    int
	maxInFlight int
	annotations []map[string]string
	uncordons   [][]string    // the annotations each uncordon removed
	hold        chan struct{} // a drain waits for it when not nil
}

func (f *nodeRecorder) Cordon(_ context.Context, _ string, _ []string, _ string, a map[string]string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.annotations = append(f.annotations, maps.Clone(a))
	return len(f.annotations) == 1, nil
}

func (f *nodeRecorder) Uncordon(_ context.Context, _, _ string, annotations []string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.uncordons = append(f.uncordons, annotations)
	return true, nil
}

func (f *nodeRecorder) Drain(ctx context.Context, _ string, _ drain.Deadline, _ func(drain.Progress)) (drain.Result, error) {
	f.mu.Lock()
	f.drains++
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	hold := f.hold
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.inFlight--; f.mu.Unlock() }()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return drain.Result{}, ctx.Err()
		}
	}
	return drain.Result{}, nil
}

func (f *nodeRecorder) SetAnnotations(context.Context, string, map[string]string) error { return nil }

func (f *nodeRecorder) UpdateAnnotations(context.Context, string, func(map[string]string) map[string]string) error {
	return nil
}

func (f *nodeRecorder) ExpireCordon(context.Context, string, string, string, []string) (string, bool, error) {
	return "", true, nil
}

func startIMDSController(t *testing.T, d *nodeRecorder, o Options) *Controller {
	t.Helper()
	return run(t, fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "self"}}), nodes.Options{OnlyNode: "self"}, Deps{Drainer: d}, o)
}

func (c *Controller) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.work) == 0
}

var imdsPolicy = plan.Policy{DrainKinds: []event.Kind{event.SpotInterruption, event.LifecycleTerminate, event.ScheduledChange}}

// F2: the same IMDS event submitted again and again after its drain
// finished (a source that re-reads, a restarted poller) drains once.
func TestSubmitNodeIgnoresFinishedEvents(t *testing.T) {
	d := &nodeRecorder{}
	c := startIMDSController(t, d, Options{Policy: imdsPolicy})
	terminated := event.Event{ID: event.ID(event.LifecycleTerminate, "i-0123456789abcdef0", "Terminated"), Kind: event.LifecycleTerminate,
		Source: event.SourceIMDS, InstanceID: "i-0123456789abcdef0", Action: "Terminated"}
	c.SubmitNode("self", []event.Event{terminated})
	waitFor(t, "the first drain to finish", func() bool { d.mu.Lock(); defer d.mu.Unlock(); return d.drains == 1 && c.idle() })
	for range 150 {
		c.SubmitNode("self", []event.Event{terminated})
	}
	time.Sleep(100 * time.Millisecond)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.drains != 1 || len(d.annotations) != 1 {
		t.Errorf("drains = %d, cordons = %d after 151 submissions of one event; want 1 and 1", d.drains, len(d.annotations))
	}
}

// While a drain is in flight new events restart it: never two at once.
func TestSubmitNodeOneDrainInFlight(t *testing.T) {
	d := &nodeRecorder{hold: make(chan struct{})}
	c := startIMDSController(t, d, Options{Policy: imdsPolicy})
	for i := range 20 {
		c.SubmitNode("self", []event.Event{{ID: event.ID(event.SpotInterruption, "i-0123456789abcdef0", string(rune('a'+i))),
			Kind: event.SpotInterruption, Source: event.SourceIMDS, InstanceID: "i-0123456789abcdef0"}})
	}
	waitFor(t, "a drain to start", func() bool { d.mu.Lock(); defer d.mu.Unlock(); return d.drains > 0 })
	close(d.hold)
	waitFor(t, "the work to finish", c.idle)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.maxInFlight != 1 {
		t.Errorf("at most %d drains in flight at once, want 1", d.maxInFlight)
	}
}

func TestCordonAnnotations(t *testing.T) {
	d := &nodeRecorder{}
	var got []event.Event
	c := startIMDSController(t, d, Options{Policy: imdsPolicy, CordonAnnotations: func(node string, due []event.Event) map[string]string {
		got = due
		return map[string]string{"lifeboat.io/reboot-maintenance": node}
	}})
	now := testClock.Now()
	soon := event.Event{ID: "sc-now", Kind: event.ScheduledChange, Source: event.SourceIMDS, Action: "system-reboot", Deadline: now}
	later := event.Event{ID: "sc-later", Kind: event.ScheduledChange, Source: event.SourceIMDS, Action: "system-reboot", Deadline: now.Add(24 * time.Hour)}
	c.SubmitNode("self", []event.Event{soon, later})
	waitFor(t, "the cordon", func() bool { d.mu.Lock(); defer d.mu.Unlock(); return len(d.annotations) > 0 })
	d.mu.Lock()
	defer d.mu.Unlock()
	if v := d.annotations[0]["lifeboat.io/reboot-maintenance"]; v != "self" {
		t.Errorf("cordon annotations = %v, want the hook's", d.annotations[0])
	}
	if _, ok := d.annotations[0][drain.AnnotationEvents]; !ok {
		t.Errorf("cordon annotations = %v, lost the events annotation", d.annotations[0])
	}
	if d := cmp.Diff([]event.Event{soon}, got); d != "" {
		t.Errorf("hook got due events (-want +got):\n%s", d)
	}
}

// A cancellation undoes the cordon and removes the record of the
// maintenance with it (UndoAnnotations): a reboot marker left behind
// would, at the node's next reboot, undo a later cordon of lifeboat's.
func TestUndoRemovesUndoAnnotations(t *testing.T) {
	d := &nodeRecorder{}
	c := startIMDSController(t, d, Options{Policy: imdsPolicy, UndoAnnotations: []string{"lifeboat.io/reboot-maintenance"}})
	c.SubmitNode("self", []event.Event{{ID: "canceled", Kind: event.ScheduledChangeCanceled, Source: event.SourceIMDS, Action: "system-reboot"}})
	waitFor(t, "the undo", func() bool { d.mu.Lock(); defer d.mu.Unlock(); return len(d.uncordons) > 0 })
	d.mu.Lock()
	defer d.mu.Unlock()
	if diff := cmp.Diff([]string{drain.AnnotationEvents, "lifeboat.io/reboot-maintenance"}, d.uncordons[0]); diff != "" {
		t.Errorf("annotations removed by the undo (-want +got):\n%s", diff)
	}
}

// Issue 14 item 11: a restarted DaemonSet pod reads the same rebalance
// recommendation from the metadata; the node records it as done (and an
// operator has uncordoned it since): nothing is done again.
func TestSubmitNodeIgnoresEventsDoneOnTheNode(t *testing.T) {
	rebalance := event.Event{ID: event.ID(event.RebalanceRecommendation, "i-0123456789abcdef0", "2026-11-25T10:00:00Z"), Kind: event.RebalanceRecommendation,
		Source: event.SourceIMDS, InstanceID: "i-0123456789abcdef0"}
	self := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "self", Annotations: map[string]string{
		AnnotationDoneEvents: `["` + rebalance.ID + `"]`, AnnotationDrained: "2026-11-25T10:00:01Z"}}}
	d := &nodeRecorder{}
	c := run(t, fake.NewClientset(self), nodes.Options{OnlyNode: "self"}, Deps{Drainer: d}, Options{Policy: imdsPolicy})
	c.SubmitNode("self", []event.Event{rebalance})
	time.Sleep(100 * time.Millisecond)
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.annotations) != 0 {
		t.Errorf("cordoned %d times for an event the node records as done; want 0", len(d.annotations))
	}
}
