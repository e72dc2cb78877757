package poll

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/internal/kube/clientset"
	"lifeboat.dev/lifeboat/internal/lbdrain"
)

const (
	tgA      = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/web/0123456789abcdef"
	tgB      = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/api/fedcba9876543210"
	tgLambda = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/fn/1111111111111111"
)

// fakeELB serves target groups two a page, and each group's targets as the
// test sets them.
type fakeELB struct {
	mu        sync.Mutex
	groups    []types.TargetGroup
	targets   map[string][]types.TargetHealthDescription
	groupsErr error
	healthErr map[string]error // returned once
	pages     int
	described map[string]int
}

func newFakeELB() *fakeELB {
	return &fakeELB{
		groups: []types.TargetGroup{
			{TargetGroupArn: aws.String(tgA), TargetType: types.TargetTypeEnumInstance},
			{TargetGroupArn: aws.String(tgLambda), TargetType: types.TargetTypeEnumLambda},
			{TargetGroupArn: aws.String(tgB), TargetType: types.TargetTypeEnumIp},
		},
		targets: map[string][]types.TargetHealthDescription{}, healthErr: map[string]error{}, described: map[string]int{},
	}
}

func (f *fakeELB) DescribeTargetGroups(_ context.Context, in *elbv2.DescribeTargetGroupsInput, _ ...func(*elbv2.Options)) (*elbv2.DescribeTargetGroupsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pages++
	if f.groupsErr != nil {
		return nil, f.groupsErr
	}
	from := 0
	if in.Marker != nil {
		from, _ = strconv.Atoi(*in.Marker)
	}
	to := min(from+2, len(f.groups))
	out := &elbv2.DescribeTargetGroupsOutput{TargetGroups: f.groups[from:to]}
	if to < len(f.groups) {
		out.NextMarker = aws.String(strconv.Itoa(to))
	}
	return out, nil
}

func (f *fakeELB) DescribeTargetHealth(_ context.Context, in *elbv2.DescribeTargetHealthInput, _ ...func(*elbv2.Options)) (*elbv2.DescribeTargetHealthOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	arn := aws.ToString(in.TargetGroupArn)
	f.described[arn]++
	if err := f.healthErr[arn]; err != nil {
		delete(f.healthErr, arn)
		return nil, err
	}
	if arn == tgLambda {
		return nil, errors.New("a lambda target group was described")
	}
	return &elbv2.DescribeTargetHealthOutput{TargetHealthDescriptions: f.targets[arn]}, nil
}

func (f *fakeELB) set(arn string, targets ...types.TargetHealthDescription) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.targets[arn] = targets
}

func (f *fakeELB) calls(arn string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.described[arn]
}

func target(id string, port int32, state types.TargetHealthStateEnum) types.TargetHealthDescription {
	return types.TargetHealthDescription{Target: &types.TargetDescription{Id: aws.String(id), Port: aws.Int32(port)},
		TargetHealth: &types.TargetHealth{State: state}}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// world is a node ip-10-0-1-1 (InternalIP 10.0.1.1, instance i-0aaa) with
// a pod 10.0.1.5.
func world(t *testing.T) (*fakeELB, *fake.Clientset, *clocktesting.FakeClock, *Waiter) {
	t.Helper()
	cs := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-1-1"},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.1.1"}, {Type: corev1.NodeHostName, Address: "ip-10-0-1-1"}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default"}, Spec: corev1.PodSpec{NodeName: "ip-10-0-1-1"},
			Status: corev1.PodStatus{PodIP: "10.0.1.5", PodIPs: []corev1.PodIP{{IP: "10.0.1.5"}}}},
	)
	api := newFakeELB()
	clk := clocktesting.NewFakeClock(t0)
	w := New(api, clientset.New(cs), clk, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{Poll: 5 * time.Second})
	return api, cs, clk, w
}

type waitResult struct {
	o   lbdrain.Outcome
	err error
}

// wait runs Wait; steps advances the clock by the poll once each time Wait
// waits, calling each step's change first.
func wait(t *testing.T, clk *clocktesting.FakeClock, w *Waiter, until time.Time, steps ...func()) (lbdrain.Outcome, []lbdrain.Decision) {
	t.Helper()
	var mu sync.Mutex
	var waits []lbdrain.Decision
	done := make(chan waitResult, 1)
	go func() {
		o, err := w.Wait(context.Background(), "ip-10-0-1-1", "i-0aaa", until, func(d lbdrain.Decision) {
			mu.Lock()
			defer mu.Unlock()
			waits = append(waits, d)
		})
		done <- waitResult{o, err}
	}()
	for i := 0; ; i++ {
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatal(r.err)
			}
			mu.Lock()
			defer mu.Unlock()
			return r.o, waits
		case <-time.After(time.Millisecond):
		}
		if !clk.HasWaiters() {
			continue
		}
		if len(steps) > 0 {
			steps[0]()
			steps = steps[1:]
		}
		clk.Step(5 * time.Second)
	}
}

func TestWaitHoldsUntilTargetsGo(t *testing.T) {
	api, _, clk, w := world(t)
	api.set(tgA, target("i-0aaa", 30080, types.TargetHealthStateEnumHealthy), target("i-0bbb", 30080, types.TargetHealthStateEnumHealthy))
	api.set(tgB, target("10.0.1.5", 8080, types.TargetHealthStateEnumDraining), target("10.0.2.7", 8080, types.TargetHealthStateEnumHealthy))
	o, waits := wait(t, clk, w, t0.Add(time.Minute),
		func() { api.set(tgA, target("i-0aaa", 30080, types.TargetHealthStateEnumDraining)) },
		func() { api.set(tgA) }, // deregistration done: no longer listed
		func() { api.set(tgB, target("10.0.1.5", 8080, types.TargetHealthStateEnumUnused)) }, // still listed, unused
	)
	if d := cmp.Diff(lbdrain.Outcome{Result: lbdrain.Drained, Waited: 15 * time.Second}, o); d != "" {
		t.Errorf("outcome (-want +got):\n%s", d)
	}
	if len(waits) != 1 || len(waits[0].Held) != 2 {
		t.Errorf("waiting was called with %v, want once with the two held targets", waits)
	}
	if n := api.calls(tgLambda); n != 0 {
		t.Errorf("the lambda target group was described %d times", n)
	}
	if a, b := api.calls(tgA), api.calls(tgB); a != 3 || b != 4 {
		t.Errorf("described %d and %d times, want 3 (until it held nothing) and 4", a, b)
	}
	if api.pages != 2 {
		t.Errorf("%d DescribeTargetGroups pages, want 2", api.pages)
	}
}

func TestWaitCutShortAtTheBound(t *testing.T) {
	api, _, clk, w := world(t)
	api.set(tgA, target("i-0aaa", 30080, types.TargetHealthStateEnumDraining))
	o, waits := wait(t, clk, w, t0.Add(12*time.Second))
	want := lbdrain.Outcome{Result: lbdrain.NotDrained, Waited: 15 * time.Second,
		Held: []lbdrain.Registration{{TargetGroup: tgA, Type: lbdrain.Instance, ID: "i-0aaa", Port: 30080, State: "draining"}}}
	if d := cmp.Diff(want, o, cmp.Comparer(func(a, b error) bool { return (a == nil) == (b == nil) })); d != "" {
		t.Errorf("outcome (-want +got):\n%s", d)
	}
	if len(waits) != 1 {
		t.Errorf("waiting called %d times, want 1", len(waits))
	}
}

func TestWaitNotHeld(t *testing.T) {
	api, _, clk, w := world(t)
	api.set(tgA, target("i-0bbb", 30080, types.TargetHealthStateEnumHealthy))
	o, waits := wait(t, clk, w, t0.Add(time.Minute))
	if d := cmp.Diff(lbdrain.Outcome{Result: lbdrain.NotHeld}, o); d != "" {
		t.Errorf("outcome (-want +got):\n%s", d)
	}
	if len(waits) != 0 {
		t.Errorf("waiting called for a node nothing holds: %v", waits)
	}
}

func TestWaitDeniedDoesNotWait(t *testing.T) {
	api, _, clk, w := world(t)
	api.groupsErr = &smithy.GenericAPIError{Code: "AccessDenied", Message: "not authorized to perform: elasticloadbalancing:DescribeTargetGroups"}
	o, _ := wait(t, clk, w, t0.Add(time.Minute))
	if o.Result != lbdrain.Unknown || o.Err == nil || o.Waited != 0 {
		t.Errorf("outcome %+v, want lbdrain.Unknown at once with the error", o)
	}
}

// A failed look at a target group that held the node keeps holding: the
// group may still send it traffic.
func TestWaitFailedLookHolds(t *testing.T) {
	api, _, clk, w := world(t)
	api.set(tgA, target("i-0aaa", 30080, types.TargetHealthStateEnumDraining))
	o, _ := wait(t, clk, w, t0.Add(time.Minute),
		func() {
			api.set(tgA)
			api.healthErr[tgA] = &smithy.GenericAPIError{Code: "Throttling", Message: "Rate exceeded"}
		},
	)
	if o.Result != lbdrain.Drained || o.Waited != 10*time.Second {
		t.Errorf("outcome %+v, want drained after 10 s (the failed look held)", o)
	}
}

// A target group deleted during the wait holds nothing.
func TestWaitGroupGone(t *testing.T) {
	api, _, clk, w := world(t)
	api.set(tgA, target("i-0aaa", 30080, types.TargetHealthStateEnumHealthy))
	o, _ := wait(t, clk, w, t0.Add(time.Minute),
		func() {
			api.healthErr[tgA] = &smithy.GenericAPIError{Code: "TargetGroupNotFound", Message: "One or more target groups not found"}
		})
	if o.Result != lbdrain.Drained || o.Waited != 5*time.Second {
		t.Errorf("outcome %+v, want drained after 5 s", o)
	}
}

// The pod IPs noted at the cordon count after the pods are gone, and so
// does the node's InternalIP (hostNetwork pods).
func TestWaitMatchesNotedPodIPsAndInternalIP(t *testing.T) {
	api, cs, clk, w := world(t)
	w.Note(context.Background(), "ip-10-0-1-1")
	if err := cs.CoreV1().Pods("default").Delete(context.Background(), "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	api.set(tgB, target("10.0.1.5", 8080, types.TargetHealthStateEnumDraining), target("10.0.1.1", 9100, types.TargetHealthStateEnumHealthy))
	o, waits := wait(t, clk, w, t0.Add(time.Minute), func() { api.set(tgB) })
	if o.Result != lbdrain.Drained || len(waits) != 1 || len(waits[0].Held) != 2 {
		t.Errorf("outcome %+v, waits %v: want both IPs held, then drained", o, waits)
	}
	w.Forget("ip-10-0-1-1")
	api.set(tgB, target("10.0.1.5", 8080, types.TargetHealthStateEnumDraining))
	clk.Step(time.Minute) // past the health cache
	if o, _ := wait(t, clk, w, clk.Now().Add(time.Minute)); o.Result != lbdrain.NotHeld {
		t.Errorf("after Forget, the gone pod's IP still matched: %+v", o)
	}
}

// Two waits within GroupsTTL list the target groups once; one poll's
// health answers serve the other node's wait too.
func TestTargetGroupsListedOnce(t *testing.T) {
	api, _, clk, w := world(t)
	api.set(tgA, target("i-0bbb", 30080, types.TargetHealthStateEnumHealthy))
	for range 2 {
		if o, _ := wait(t, clk, w, t0.Add(time.Minute)); o.Result != lbdrain.NotHeld {
			t.Fatalf("outcome %+v", o)
		}
	}
	if api.pages != 2 || api.calls(tgA) != 1 {
		t.Errorf("%d pages and %d target health calls, want 2 (one listing) and 1", api.pages, api.calls(tgA))
	}
	clk.Step(time.Minute)
	if o, _ := wait(t, clk, w, clk.Now().Add(time.Minute)); o.Result != lbdrain.NotHeld {
		t.Fatalf("outcome %+v", o)
	}
	if api.pages != 4 {
		t.Errorf("%d pages after the TTL, want 4 (listed again)", api.pages)
	}
}
