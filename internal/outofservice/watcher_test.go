package outofservice

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/internal/clocktest"
	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/metrics"
)

// world is a Watcher on fake nodes, writes and EC2, at a fake time.
type world struct {
	t     *testing.T
	w     *Watcher
	clock *clocktesting.FakeClock
	nodes *fakeNodes
	ec2   *fakeEC2
	rec   *record.FakeRecorder
}

// newWorld is a Watcher with --out-of-service-taint.
func newWorld(t *testing.T) *world { return newWorldWith(t, Options{Taint: true}) }

func newWorldWith(t *testing.T, o Options) *world {
	clk := clocktesting.NewFakeClock(clocktest.Epoch)
	nodes := &fakeNodes{byName: map[string]*corev1.Node{}, fail: map[string]error{}}
	e := &fakeEC2{states: map[string]string{}}
	rec := record.NewFakeRecorder(1000)
	w := New(Deps{Nodes: nodes, Writer: nodes, EC2: e, Recorder: rec, Metrics: metrics.New(), Clock: clk,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, o)
	return &world{t: t, w: w, clock: clk, nodes: nodes, ec2: e, rec: rec}
}

// drained adds a node lifeboat cordoned and drained, of instance id.
func (x *world) drained(name, id string) {
	x.nodes.add(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Annotations: map[string]string{
			controller.AnnotationDrained: clocktest.Epoch.Format(time.RFC3339), drain.AnnotationCordoned: "true"}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + id, Unschedulable: true,
			Taints: []corev1.Taint{{Key: "lifeboat.io/spot-interruption", Effect: corev1.TaintEffectNoSchedule}}},
	})
}

func (x *world) sync() { x.w.sync(context.Background()) }

// step advances the clock by d and syncs.
func (x *world) step(d time.Duration) {
	x.clock.Step(d)
	x.sync()
}

func (x *world) stateChange(id, state string, at time.Time) {
	x.w.Observe(event.Event{Kind: event.StateChange, Source: event.SourceSQS, InstanceID: id, Action: state, Time: at})
}

func (x *world) tainted(name string) bool {
	x.t.Helper()
	n := x.nodes.get(name)
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == drain.TaintOutOfService && t.Effect == corev1.TaintEffectNoExecute && t.Value == drain.OutOfServiceValue
	}) && n.Annotations[drain.AnnotationOutOfService] == "true"
}

func (x *world) events(reason string) int {
	n := 0
	for {
		select {
		case e := <-x.rec.Events:
			if strings.Contains(e, " "+reason+" ") {
				n++
			}
		default:
			return n
		}
	}
}

// The harm: a drained node whose instance still runs is never tainted,
// however long lifeboat looks (before, the drain tainted it at once).
func TestNoTaintWhileTheInstanceRuns(t *testing.T) {
	x := newWorld(t)
	x.drained("n1", "i-0000000000000001a")
	x.ec2.set("i-0000000000000001a", StateRunning)
	for range 100 {
		x.step(time.Second)
	}
	if x.tainted("n1") || x.nodes.writes() != 0 {
		t.Fatalf("tainted (%d writes) while the instance runs", x.nodes.writes())
	}
	if got := x.ec2.calls(); got < 2 || got > 4 {
		t.Errorf("%d DescribeInstances calls in 100 s, want one every 30 s after the first 30 s", got)
	}
}

// A state-change notification that the instance stopped or terminated
// taints the node at once, without asking EC2; stopping and shutting-down
// do not: the operating system may still be running.
func TestStateChangeTaints(t *testing.T) {
	for _, tt := range []struct {
		states []string
		want   bool
	}{
		{[]string{StateStopped}, true},
		{[]string{StateTerminated}, true},
		{[]string{StateShuttingDown}, false},
		{[]string{StateStopping}, false},
		{[]string{StateShuttingDown, StateTerminated}, true},
		{[]string{StateStopping, StateStopped}, true},
	} {
		t.Run(strings.Join(tt.states, ","), func(t *testing.T) {
			x := newWorld(t)
			x.drained("n1", "i-0000000000000001a")
			x.sync()
			for i, s := range tt.states {
				x.stateChange("i-0000000000000001a", s, x.clock.Now().Add(time.Duration(i)*time.Millisecond))
			}
			x.sync()
			if got := x.tainted("n1"); got != tt.want {
				t.Fatalf("tainted = %v, want %v", got, tt.want)
			}
			if x.ec2.calls() != 0 {
				t.Errorf("%d DescribeInstances calls: the notification said enough", x.ec2.calls())
			}
			if want := map[bool]int{true: 1}[tt.want]; x.events(ReasonTainted) != want {
				t.Errorf("want %d %s Event", want, ReasonTainted)
			}
		})
	}
}

// Without a notification, EC2 is asked once the node has waited an
// interval for one; a stopped instance is then tainted.
func TestDescribeFallback(t *testing.T) {
	x := newWorld(t)
	x.drained("n1", "i-0000000000000001a")
	x.ec2.set("i-0000000000000001a", StateStopped)
	x.sync()
	x.step(DefaultInterval - time.Second)
	if x.ec2.calls() != 0 || x.tainted("n1") {
		t.Fatalf("asked EC2 (%d calls) or tainted before the node waited an interval for a notification", x.ec2.calls())
	}
	x.step(time.Second)
	if x.ec2.calls() != 1 || !x.tainted("n1") {
		t.Fatalf("after an interval: %d calls, tainted %v; want 1 call and the taint", x.ec2.calls(), x.tainted("n1"))
	}
}

// The taint lifeboat added goes when the instance runs again (EC2's
// "running" is not on the queue: DescribeInstances sees it); a taint it did
// not add stays.
func TestRunningAgainRemovesOnlyOurs(t *testing.T) {
	x := newWorld(t)
	x.drained("ours", "i-0000000000000001a")
	x.drained("theirs", "i-0000000000000002b")
	theirs := x.nodes.get("theirs")
	theirs.Spec.Taints = append(theirs.Spec.Taints, corev1.Taint{Key: drain.TaintOutOfService, Value: "operator", Effect: corev1.TaintEffectNoExecute})
	x.sync()
	x.stateChange("i-0000000000000001a", StateStopped, x.clock.Now())
	x.stateChange("i-0000000000000002b", StateStopped, x.clock.Now())
	x.sync()
	if !x.tainted("ours") {
		t.Fatal("not tainted after the stop")
	}
	x.ec2.set("i-0000000000000001a", StateRunning)
	x.ec2.set("i-0000000000000002b", StateRunning)
	x.step(DefaultInterval)
	n := x.nodes.get("ours")
	if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == drain.TaintOutOfService }) {
		t.Error("lifeboat's taint kept while the instance runs again")
	}
	if _, ok := n.Annotations[drain.AnnotationOutOfService]; ok {
		t.Error("lifeboat's annotation kept")
	}
	if !slices.ContainsFunc(x.nodes.get("theirs").Spec.Taints, func(t corev1.Taint) bool { return t.Key == drain.TaintOutOfService }) {
		t.Error("an operator's out-of-service taint was removed")
	}
	if x.events(ReasonRemoved) != 1 {
		t.Errorf("want one %s Event", ReasonRemoved)
	}
}

// A notification that waited in the queue (older than two intervals) is
// not news: the instance may have run again since. EC2 is asked first.
func TestStaleNotificationIsNotTrusted(t *testing.T) {
	x := newWorld(t)
	x.drained("n1", "i-0000000000000001a")
	x.ec2.set("i-0000000000000001a", StateRunning)
	x.stateChange("i-0000000000000001a", StateStopped, x.clock.Now().Add(-time.Hour))
	x.sync()
	x.step(DefaultInterval)
	if x.tainted("n1") {
		t.Fatal("tainted on an hour-old notification while EC2 says running")
	}
	// A terminated instance never runs again: an old word is enough.
	x.stateChange("i-0000000000000001a", StateTerminated, x.clock.Now().Add(-time.Hour))
	x.step(time.Second)
	if !x.tainted("n1") {
		t.Fatal("not tainted on a notification that the instance terminated")
	}
}

// Only nodes lifeboat handled and still cordoned are looked after: a
// notification about another node changes nothing, and EC2 is not asked
// about it.
func TestOnlyHandledNodes(t *testing.T) {
	x := newWorld(t)
	x.nodes.add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0000000000000001a"}})
	x.drained("uncordoned", "i-0000000000000002b")
	x.nodes.get("uncordoned").Spec.Unschedulable = false // an operator uncordoned it
	x.stateChange("i-0000000000000001a", StateTerminated, x.clock.Now())
	x.stateChange("i-0000000000000002b", StateStopped, x.clock.Now())
	for range 70 {
		x.step(time.Second)
	}
	if x.nodes.writes() != 0 || x.ec2.calls() != 0 {
		t.Fatalf("%d writes and %d DescribeInstances calls for nodes lifeboat does not handle", x.nodes.writes(), x.ec2.calls())
	}
}

// A node lifeboat is still draining (its events annotation) is handled
// too: pods stuck on a dead instance are what the taint is for.
func TestNodeStillDraining(t *testing.T) {
	x := newWorld(t)
	x.nodes.add(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{drain.AnnotationEvents: "[]"}},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0000000000000001a", Unschedulable: true},
	})
	x.stateChange("i-0000000000000001a", StateTerminated, x.clock.Now())
	x.sync()
	if !x.tainted("n1") {
		t.Fatal("not tainted")
	}
}

// EC2 is asked in batches of BatchSize, once an interval, whatever the
// number of nodes; a terminated instance is not asked about again.
func TestDescribeBatchedAndBounded(t *testing.T) {
	x := newWorld(t)
	const n = 2*BatchSize + 50
	for i := range n {
		id := fmt.Sprintf("i-%017x", i+1)
		x.drained(fmt.Sprintf("n%d", i), id)
		x.ec2.set(id, StateRunning)
	}
	x.sync()
	x.step(DefaultInterval)
	if got := x.ec2.batchSizes(); !slices.Equal(got, []int{BatchSize, BatchSize, 50}) {
		t.Fatalf("batches %v, want [%d %d 50]", got, BatchSize, BatchSize)
	}
	for range 29 {
		x.step(time.Second)
	}
	if x.ec2.calls() != 3 {
		t.Fatalf("%d calls within the interval, want 3", x.ec2.calls())
	}
	x.ec2.set(fmt.Sprintf("i-%017x", 1), StateTerminated)
	x.step(time.Second)
	if x.ec2.calls() != 6 {
		t.Fatalf("%d calls after two intervals, want 6", x.ec2.calls())
	}
	x.step(DefaultInterval)
	if got := x.ec2.batchSizes()[6:]; !slices.Equal(got, []int{BatchSize, BatchSize, 49}) {
		t.Errorf("batches after one instance terminated %v, want [%d %d 49]", got, BatchSize, BatchSize)
	}
}

// A failing DescribeInstances is tried again an interval later, not at
// every tick; a failing write is tried again after a pause.
func TestFailuresAreNotRetriedHot(t *testing.T) {
	x := newWorld(t)
	x.drained("n1", "i-0000000000000001a")
	x.ec2.err = errors.New("throttled")
	x.sync()
	for range 60 {
		x.step(time.Second)
	}
	if got := x.ec2.calls(); got != 2 {
		t.Fatalf("%d DescribeInstances calls in 60 s while they fail, want 2", got)
	}
	x.nodes.fail["n1"] = errors.New("apiserver down")
	x.stateChange("i-0000000000000001a", StateStopped, x.clock.Now())
	for range 30 {
		x.step(time.Second)
	}
	if got := x.nodes.attempts(); got < 4 || got > 8 {
		t.Fatalf("%d write attempts in 30 s while writes fail, want a few (doubling pauses)", got)
	}
	delete(x.nodes.fail, "n1")
	x.step(DefaultInterval)
	if !x.tainted("n1") {
		t.Fatal("not tainted once writes succeed")
	}
}

// A deleted node is forgotten; its taint went with it.
func TestDeletedNodeForgotten(t *testing.T) {
	x := newWorld(t)
	x.drained("n1", "i-0000000000000001a")
	x.stateChange("i-0000000000000001a", StateTerminated, x.clock.Now())
	x.sync()
	x.nodes.remove("n1")
	x.step(forgetAfter + time.Second)
	x.w.mu.Lock()
	defer x.w.mu.Unlock()
	if len(x.w.nodes) != 0 || len(x.w.seen) != 0 {
		t.Errorf("still tracked: nodes %v, states %v", x.w.nodes, x.w.seen)
	}
}

// Run acts at once on a notification, not at the next tick.
func TestRunWakesOnNotification(t *testing.T) {
	x := newWorld(t)
	x.drained("n1", "i-0000000000000001a")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- x.w.Run(ctx) }()
	x.stateChange("i-0000000000000001a", StateStopped, x.clock.Now())
	deadline := time.Now().Add(5 * time.Second)
	for !x.nodes.isTainted("n1") {
		if time.Now().After(deadline) {
			t.Fatal("not tainted without a tick")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// fakeNodes is the node cache and the writer: writes show in the cache at
// once.
type fakeNodes struct {
	mu      sync.Mutex
	byName  map[string]*corev1.Node
	fail    map[string]error
	wrote   int
	tried   int
	deleted []string // name/uid
}

func (f *fakeNodes) add(n *corev1.Node) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byName[n.Name] = n
}

func (f *fakeNodes) remove(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.byName, name)
}

func (f *fakeNodes) get(name string) *corev1.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byName[name]
}

func (f *fakeNodes) isTainted(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byName[name].Annotations[drain.AnnotationOutOfService] == "true"
}

func (f *fakeNodes) writes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wrote
}

func (f *fakeNodes) attempts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tried
}

func (f *fakeNodes) List() []*corev1.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*corev1.Node, 0, len(f.byName))
	for _, n := range f.byName {
		out = append(out, n.DeepCopy())
	}
	return out
}

func (f *fakeNodes) WaitSynced(context.Context) error { return nil }

func (f *fakeNodes) MarkOutOfService(_ context.Context, name string) (bool, error) {
	return f.write(name, func(n *corev1.Node) bool {
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == drain.TaintOutOfService }) {
			return false
		}
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: drain.TaintOutOfService, Value: drain.OutOfServiceValue, Effect: corev1.TaintEffectNoExecute})
		n.Annotations[drain.AnnotationOutOfService] = "true"
		return true
	})
}

func (f *fakeNodes) ClearOutOfService(_ context.Context, name string) (bool, error) {
	return f.write(name, func(n *corev1.Node) bool {
		if n.Annotations[drain.AnnotationOutOfService] != "true" {
			return false
		}
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == drain.TaintOutOfService })
		delete(n.Annotations, drain.AnnotationOutOfService)
		return true
	})
}

// DeleteNode records the deletion; like the API server's cache, the node
// stays listed until remove.
func (f *fakeNodes) DeleteNode(_ context.Context, name string, uid types.UID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, name+"/"+string(uid))
	return nil
}

func (f *fakeNodes) deletions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.deleted)
}

func (f *fakeNodes) write(name string, mutate func(*corev1.Node) bool) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tried++
	if err := f.fail[name]; err != nil {
		return false, err
	}
	n, ok := f.byName[name]
	if !ok {
		return false, fmt.Errorf("writing %s: %w", name, drain.ErrNodeGone)
	}
	if !mutate(n) {
		return false, nil
	}
	f.wrote++
	return true, nil
}

// fakeEC2 answers DescribeInstances with the instance-id filter from
// states, as EC2 does: IDs it does not know are left out.
type fakeEC2 struct {
	mu      sync.Mutex
	states  map[string]string
	batches []int
	err     error
}

func (f *fakeEC2) set(id, state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.states[id] = state
}

func (f *fakeEC2) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.batches)
}

func (f *fakeEC2) batchSizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.batches)
}

func (f *fakeEC2) DescribeInstances(_ context.Context, in *ec2.DescribeInstancesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(in.InstanceIds) > 0 || len(in.Filters) != 1 || aws.ToString(in.Filters[0].Name) != "instance-id" {
		return nil, fmt.Errorf("unexpected input: ids %v, filters %d", in.InstanceIds, len(in.Filters))
	}
	ids := in.Filters[0].Values
	f.batches = append(f.batches, len(ids))
	if len(ids) > BatchSize {
		return nil, fmt.Errorf("FilterLimitExceeded: %d values", len(ids))
	}
	if f.err != nil {
		return nil, f.err
	}
	var insts []ec2types.Instance
	for _, id := range ids {
		if s, ok := f.states[id]; ok {
			insts = append(insts, ec2types.Instance{InstanceId: aws.String(id), State: &ec2types.InstanceState{Name: ec2types.InstanceStateName(s)}})
		}
	}
	return &ec2.DescribeInstancesOutput{Reservations: []ec2types.Reservation{{Instances: insts}}}, nil
}
