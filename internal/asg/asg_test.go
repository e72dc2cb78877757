package asg

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/smithy-go"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/lifecycle"
)

// fakeAPI is a small hand-written Auto Scaling fake for the pure logic here;
// the wire behaviour is tested against test/awssim.
type fakeAPI struct {
	mu          sync.Mutex
	heartbeats  int
	goneAfter   int // heartbeats before "No active Lifecycle Action found"
	failFirst   int // heartbeats that fail with a throttling error first
	hookTimeout int32
	global      int32
	tags        map[string]string
}

func (f *fakeAPI) CompleteLifecycleAction(context.Context, *autoscaling.CompleteLifecycleActionInput, ...func(*autoscaling.Options)) (*autoscaling.CompleteLifecycleActionOutput, error) {
	return nil, &smithy.GenericAPIError{Code: "ValidationError", Message: "No active Lifecycle Action found with instance ID i-1234abcd"}
}

func (f *fakeAPI) RecordLifecycleActionHeartbeat(context.Context, *autoscaling.RecordLifecycleActionHeartbeatInput, ...func(*autoscaling.Options)) (*autoscaling.RecordLifecycleActionHeartbeatOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.heartbeats++
	if f.heartbeats <= f.failFirst {
		return nil, &smithy.GenericAPIError{Code: "Throttling", Message: "Rate exceeded"}
	}
	if f.heartbeats > f.goneAfter {
		return nil, &smithy.GenericAPIError{Code: "ValidationError", Message: "No active Lifecycle Action found with token abc"}
	}
	return &autoscaling.RecordLifecycleActionHeartbeatOutput{}, nil
}

func (f *fakeAPI) DescribeLifecycleHooks(context.Context, *autoscaling.DescribeLifecycleHooksInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeLifecycleHooksOutput, error) {
	hook := types.LifecycleHook{HeartbeatTimeout: aws.Int32(f.hookTimeout), DefaultResult: aws.String("ABANDON")}
	if f.global > 0 {
		hook.GlobalTimeout = aws.Int32(f.global)
	}
	return &autoscaling.DescribeLifecycleHooksOutput{LifecycleHooks: []types.LifecycleHook{hook}}, nil
}

func (f *fakeAPI) DescribeAutoScalingGroups(context.Context, *autoscaling.DescribeAutoScalingGroupsInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error) {
	var tags []types.TagDescription
	for k, v := range f.tags {
		tags = append(tags, types.TagDescription{Key: aws.String(k), Value: aws.String(v)})
	}
	return &autoscaling.DescribeAutoScalingGroupsOutput{AutoScalingGroups: []types.AutoScalingGroup{{Tags: tags}}}, nil
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestHookGlobalTimeout(t *testing.T) {
	tests := []struct {
		name       string
		hb, global int32
		want       time.Duration
	}{
		{"100 x heartbeat", 300, 0, 30000 * time.Second},
		{"capped at 48h", 3600, 0, 48 * time.Hour},
		{"as AWS reports", 3600, 172800, 48 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(&fakeAPI{hookTimeout: tt.hb, global: tt.global}, clocktesting.NewFakeClock(time.Now()), discard, Options{})
			h, err := c.Hook(context.Background(), "g", "h")
			if err != nil {
				t.Fatal(err)
			}
			if h.GlobalTimeout != tt.want {
				t.Errorf("GlobalTimeout = %s, want %s", h.GlobalTimeout, tt.want)
			}
		})
	}
}

func TestCompleteNoActiveAction(t *testing.T) {
	c := New(&fakeAPI{}, clocktesting.NewFakeClock(time.Now()), discard, Options{})
	err := c.Complete(context.Background(), "i-1234abcd", event.LifecycleAction{GroupName: "g", HookName: "h"}, "CONTINUE")
	if !errors.Is(err, lifecycle.ErrNoActiveAction) {
		t.Fatalf("err = %v, want ErrNoActiveAction", err)
	}
}

func TestKeepAliveStopsWhenActionGone(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	api := &fakeAPI{goneAfter: 2}
	c := New(api, clk, discard, Options{})
	done := make(chan error, 1)
	beats := 0
	go func() {
		done <- c.KeepAlive(context.Background(), "i-1234abcd", event.LifecycleAction{GroupName: "g", HookName: "h"}, every(time.Minute), time.Time{}, func(err error) {
			if err == nil {
				beats++
			}
		})
	}()
	// The first heartbeat is immediate (KeepAlive may resume an action
	// whose last heartbeat was an interval ago), then one per interval.
	waitHeartbeats(t, api, 1)
	for i := 2; i <= 3; i++ {
		waitTimer(t, clk)
		clk.Step(time.Minute)
		waitHeartbeats(t, api, i)
	}
	select {
	case err := <-done:
		if !errors.Is(err, lifecycle.ErrNoActiveAction) {
			t.Fatalf("KeepAlive = %v, want ErrNoActiveAction", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("KeepAlive did not stop after the action was gone")
	}
	if beats != 2 {
		t.Errorf("beats = %d, want 2", beats)
	}
}

// A failed heartbeat is tried again after an eighth of the interval,
// doubling, not after a whole interval: that would leave no margin before
// the hook's timeout.
func TestKeepAliveRetriesFailedHeartbeatSooner(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	api := &fakeAPI{goneAfter: 3, failFirst: 2}
	c := New(api, clk, discard, Options{})
	done := make(chan error, 1)
	go func() {
		done <- c.KeepAlive(context.Background(), "i-1234abcd", event.LifecycleAction{GroupName: "g", HookName: "h"}, every(80*time.Second), time.Time{}, nil)
	}()
	waitHeartbeats(t, api, 1) // fails
	for i, step := range []time.Duration{10 * time.Second, 20 * time.Second, 80 * time.Second} {
		waitTimer(t, clk)
		clk.Step(step - time.Millisecond)
		time.Sleep(10 * time.Millisecond)
		api.mu.Lock()
		early := api.heartbeats
		api.mu.Unlock()
		if early != i+1 {
			t.Fatalf("heartbeat %d came %v early", i+2, time.Millisecond)
		}
		clk.Step(time.Millisecond)
		waitHeartbeats(t, api, i+2) // fails, succeeds, gone
	}
	select {
	case err := <-done:
		if !errors.Is(err, lifecycle.ErrNoActiveAction) {
			t.Fatalf("KeepAlive = %v, want ErrNoActiveAction", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("KeepAlive did not stop after the action was gone")
	}
}

// waitTimer waits until KeepAlive waits on the clock.
func waitTimer(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !clk.HasWaiters(); {
		if time.Now().After(deadline) {
			t.Fatal("KeepAlive never waited for its next heartbeat")
		}
		time.Sleep(time.Millisecond)
	}
}

func waitHeartbeats(t *testing.T, api *fakeAPI, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		api.mu.Lock()
		got := api.heartbeats
		api.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("heartbeats = %d, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestOwned(t *testing.T) {
	api := &fakeAPI{tags: map[string]string{"kubernetes.io/cluster/prod": "owned"}}
	tests := []struct {
		name  string
		opts  Options
		group string
		want  bool
	}{
		{"tagged", Options{ClusterName: "prod"}, "g", true},
		{"other cluster", Options{ClusterName: "dev"}, "g", false},
		{"listed", Options{Managed: []string{"g"}}, "g", true},
		{"nothing configured", Options{}, "g", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(api, clocktesting.NewFakeClock(time.Now()), discard, tt.opts)
			got, err := c.Owned(context.Background(), tt.group)
			if err != nil || got != tt.want {
				t.Errorf("Owned = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func every(d time.Duration) *lifecycle.Interval { return lifecycle.NewInterval(d) }

// A changed interval replaces the current wait, counted from the last
// heartbeat: a KeepAlive started with the conservative interval (hook
// unknown) does not sleep through a shorter hook timeout once the hook is
// read, and sends no extra heartbeat when the hook is read at once.
func TestKeepAliveFollowsIntervalChange(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	c := New(&fakeAPI{goneAfter: 100}, clk, discard, Options{})
	iv := lifecycle.NewInterval(lifecycle.UnknownHookInterval)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	beats := make(chan error, 10)
	go func() {
		_ = c.KeepAlive(ctx, "i-1234abcd", event.LifecycleAction{GroupName: "g", HookName: "h"}, iv, time.Time{}, func(err error) { beats <- err })
	}()
	<-beats // the first heartbeat is immediate
	waitTimer(t, clk)
	iv.Set(3 * time.Second)
	select {
	case <-beats:
		t.Fatal("a heartbeat at once when the interval changed; want the next one interval after the last")
	case <-time.After(50 * time.Millisecond):
	}
	waitTimer(t, clk)
	clk.Step(3 * time.Second)
	select {
	case <-beats: // three seconds after the first, not ten
	case <-time.After(5 * time.Second):
		t.Fatal("KeepAlive kept waiting the old interval after it changed")
	}
}
