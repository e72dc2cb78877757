package asg

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/internal/event"
)

// completingAPI completes actions: CompleteLifecycleAction signals entered
// and returns once release is closed.
type completingAPI struct {
	fakeAPI
	entered chan struct{}
	release chan struct{}
}

func (f *completingAPI) CompleteLifecycleAction(context.Context, *autoscaling.CompleteLifecycleActionInput, ...func(*autoscaling.Options)) (*autoscaling.CompleteLifecycleActionOutput, error) {
	close(f.entered)
	<-f.release
	return &autoscaling.CompleteLifecycleActionOutput{}, nil
}

// A heartbeat that falls due while the action is being completed waits for
// the completion; after a completion by this Client the heartbeats of an
// action with a token end (AWS would answer "No active Lifecycle Action
// found"), those of a tokenless action go on (its hook's next action on
// the instance has the same name).
func TestHeartbeatWaitsForCompletion(t *testing.T) {
	tests := []struct {
		name       string
		token      string
		wantBeats  int  // heartbeats sent in all
		wantsEnded bool // KeepAlive returns after the completion
	}{
		{"with a token", "tok-1", 1, true},
		{"tokenless", "", 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Now())
			api := &completingAPI{fakeAPI: fakeAPI{goneAfter: 100}, entered: make(chan struct{}), release: make(chan struct{})}
			c := New(api, clk, discard, Options{})
			a := event.LifecycleAction{GroupName: "g", HookName: "h", Token: tt.token}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- c.KeepAlive(ctx, "i-1234abcd", a, every(time.Minute), time.Time{}, nil) }()
			waitHeartbeats(t, &api.fakeAPI, 1)
			waitTimer(t, clk)

			completed := make(chan error, 1)
			go func() { completed <- c.Complete(context.Background(), "i-1234abcd", a, "CONTINUE") }()
			<-api.entered
			clk.Step(time.Minute) // the next heartbeat is due now
			time.Sleep(50 * time.Millisecond)
			api.mu.Lock()
			during := api.heartbeats
			api.mu.Unlock()
			if during != 1 {
				t.Fatalf("a heartbeat was sent while the action was being completed (%d in all)", during)
			}
			close(api.release)
			if err := <-completed; err != nil {
				t.Fatal(err)
			}
			if tt.wantsEnded {
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("KeepAlive = %v after the completion, want nil", err)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("KeepAlive went on after this Client completed the action")
				}
			} else {
				waitHeartbeats(t, &api.fakeAPI, tt.wantBeats)
			}
			time.Sleep(20 * time.Millisecond)
			api.mu.Lock()
			got := api.heartbeats
			api.mu.Unlock()
			if got != tt.wantBeats {
				t.Errorf("heartbeats = %d, want %d", got, tt.wantBeats)
			}
		})
	}
}

// The turns of actions no longer in use are dropped; completed actions are
// forgotten endedKept after their completion.
func TestTurnsForget(t *testing.T) {
	tr := newTurns()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ended, release := tr.take("i-1 tok-1")
	if ended {
		t.Fatal("a new action reads as ended")
	}
	tr.end("i-1 tok-1", now)
	release()
	if len(tr.held) != 0 {
		t.Errorf("held turns = %d after release, want 0", len(tr.held))
	}
	if ended, release := tr.take("i-1 tok-1"); !ended {
		t.Error("a completed action does not read as ended")
	} else {
		release()
	}
	tr.end("i-2 tok-2", now.Add(endedKept+2*time.Minute))
	if _, ok := tr.ended["i-1 tok-1"]; ok {
		t.Errorf("an action completed %v before is still remembered", endedKept+2*time.Minute)
	}
}
