package controller

import (
	"testing"
	"time"
)

// The node's goroutine, started by the first Submit, took the events'
// wake before Submit had sent it (runNode emptied the wake channel, then
// waited for the lock Submit held to read the events): the wake stayed
// pending and cut the first drain short at once ("new events for the
// node stopped the drain" with no new events; a second drain). Seen as
// TestDrainCutShortIsReportedAndAccumulated failing under -race (a first
// DrainInterrupted with 0 pods). Here the goroutine is given time to get
// that far before Submit wakes it.
func TestFirstSubmitDoesNotCutItsOwnDrainShort(t *testing.T) {
	c, d := start(t)
	c.mu.Lock()
	spawn := c.spawn
	c.spawn = func(f func()) {
		spawn(f)
		time.Sleep(50 * time.Millisecond) // Submit holds the lock: the node's goroutine gets going first
	}
	c.mu.Unlock()
	c.Submit("node-a", instA, time.Time{}, events(t, spot(instA)), 1)
	waitFor(t, "the drain to start", func() bool { return d.count(d.drains, "node-a") >= 1 })
	time.Sleep(100 * time.Millisecond) // a pending wake would cut it short meanwhile
	close(d.release)
	if s := settled(t, c); s.Outcome != Done {
		t.Errorf("settled %+v", s)
	}
	if n := d.count(d.drains, "node-a"); n != 1 {
		t.Errorf("node-a drained %d times for one event, want 1 (the first drain was cut short)", n)
	}
}
