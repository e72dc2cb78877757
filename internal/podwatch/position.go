package podwatch

import (
	"context"
	"strconv"
	"time"
)

// quiet is how long the shared watch may receive nothing before CaughtUp
// stops waiting for it: a cluster whose pods do not change, where the
// watch says nothing of how far the API server's cache has come.
const quiet = time.Second

// position is the newest resourceVersion the shared watch has received
// (an event's or a bookmark's), when it last moved, and the CaughtUp calls
// waiting for a version not reached yet. Each waiter is woken once, when
// its version is reached or the watch stops: a thousand drains waiting
// through a storm's thousands of events are not each woken by every one.
type position struct {
	rv      uint64
	since   time.Time
	waiters map[chan struct{}]uint64 // closed when the version is reached
	lowest  uint64                   // the lowest version waited for (0: none)
}

// reset forgets the position (the watch stopped); every waiter wakes.
func (p *position) reset() {
	p.rv, p.since = 0, time.Time{}
	for ch := range p.waiters {
		close(ch)
	}
	p.waiters, p.lowest = nil, 0
}

// wait registers a waiter for rv; p.rv is below it.
func (p *position) wait(rv uint64) chan struct{} {
	if p.waiters == nil {
		p.waiters = map[chan struct{}]uint64{}
	}
	ch := make(chan struct{})
	p.waiters[ch] = rv
	if p.lowest == 0 || rv < p.lowest {
		p.lowest = rv
	}
	return ch
}

// forget drops a waiter that stopped waiting (a no-op once woken).
func (p *position) forget(ch chan struct{}) { delete(p.waiters, ch) }

// reached wakes the waiters whose version p.rv has reached.
func (p *position) reached() {
	if p.lowest == 0 || p.rv < p.lowest {
		return
	}
	p.lowest = 0
	for ch, rv := range p.waiters {
		if rv <= p.rv {
			close(ch)
			delete(p.waiters, ch)
		} else if p.lowest == 0 || rv < p.lowest {
			p.lowest = rv
		}
	}
}

// advance records that run's watch received rv (a bookmark's; dispatch
// records an event's).
func (h *Hub) advance(run *struct{}, rv uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.run == run {
		h.advanceLocked(rv)
	}
}

// advanceLocked moves the position to rv if it is newer; h.mu held.
func (h *Hub) advanceLocked(rv uint64) {
	if rv <= h.at.rv {
		return
	}
	h.at.rv, h.at.since = rv, h.clock.Now()
	h.at.reached()
}

// CaughtUp reports whether the shared watch has received resourceVersion
// rv or a later one. The API server serves the watch from its pod watch
// cache, so that cache then holds every pod change up to rv, and a list
// NotOlderThan rv is answered from it at once (no wait, no read of every
// pod from etcd). While the watch is moving, CaughtUp waits up to within
// for it to get there. It returns false at once when the hub runs no
// watch, when rv is not a number, and when the watch has received nothing
// for a second (quiet): in a quiet cluster nothing tells how far the cache
// has come, and the caller lists as it would without the hub.
func (h *Hub) CaughtUp(ctx context.Context, rv string, within time.Duration) bool {
	want, err := strconv.ParseUint(rv, 10, 64)
	if err != nil || want == 0 {
		return false
	}
	deadline := h.clock.Now().Add(within)
	for {
		h.mu.Lock()
		switch {
		case h.run == nil:
			h.mu.Unlock()
			return false
		case h.at.rv >= want:
			h.mu.Unlock()
			return true
		case h.at.since.IsZero() || h.clock.Since(h.at.since) >= quiet:
			h.mu.Unlock()
			return false
		}
		reached := h.at.wait(want)
		h.mu.Unlock()
		left := deadline.Sub(h.clock.Now())
		if left <= 0 {
			h.stopWaiting(reached)
			return false
		}
		t := h.clock.NewTimer(min(left, quiet)) // to see the watch go quiet
		select {
		case <-reached: // reached, or the watch stopped: the loop tells
		case <-t.C():
			h.stopWaiting(reached)
		case <-ctx.Done():
			t.Stop()
			h.stopWaiting(reached)
			return false
		}
		t.Stop()
	}
}

func (h *Hub) stopWaiting(ch chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.at.forget(ch)
}
