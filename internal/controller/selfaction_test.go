package controller

import (
	"fmt"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/lifecycle"
)

// Issue 17: in IMDS mode the node's own terminate actions carry no token
// (they are completed by instance ID), one per terminate hook of its group:
// each is heartbeated and completed with CONTINUE after the drain, and its
// heartbeats stop. (The heartbeats during a drain: test/imds.)
func TestTokenlessTerminateActionsHeartbeatedAndCompleted(t *testing.T) {
	lc := &fakeLifecycle{hook: lifecycle.Hook{HeartbeatTimeout: 30 * time.Second, GlobalTimeout: time.Hour}}
	c, _, _ := startLifecycle(t, lc, nil, false, readyNode("node-a", instA))
	var evs []event.Event
	for _, hook := range []string{"drain", "backup"} {
		evs = append(evs, event.Event{ID: "lt-" + hook, Kind: event.LifecycleTerminate, Source: event.SourceIMDS, InstanceID: instA,
			Lifecycle: &event.LifecycleAction{GroupName: "g", HookName: hook, Transition: event.TransitionTerminating}})
	}
	c.SubmitNode("node-a", evs)
	waitFor(t, "both actions completed and their heartbeats stopped", func() bool {
		s := lc.snapshot()
		return len(s.completed) == 2 && s.beating == 0
	})
	s := lc.snapshot()
	if s.started != 2 || fmt.Sprint(s.completed) != "[CONTINUE CONTINUE]" {
		t.Errorf("heartbeat loops %d, completed %v; want 2 loops, two CONTINUE", s.started, s.completed)
	}
}
