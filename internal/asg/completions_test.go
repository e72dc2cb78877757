package asg

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/smithy-go"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/lifecycle"
)

// actionAPI has one lifecycle action. A completion waits in the API until
// completeRelease is closed; a heartbeat, if beatRelease is set, waits
// until it is closed. Once completed, the action answers every call as AWS
// does: "No active Lifecycle Action found".
type actionAPI struct {
	fakeAPI
	completeEntered, completeRelease chan struct{}
	beatEntered, beatRelease         chan struct{}
	completed                        bool
}

var errNoActive = &smithy.GenericAPIError{Code: "ValidationError", Message: "No active Lifecycle Action found with token tok-1"}

func (f *actionAPI) CompleteLifecycleAction(context.Context, *autoscaling.CompleteLifecycleActionInput, ...func(*autoscaling.Options)) (*autoscaling.CompleteLifecycleActionOutput, error) {
	close(f.completeEntered)
	<-f.completeRelease
	f.mu.Lock()
	defer f.mu.Unlock()
	f.completed = true
	return &autoscaling.CompleteLifecycleActionOutput{}, nil
}

func (f *actionAPI) RecordLifecycleActionHeartbeat(context.Context, *autoscaling.RecordLifecycleActionHeartbeatInput, ...func(*autoscaling.Options)) (*autoscaling.RecordLifecycleActionHeartbeatOutput, error) {
	f.mu.Lock()
	f.heartbeats++
	hold := f.beatRelease
	f.mu.Unlock()
	if hold != nil {
		close(f.beatEntered)
		<-hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.completed {
		return nil, errNoActive
	}
	return &autoscaling.RecordLifecycleActionHeartbeatOutput{}, nil
}

func newActionAPI() *actionAPI {
	return &actionAPI{completeEntered: make(chan struct{}), completeRelease: make(chan struct{})}
}

func (f *actionAPI) beats() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.heartbeats
}

// keepAlive starts a Client on a new actionAPI and KeepAlive on the
// action with token (every minute), and waits for its first heartbeat and
// its wait for the next.
func keepAlive(t *testing.T, token string) (*Client, *clocktesting.FakeClock, *actionAPI, event.LifecycleAction, <-chan error) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Now())
	api := newActionAPI()
	c := New(api, clk, discard, Options{})
	a := event.LifecycleAction{GroupName: "g", HookName: "h", Token: token}
	done := make(chan error, 1)
	go func() {
		done <- c.KeepAlive(context.Background(), "i-1234abcd", a, every(time.Minute), time.Time{}, nil)
	}()
	waitHeartbeats(t, &api.fakeAPI, 1)
	waitTimer(t, clk)
	return c, clk, api, a, done
}

func ended(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("KeepAlive went on")
		return nil
	}
}

// A heartbeat due while a completion is slow is sent (the completion may
// fail and be retried: the action must not time out meanwhile); after this
// Client completed an action with a token, no heartbeat is sent and
// KeepAlive ends without reporting the action gone.
func TestNoHeartbeatAfterCompletion(t *testing.T) {
	c, clk, api, a, done := keepAlive(t, "tok-1")

	completed := make(chan error, 1)
	go func() { completed <- c.Complete(context.Background(), "i-1234abcd", a, lifecycle.Continue) }()
	<-api.completeEntered
	clk.Step(time.Minute)
	waitHeartbeats(t, &api.fakeAPI, 2) // sent beside the slow completion
	waitTimer(t, clk)
	close(api.completeRelease)
	if err := <-completed; err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute)
	if err := ended(t, done); err != nil {
		t.Errorf("KeepAlive = %v after the completion, want nil", err)
	}
	if n := api.beats(); n != 2 {
		t.Errorf("heartbeats = %d, want 2 (none after the completion)", n)
	}
}

// A heartbeat sent just before the completion and answered after it ("No
// active Lifecycle Action found") ends KeepAlive as completed, not gone.
func TestHeartbeatCrossingTheCompletion(t *testing.T) {
	c, clk, api, a, done := keepAlive(t, "tok-1")

	api.mu.Lock()
	api.beatEntered, api.beatRelease = make(chan struct{}), make(chan struct{})
	api.mu.Unlock()
	clk.Step(time.Minute)
	<-api.beatEntered // the heartbeat is on its way
	close(api.completeRelease)
	if err := c.Complete(context.Background(), "i-1234abcd", a, lifecycle.Continue); err != nil {
		t.Fatal(err)
	}
	close(api.beatRelease) // and is answered after the completion
	if err := ended(t, done); err != nil {
		t.Errorf("KeepAlive = %v, want nil (completed by this Client, not gone)", err)
	}
}

// Without a token an action is named by instance and hook, which the
// hook's next action on the instance shares: its completion is not
// remembered, and a later heartbeat finds the action gone as before.
func TestTokenlessCompletionNotRemembered(t *testing.T) {
	c, clk, api, a, done := keepAlive(t, "")
	close(api.completeRelease)
	if err := c.Complete(context.Background(), "i-1234abcd", a, lifecycle.Continue); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute)
	if err := ended(t, done); !errors.Is(err, lifecycle.ErrNoActiveAction) {
		t.Errorf("KeepAlive = %v, want ErrNoActiveAction", err)
	}
	if n := api.beats(); n != 2 {
		t.Errorf("heartbeats = %d, want 2", n)
	}
}

// Completed actions are forgotten completedKept after their completion.
func TestCompletionsForget(t *testing.T) {
	c := newCompletions()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.add("i-1 tok-1", now)
	if !c.completed("i-1 tok-1") || c.completed("i-1 tok-2") {
		t.Fatal("completed answers wrong")
	}
	c.add("i-2 tok-2", now.Add(completedKept+2*time.Minute))
	if c.completed("i-1 tok-1") {
		t.Errorf("an action completed %v before is still remembered", completedKept+2*time.Minute)
	}
}
