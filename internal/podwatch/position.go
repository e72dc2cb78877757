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
// (an event's or a bookmark's), when it last moved, and a channel closed
// when it moves (nil until someone waits).
type position struct {
	rv    uint64
	since time.Time
	moved chan struct{}
}

// reset forgets the position (the watch stopped); waiters wake.
func (p *position) reset() {
	p.rv, p.since = 0, time.Time{}
	p.wake()
}

func (p *position) wake() {
	if p.moved != nil {
		close(p.moved)
		p.moved = nil
	}
}

// advance records that run's watch received rv.
func (h *Hub) advance(run *struct{}, rv uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.run != run || rv <= h.at.rv {
		return
	}
	h.at.rv, h.at.since = rv, h.clock.Now()
	h.at.wake()
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
		if h.at.moved == nil {
			h.at.moved = make(chan struct{})
		}
		moved := h.at.moved
		h.mu.Unlock()
		left := deadline.Sub(h.clock.Now())
		if left <= 0 {
			return false
		}
		t := h.clock.NewTimer(min(left, quiet)) // to see the watch go quiet
		select {
		case <-moved:
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return false
		}
		t.Stop()
	}
}
