package intake

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"lifeboat.dev/lifeboat/internal/clocktest"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/kube/clientset"
	"lifeboat.dev/lifeboat/internal/message"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/plan"
	"lifeboat.dev/lifeboat/internal/source/sqs"
)

const (
	instA = "i-0aaaaaaaaaaaaaaaa"
	instB = "i-0bbbbbbbbbbbbbbbb"
	instC = "i-0cccccccccccccccc" // not a node of the cluster
)

// fakeDrainer counts cordons and drains; a drain blocks until release is closed.
type fakeDrainer struct {
	mu      sync.Mutex
	cordons map[string]int
	drains  map[string]int
	release chan struct{}
}

func (f *fakeDrainer) Cordon(_ context.Context, node string, _ []string, _ string, _ map[string]string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cordons[node]++
	return f.cordons[node] == 1, nil
}

func (f *fakeDrainer) Uncordon(context.Context, string, string, []string) (bool, error) {
	return false, nil
}

func (f *fakeDrainer) Drain(ctx context.Context, node string, _ drain.Deadline, _ func(drain.Progress)) (drain.Result, error) {
	f.mu.Lock()
	f.drains[node]++
	f.mu.Unlock()
	select {
	case <-f.release:
	case <-ctx.Done():
		return drain.Result{}, ctx.Err()
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

// fakeSource records acknowledgements.
type fakeSource struct {
	mu       sync.Mutex
	acked    []string
	released []string
	delays   []time.Duration
}

func (f *fakeSource) Ack(_ context.Context, r sqs.Receipt) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acked = append(f.acked, r.MessageID)
	return nil
}

func (f *fakeSource) Release(_ context.Context, r sqs.Receipt, delay time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, r.MessageID)
	f.delays = append(f.delays, delay)
	return nil
}

func (f *fakeSource) snapshot() (acked, released []string, delays []time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.acked...), append([]string(nil), f.released...), append([]time.Duration(nil), f.delays...)
}

func node(name, instance string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + instance}}
}

// start runs an Intake in front of a real controller (fake drainer) for
// nodes node-a (instA) and node-b (instB).
func start(t *testing.T, o Options, nodeList ...*corev1.Node) (*Intake, *fakeDrainer, *fakeSource) {
	t.Helper()
	if len(nodeList) == 0 {
		nodeList = []*corev1.Node{node("node-a", instA), node("node-b", instB)}
	}
	client := fake.NewClientset()
	for _, n := range nodeList {
		if _, err := client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	index := nodes.New(clientset.New(client), nodes.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	d := &fakeDrainer{cordons: map[string]int{}, drains: map[string]int{}, release: make(chan struct{})}
	src := &fakeSource{}
	m := metrics.New()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctrl := controller.New(controller.Deps{Nodes: index, Drainer: d, Metrics: m, Clock: clocktest.AtEpoch(), Log: log},
		controller.Options{Policy: plan.Policy{DrainKinds: []event.Kind{event.SpotInterruption, event.ScheduledChange}}})
	in := New(index, ctrl, src, m, log, o)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); index.Run(ctx) }()
	go func() { defer wg.Done(); _ = ctrl.Run(ctx) }()
	go func() { defer wg.Done(); _ = in.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	select {
	case <-ctrl.Started():
	case <-time.After(10 * time.Second):
		t.Fatal("controller did not start")
	}
	return in, d, src
}

func spot(instance string) []byte {
	return []byte(`{"version":"0","id":"` + instance + `-spot","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2",
		"account":"123456789012","time":"2026-11-21T12:00:00Z","region":"us-east-1","resources":[],
		"detail":{"instance-id":"` + instance + `","instance-action":"terminate"}}`)
}

func health(instances ...string) []byte {
	ents := ""
	for i, id := range instances {
		if i > 0 {
			ents += ","
		}
		ents += `{"entityValue":"` + id + `"}`
	}
	return []byte(`{"version":"0","id":"h1","detail-type":"AWS Health Event","source":"aws.health","account":"123456789012",
		"time":"2026-11-21T12:00:00Z","region":"us-east-1","resources":[],
		"detail":{"eventArn":"arn:aws:health:us-east-1::event/EC2/X/1","service":"EC2","eventTypeCode":"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
		"eventTypeCategory":"scheduledChange","startTime":"Sat, 21 Nov 2026 12:00:00 GMT","affectedEntities":[` + ents + `]}}`)
}

func terminateAction(instance string) []byte {
	return []byte(`{"version":"0","id":"t1","detail-type":"EC2 Instance-terminate Lifecycle Action","source":"aws.autoscaling",
		"account":"123456789012","time":"2026-11-21T12:00:00Z","region":"us-east-1","resources":[],
		"detail":{"LifecycleActionToken":"tok","AutoScalingGroupName":"g","LifecycleHookName":"h","EC2InstanceId":"` + instance + `",
		"LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING"}}`)
}

func msg(id string, body []byte) sqs.Message {
	return sqs.Message{Receipt: sqs.Receipt{MessageID: id, ReceiptHandle: "rh-" + id}, Body: body, ReceiveCount: 1}
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

func TestDuplicatesMakeOneDrainAndEveryCopyIsAcked(t *testing.T) {
	in, d, src := start(t, Options{UnknownInstance: config.UnknownLeave})
	ctx := context.Background()
	in.Handle(ctx, msg("m1", spot(instA)))
	waitFor(t, "the drain to start", func() bool { return d.count(d.drains, "node-a") == 1 })
	in.Handle(ctx, msg("m2", spot(instA))) // duplicate while draining
	in.Handle(ctx, msg("m3", spot(instA)))
	if acked, _, _ := src.snapshot(); len(acked) != 0 {
		t.Fatalf("messages acked before the drain finished: %v", acked)
	}
	close(d.release)
	waitFor(t, "all three copies acked", func() bool { acked, _, _ := src.snapshot(); return len(acked) == 3 })
	in.Handle(ctx, msg("m4", spot(instA))) // redelivery after the work is done
	waitFor(t, "the late copy acked", func() bool { acked, _, _ := src.snapshot(); return len(acked) == 4 })
	if got := d.count(d.drains, "node-a"); got != 1 {
		t.Errorf("drains = %d, want 1", got)
	}
}

func TestMessageNamingTwoNodesAckedWhenBothDone(t *testing.T) {
	in, d, src := start(t, Options{UnknownInstance: config.UnknownLeave})
	in.Handle(context.Background(), msg("h", health(instA, instB)))
	waitFor(t, "both drains to start", func() bool { return d.count(d.drains, "node-a") == 1 && d.count(d.drains, "node-b") == 1 })
	if acked, _, _ := src.snapshot(); len(acked) != 0 {
		t.Fatalf("acked while drains run: %v", acked)
	}
	close(d.release)
	waitFor(t, "the message acked once", func() bool { acked, _, _ := src.snapshot(); return len(acked) == 1 })
}

func TestUnknownInstancePolicy(t *testing.T) {
	for _, tt := range []struct {
		policy       config.UnknownPolicy
		wantAcked    int
		wantReleased int
	}{{config.UnknownLeave, 0, 1}, {config.UnknownDelete, 1, 0}} {
		t.Run(string(tt.policy), func(t *testing.T) {
			in, d, src := start(t, Options{UnknownInstance: tt.policy})
			in.Handle(context.Background(), msg("x", spot(instC)))
			waitFor(t, "the message settled", func() bool { acked, released, _ := src.snapshot(); return len(acked)+len(released) == 1 })
			acked, released, _ := src.snapshot()
			if len(acked) != tt.wantAcked || len(released) != tt.wantReleased {
				t.Errorf("acked %v released %v", acked, released)
			}
			if d.count(d.cordons, "node-a")+d.count(d.cordons, "node-b") != 0 {
				t.Error("a node was cordoned for a foreign instance")
			}
		})
	}
}

// Issue 14 item 7: a message for another cluster's instance is handed back
// at once, not hidden for the whole visibility timeout (by default the whole
// Spot notice); the next receives wait 1 s, from the 11th doubling up to
// 10 s (issue 17: several clusters on one queue).
func TestForeignMessageHandedBackSoon(t *testing.T) {
	in, _, src := start(t, Options{UnknownInstance: config.UnknownLeave})
	for i, want := range []time.Duration{0, time.Second, time.Second, time.Second} {
		m := msg("foreign", spot(instC))
		m.ReceiveCount = i + 1
		in.Handle(context.Background(), m)
		waitFor(t, "the message handed back", func() bool { _, released, _ := src.snapshot(); return len(released) == i+1 })
		if _, _, delays := src.snapshot(); delays[i] != want {
			t.Errorf("receive %d: handed back after %v, want %v", i+1, delays[i], want)
		}
	}
	for n, want := range map[int]time.Duration{10: time.Second, 11: 2 * time.Second, 12: 4 * time.Second, 13: 8 * time.Second, 14: 10 * time.Second} {
		if d := HandBackDelay(n); d != want {
			t.Errorf("HandBackDelay(%d) = %v, want %v", n, d, want)
		}
	}
	if d := HandBackDelay(100); d != handBackMax || handBackMax > 10*time.Second {
		t.Errorf("HandBackDelay(100) = %v, want the cap %v", d, handBackMax)
	}
}

func TestMalformedAndIrrelevantMessagesAreDeleted(t *testing.T) {
	in, _, src := start(t, Options{UnknownInstance: config.UnknownLeave})
	in.Handle(context.Background(), msg("bad", []byte("{not json")))
	in.Handle(context.Background(), msg("test", []byte(`{"Event":"autoscaling:TEST_NOTIFICATION","Service":"AWS Auto Scaling","AccountId":"1","RequestId":"r","AutoScalingGroupName":"g","Time":"2019-09-27T02:39:14.183Z"}`)))
	waitFor(t, "both deleted", func() bool { acked, _, _ := src.snapshot(); return len(acked) == 2 })
}

// A message redelivered after a restart whose events the node records as
// done (lifeboat died between finishing the node and deleting the message)
// is deleted without acting again; a new event for the node is acted on.
func TestEventsDoneOnNodeAreNotRepeated(t *testing.T) {
	done, _ := json.Marshal([]string{"spot-interruption-older", spotID(t, instA)})
	a := node("node-a", instA)
	a.Annotations = map[string]string{controller.AnnotationDoneEvents: string(done), controller.AnnotationDrained: "2026-11-21T12:01:00Z"}
	in, d, src := start(t, Options{UnknownInstance: config.UnknownLeave}, a, node("node-b", instB))
	close(d.release)
	in.Handle(context.Background(), msg("again", spot(instA)))
	waitFor(t, "the redelivered message acked", func() bool { acked, _, _ := src.snapshot(); return len(acked) == 1 })
	if got := d.count(d.cordons, "node-a"); got != 0 {
		t.Errorf("cordons = %d for an event already done, want 0", got)
	}
	in.Handle(context.Background(), msg("new", spot(instB)))
	waitFor(t, "the new event drained and acked", func() bool { acked, _, _ := src.snapshot(); return len(acked) == 2 && d.count(d.drains, "node-b") == 1 })
}

// fakeController records what the intake submits and lets the test settle it.
type fakeController struct {
	mu      sync.Mutex
	nodes   []string
	actions []event.Event
	tickets []controller.Ticket
	settled chan controller.Settlement
}

func (f *fakeController) Submit(node, _ string, _ time.Time, _ []event.Event, t controller.Ticket) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes = append(f.nodes, node)
	f.tickets = append(f.tickets, t)
}

func (f *fakeController) SubmitAction(e event.Event, t controller.Ticket) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actions = append(f.actions, e)
	f.tickets = append(f.tickets, t)
}

func (f *fakeController) Settled() <-chan controller.Settlement { return f.settled }

// What the controller says of a message's work decides its fate; a
// terminate action of an instance that is not a node goes to the
// controller when lifecycle actions are completed (issue 14 item 9).
func TestSettlementDecidesTheMessage(t *testing.T) {
	for _, tc := range []struct {
		name        string
		body        []byte
		o           Options
		outcome     controller.Outcome
		wantActions int
		wantAcked   bool
		wantDelay   time.Duration // released after, when not acked
	}{
		{"node work done: deleted", spot(instA), Options{}, controller.Done, 0, true, 0},
		{"node work failed: back when its visibility ends", spot(instA), Options{}, controller.Failed, 0, false, -1},
		{"terminate action of a non-node, completed: deleted", terminateAction(instC), Options{Lifecycle: true}, controller.Done, 1, true, 0},
		{"terminate action of another cluster's group, leave: handed back", terminateAction(instC), Options{Lifecycle: true, UnknownInstance: config.UnknownLeave}, controller.Foreign, 1, false, 0 /* at once on the first receive */},
		{"terminate action of another cluster's group, delete: deleted", terminateAction(instC), Options{Lifecycle: true, UnknownInstance: config.UnknownDelete}, controller.Foreign, 1, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(node("node-a", instA))
			index := nodes.New(clientset.New(client), nodes.Options{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go index.Run(ctx)
			if err := index.WaitSynced(ctx); err != nil {
				t.Fatal(err)
			}
			fc := &fakeController{settled: make(chan controller.Settlement, 1)}
			src := &fakeSource{}
			in := New(index, fc, src, metrics.New(), slog.New(slog.NewTextHandler(io.Discard, nil)), tc.o)
			done := make(chan struct{})
			go func() { defer close(done); _ = in.Run(ctx) }()
			in.Handle(ctx, msg("m", tc.body))
			fc.mu.Lock()
			tickets, actions := fc.tickets, len(fc.actions)
			fc.mu.Unlock()
			if len(tickets) != 1 || actions != tc.wantActions {
				t.Fatalf("submitted %d pieces (%d actions), want 1 (%d)", len(tickets), actions, tc.wantActions)
			}
			fc.settled <- controller.Settlement{Ticket: tickets[0], Outcome: tc.outcome}
			waitFor(t, "the message settled", func() bool { a, r, _ := src.snapshot(); return len(a)+len(r) == 1 })
			acked, _, delays := src.snapshot()
			if (len(acked) == 1) != tc.wantAcked || !tc.wantAcked && delays[0] != tc.wantDelay {
				t.Errorf("acked %v, released after %v; want acked %v, else released after %v", acked, delays, tc.wantAcked, tc.wantDelay)
			}
		})
	}
}

// spotID is the event ID the parser gives the Spot notice of instance.
func spotID(t *testing.T, instance string) string {
	t.Helper()
	res, err := message.Parse(spot(instance))
	if err != nil || len(res.Events) != 1 {
		t.Fatalf("Parse: %v, %+v", err, res)
	}
	return res.Events[0].ID
}

// Options.Observe (--out-of-service-taint) is shown the events of the
// cluster's nodes, a state change's state included, and nothing about an
// instance that is no node.
func TestObserveSeesEventsOfNodes(t *testing.T) {
	var mu sync.Mutex
	var seen []event.Event
	in, _, _ := start(t, Options{UnknownInstance: config.UnknownDelete, Observe: func(e event.Event) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, e)
	}})
	stateChange := func(instance, state string) []byte {
		return []byte(`{"version":"0","id":"` + instance + `-sc","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2",
		"account":"123456789012","time":"2026-11-21T12:00:00Z","region":"us-east-1","resources":[],
		"detail":{"instance-id":"` + instance + `","state":"` + state + `"}}`)
	}
	in.Handle(context.Background(), msg("a", stateChange(instA, "stopped")))
	in.Handle(context.Background(), msg("c", stateChange(instC, "terminated")))
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0].Kind != event.StateChange || seen[0].InstanceID != instA || seen[0].Action != "stopped" {
		t.Fatalf("observed %+v, want the one state change of %s (stopped)", seen, instA)
	}
}
