package asg

import (
	"sync"
	"time"
)

// endedKept is how long a Client remembers the actions it completed, so
// that a heartbeat of one sent later is dropped instead of sent. The
// controller stops an action's heartbeats right after completing it; this
// only has to outlast that moment.
const endedKept = 10 * time.Minute

// turns gives the calls that name one lifecycle action one at a time: a
// heartbeat is never on the wire beside the action's completion, and none
// is sent after this Client completed it. AWS answers such a heartbeat
// "No active Lifecycle Action found": harmless to the instance, but the
// heartbeat loop would report the action gone, and a watcher of the Auto
// Scaling calls sees a rejected call for every action that overlapped
// (TestRolloutUnderLoad did, about one run in a hundred).
type turns struct {
	mu     sync.Mutex
	held   map[string]*turn
	ended  map[string]time.Time // action -> when this Client completed it
	pruned time.Time            // when ended was last pruned
}

type turn struct {
	sync.Mutex
	waiting int // callers holding or waiting for the turn
}

func newTurns() *turns { return &turns{held: map[string]*turn{}, ended: map[string]time.Time{}} }

// take waits for the action's turn. ended reports that this Client
// completed the action already. release gives the turn back.
func (t *turns) take(key string) (ended bool, release func()) {
	t.mu.Lock()
	u := t.held[key]
	if u == nil {
		u = &turn{}
		t.held[key] = u
	}
	u.waiting++
	t.mu.Unlock()
	u.Lock()
	t.mu.Lock()
	_, ended = t.ended[key]
	t.mu.Unlock()
	return ended, func() {
		u.Unlock()
		t.mu.Lock()
		defer t.mu.Unlock()
		if u.waiting--; u.waiting == 0 {
			delete(t.held, key)
		}
	}
}

// end records that this Client completed the action (called during its
// turn) and forgets, once a minute, actions completed more than endedKept
// before now.
func (t *turns) end(key string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.Sub(t.pruned) > time.Minute {
		t.pruned = now
		for k, at := range t.ended {
			if now.Sub(at) > endedKept {
				delete(t.ended, k)
			}
		}
	}
	t.ended[key] = now
}
