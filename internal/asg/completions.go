package asg

import (
	"sync"
	"time"
)

// completedKept is how long a Client remembers the actions it completed,
// so that a heartbeat of one due later is dropped instead of sent. The
// controller stops an action's heartbeats right after completing it; this
// only has to outlast that moment.
const completedKept = 10 * time.Minute

// completions are the actions (by actionKey) this Client completed. A
// heartbeat due after one is not sent: AWS would answer "No active
// Lifecycle Action found", a rejected call for whoever watches them, and
// the heartbeat loop would report the action gone. Heartbeats are not held
// back while a completion is on its way: a slow or retried completion
// must not let the action time out (test/fault
// TestLaunchActionHeartbeatedWhileAutoScalingIsSlow); one sent meanwhile
// may still be answered "No active Lifecycle Action found", and is then
// counted as ended by this Client rather than gone.
type completions struct {
	mu     sync.Mutex
	at     map[string]time.Time // action -> when this Client completed it
	pruned time.Time            // when at was last pruned
}

func newCompletions() *completions { return &completions{at: map[string]time.Time{}} }

// completed reports whether this Client completed the action.
func (c *completions) completed(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.at[key]
	return ok
}

// add records that this Client completed the action and forgets, once a
// minute, actions completed more than completedKept before now.
func (c *completions) add(key string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.pruned) > time.Minute {
		c.pruned = now
		for k, at := range c.at {
			if now.Sub(at) > completedKept {
				delete(c.at, k)
			}
		}
	}
	c.at[key] = now
}
