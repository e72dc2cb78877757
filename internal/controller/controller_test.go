package controller

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/plan"
	"lifeboat.dev/lifeboat/internal/source/sqs"
)

// fakeDrainer records calls; a drain blocks until release is closed.
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
	return true, nil
}

func (f *fakeDrainer) Drain(ctx context.Context, node string, _ time.Time, _ func(drain.Progress)) (drain.Result, error) {
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

func (f *fakeDrainer) count(m map[string]int, node string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return m[node]
}

type fakeAcker struct {
	mu       sync.Mutex
	acked    []string
	released []string
	delays   []time.Duration
}

func (f *fakeAcker) Ack(_ context.Context, r sqs.Receipt) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acked = append(f.acked, r.MessageID)
	return nil
}

func (f *fakeAcker) Release(_ context.Context, r sqs.Receipt, delay time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, r.MessageID)
	f.delays = append(f.delays, delay)
	return nil
}

func (f *fakeAcker) snapshot() ([]string, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.acked...), append([]string(nil), f.released...)
}

const (
	instA = "i-0aaaaaaaaaaaaaaaa"
	instB = "i-0bbbbbbbbbbbbbbbb"
)

func node(name, instance string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + instance}}
}

func start(t *testing.T, unknown string) (*Controller, *fakeDrainer, *fakeAcker) {
	t.Helper()
	client := fake.NewClientset(node("node-a", instA), node("node-b", instB))
	index := nodes.New(client, nodes.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	d := &fakeDrainer{cordons: map[string]int{}, drains: map[string]int{}, release: make(chan struct{})}
	a := &fakeAcker{}
	c := New(Deps{Nodes: index, Drainer: d, Acker: a, Metrics: metrics.New(), Clock: clock.RealClock{},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))},
		Options{Policy: plan.Policy{DrainKinds: []event.Kind{event.SpotInterruption, event.ScheduledChange}}, UnknownInstance: unknown})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); index.Run(ctx) }()
	go func() { defer wg.Done(); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	select {
	case <-c.Started():
	case <-time.After(10 * time.Second):
		t.Fatal("controller did not start")
	}
	return c, d, a
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

func msg(id string, body []byte) sqs.Message {
	return sqs.Message{Receipt: sqs.Receipt{MessageID: id, ReceiptHandle: "rh-" + id}, Body: body}
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
	c, d, a := start(t, config.UnknownLeave)
	ctx := context.Background()
	c.HandleMessage(ctx, msg("m1", spot(instA)))
	waitFor(t, "the drain to start", func() bool { return d.count(d.drains, "node-a") == 1 })
	c.HandleMessage(ctx, msg("m2", spot(instA))) // duplicate while draining
	c.HandleMessage(ctx, msg("m3", spot(instA)))
	if acked, _ := a.snapshot(); len(acked) != 0 {
		t.Fatalf("messages acked before the drain finished: %v", acked)
	}
	close(d.release)
	waitFor(t, "all three copies acked", func() bool { acked, _ := a.snapshot(); return len(acked) == 3 })
	c.HandleMessage(ctx, msg("m4", spot(instA))) // redelivery after the work is done
	waitFor(t, "the late copy acked", func() bool { acked, _ := a.snapshot(); return len(acked) == 4 })
	if got := d.count(d.drains, "node-a"); got != 1 {
		t.Errorf("drains = %d, want 1", got)
	}
}

func TestMessageNamingTwoNodesAckedWhenBothDone(t *testing.T) {
	c, d, a := start(t, config.UnknownLeave)
	c.HandleMessage(context.Background(), msg("h", health(instA, instB)))
	waitFor(t, "both drains to start", func() bool { return d.count(d.drains, "node-a") == 1 && d.count(d.drains, "node-b") == 1 })
	if acked, _ := a.snapshot(); len(acked) != 0 {
		t.Fatalf("acked while drains run: %v", acked)
	}
	close(d.release)
	waitFor(t, "the message acked once", func() bool { acked, _ := a.snapshot(); return len(acked) == 1 })
}

func TestUnknownInstancePolicy(t *testing.T) {
	for _, tt := range []struct {
		policy       string
		wantAcked    int
		wantReleased int
	}{{config.UnknownLeave, 0, 1}, {config.UnknownDelete, 1, 0}} {
		t.Run(tt.policy, func(t *testing.T) {
			c, d, a := start(t, tt.policy)
			c.HandleMessage(context.Background(), msg("x", spot("i-0cccccccccccccccc")))
			waitFor(t, "the message settled", func() bool { acked, released := a.snapshot(); return len(acked)+len(released) == 1 })
			acked, released := a.snapshot()
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
// within seconds, not hidden for the whole visibility timeout (by default
// the whole Spot notice); each further receive doubles the delay.
func TestForeignMessageHandedBackSoon(t *testing.T) {
	c, _, a := start(t, config.UnknownLeave)
	for i, want := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second} {
		m := msg("foreign", spot("i-0cccccccccccccccc"))
		m.ReceiveCount = i + 1
		c.HandleMessage(context.Background(), m)
		waitFor(t, "the message handed back", func() bool { _, released := a.snapshot(); return len(released) == i+1 })
		a.mu.Lock()
		got := a.delays[i]
		a.mu.Unlock()
		if got != want {
			t.Errorf("receive %d: handed back after %v, want %v", i+1, got, want)
		}
	}
	if d := handBackDelay(100); d != handBackMax {
		t.Errorf("handBackDelay(100) = %v, want the cap %v", d, handBackMax)
	}
}

func TestMalformedAndIrrelevantMessagesAreDeleted(t *testing.T) {
	c, _, a := start(t, config.UnknownLeave)
	c.HandleMessage(context.Background(), msg("bad", []byte("{not json")))
	c.HandleMessage(context.Background(), msg("test", []byte(`{"Event":"autoscaling:TEST_NOTIFICATION","Service":"AWS Auto Scaling","AccountId":"1","RequestId":"r","AutoScalingGroupName":"g","Time":"2019-09-27T02:39:14.183Z"}`)))
	waitFor(t, "both deleted", func() bool { acked, _ := a.snapshot(); return len(acked) == 2 })
}
