package controller

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"lifeboat.dev/lifeboat/internal/clocktest"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/kube/clientset"
	"lifeboat.dev/lifeboat/internal/message"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/plan"
)

// fakeDrainer records calls; a drain blocks until release is closed.
type fakeDrainer struct {
	mu      sync.Mutex
	cordons map[string]int
	drains  map[string]int
	release chan struct{}
	pods    []string // the pods a drain reports evicted
	// listed are the pods a drain reports it listed (drain.Progress.Pods);
	// nil: a drain reports none, and the forecast lists them.
	listed []corev1.Pod
	// deadlines are the deadlines the drains were given, in order.
	deadlines []time.Time
	// enforced says, for each drain, whether AWS enforces its deadline.
	enforced []bool
}

func (f *fakeDrainer) lastDeadline() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.deadlines) == 0 {
		return time.Time{}
	}
	return f.deadlines[len(f.deadlines)-1]
}

func (f *fakeDrainer) Cordon(_ context.Context, node string, _ []string, _ string, _ map[string]string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cordons[node]++
	return f.cordons[node] == 1, nil
}

func (f *fakeDrainer) Uncordon(context.Context, string, string, []string) (bool, error) {
	return true, nil
}

func (f *fakeDrainer) Drain(ctx context.Context, node string, deadline drain.Deadline, progress func(drain.Progress)) (drain.Result, error) {
	f.mu.Lock()
	f.drains[node]++
	f.deadlines = append(f.deadlines, deadline.At)
	f.enforced = append(f.enforced, deadline.Enforced)
	f.mu.Unlock()
	if progress != nil { // as the drain does once it has listed: the forecast starts
		progress(drain.Progress{Total: 1, Pods: f.listed})
	}
	select {
	case <-f.release:
	case <-ctx.Done():
		return drain.Result{}, ctx.Err()
	}
	if len(f.pods) > 0 {
		return drain.Result{Evicted: len(f.pods), Pods: f.pods}, nil
	}
	return drain.Result{Evicted: 1}, nil
}

func (f *fakeDrainer) SetAnnotations(context.Context, string, map[string]string) error { return nil }

func (f *fakeDrainer) UpdateAnnotations(context.Context, string, func(map[string]string) map[string]string) error {
	return nil
}

func (f *fakeDrainer) ExpireCordon(context.Context, string, string, string, []string) (string, bool, error) {
	return "", true, nil
}

func (f *fakeDrainer) count(m map[string]int, node string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return m[node]
}

const (
	instA = "i-0aaaaaaaaaaaaaaaa"
	instB = "i-0bbbbbbbbbbbbbbbb"
)

func node(name, instance string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + instance}}
}

// testClock is the controller tests' clock: it reads clocktest.Epoch, the
// date of the fixtures' events, when the tests start and runs at the wall
// clock's pace, so that deadlines computed from those events mean the same
// on any day. Times handed to the controller come from it, never from
// time.Now.
var testClock = clocktest.AtEpoch()

// run starts a node index over client (restricted by no) and a controller
// with d and o (Metrics, Clock and Log default to fresh, a clock that
// starts at clocktest.Epoch, the fixtures' date, and discarding), waits until it has started and stops both when the test ends.
func run(t *testing.T, client kubernetes.Interface, no nodes.Options, d Deps, o Options) *Controller {
	t.Helper()
	d.Nodes = nodes.New(clientset.New(client), no)
	if d.Metrics == nil {
		d.Metrics = metrics.New()
	}
	if d.Clock == nil {
		d.Clock = testClock
	}
	if d.Log == nil {
		d.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := New(d, o)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); d.Nodes.Run(ctx) }()
	go func() { defer wg.Done(); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	select {
	case <-c.Started():
	case <-time.After(10 * time.Second):
		t.Fatal("controller did not start")
	}
	return c
}

// start runs a controller for nodes node-a (instA) and node-b (instB).
func start(t *testing.T) (*Controller, *fakeDrainer) {
	t.Helper()
	d := &fakeDrainer{cordons: map[string]int{}, drains: map[string]int{}, release: make(chan struct{})}
	c := run(t, fake.NewClientset(node("node-a", instA), node("node-b", instB)), nodes.Options{}, Deps{Drainer: d},
		Options{Policy: plan.Policy{DrainKinds: []event.Kind{event.SpotInterruption, event.ScheduledChange}}})
	return c, d
}

func spot(instance string) []byte {
	return []byte(`{"version":"0","id":"` + instance + `-spot","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2",
		"account":"123456789012","time":"2026-11-21T12:00:00Z","region":"us-east-1","resources":[],
		"detail":{"instance-id":"` + instance + `","instance-action":"terminate"}}`)
}

// events parses a message body as the queue intake does.
func events(t *testing.T, body []byte) []event.Event {
	t.Helper()
	res, err := message.Parse(body)
	if err != nil || len(res.Events) == 0 {
		t.Fatalf("Parse: %v, %+v", err, res)
	}
	return res.Events
}

// settled waits for the next settlement.
func settled(t *testing.T, c *Controller) Settlement {
	t.Helper()
	select {
	case s := <-c.Settled():
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a settlement")
		return Settlement{}
	}
}

// Copies of the same events submitted while the node's work runs (and
// after it is done) make one drain; every copy's ticket is settled Done.
func TestDuplicatesMakeOneDrainAndEveryTicketIsSettled(t *testing.T) {
	c, d := start(t)
	evs := events(t, spot(instA))
	c.Submit("node-a", instA, time.Time{}, evs, 1)
	waitFor(t, "the drain to start", func() bool { return d.count(d.drains, "node-a") == 1 })
	c.Submit("node-a", instA, time.Time{}, evs, 2)
	c.Submit("node-a", instA, time.Time{}, evs, 3)
	select {
	case s := <-c.Settled():
		t.Fatalf("settled %+v before the drain finished", s)
	case <-time.After(50 * time.Millisecond):
	}
	close(d.release)
	got := map[Ticket]Outcome{}
	for range 3 {
		s := settled(t, c)
		got[s.Ticket] = s.Outcome
	}
	c.Submit("node-a", instA, time.Time{}, evs, 4) // redelivered after the work is done
	s := settled(t, c)
	got[s.Ticket] = s.Outcome
	if want := map[Ticket]Outcome{1: Done, 2: Done, 3: Done, 4: Done}; !maps.Equal(got, want) {
		t.Errorf("settlements %v, want %v", got, want)
	}
	if n := d.count(d.drains, "node-a"); n != 1 {
		t.Errorf("drains = %d, want 1", n)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
