package controller

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// cordonFirstMax bounds how long a drain waits for other nodes' cordons.
// A thousand notices at once take the testbed's API server 2-3.5 s to
// cordon (docs/benchmarks.md); with 2 s the first drains started while
// the last 20 % of the cordons were still on their way and slowed them.
// 5 s is 4 % of a Spot notice's two minutes, paid only while cordons
// are still pending.
const cordonFirstMax = 5 * time.Second

// cordonsInFlight bounds the cordon requests sent at once. A burst of a
// thousand notices would otherwise put a thousand requests on the wire
// together: past the API server's streams per HTTP/2 connection, the
// client dials a new TLS connection for each waiting request, and the
// handshakes cost the API server more than the cordons (measured in
// docs/benchmarks.md, "Interruption burst harness"). The API server
// takes a few hundred writes a second, so a few dozen in flight keep it
// busy.
const cordonsInFlight = 32

// cordonGate puts cordons before drains in a burst: a cordon is what stops
// new pods landing on a dying node, so a drain (a pod LIST and evictions,
// which the API server serves on the same cores) waits, a bounded time,
// while any node that arrived is not yet cordoned.
type cordonGate struct {
	mu      sync.Mutex
	pending int           // nodes whose first cordon is not done
	idle    chan struct{} // closed while pending is 0
	slots   chan struct{} // one per cordon request in flight
}

func newCordonGate() *cordonGate {
	idle := make(chan struct{})
	close(idle)
	return &cordonGate{idle: idle, slots: make(chan struct{}, cordonsInFlight)}
}

// begin takes a place for one cordon request, waiting while
// cordonsInFlight are under way; it reports false if ctx ended first.
// end gives the place back.
func (g *cordonGate) begin(ctx context.Context) bool {
	select {
	case g.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (g *cordonGate) end() { <-g.slots }

// add counts a node whose cordon is to come.
func (g *cordonGate) add() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending == 0 {
		g.idle = make(chan struct{})
	}
	g.pending++
}

// done counts that node's first cordon as done (or not needed).
func (g *cordonGate) done() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pending--
	if g.pending == 0 {
		close(g.idle)
	}
}

// wait returns when no cordon is pending, after cordonFirstMax, or when
// ctx ends.
func (g *cordonGate) wait(ctx context.Context, clk clock.WithTicker) {
	g.mu.Lock()
	idle := g.idle
	g.mu.Unlock()
	select {
	case <-idle:
		return
	default:
	}
	t := clk.NewTimer(cordonFirstMax)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C():
	case <-ctx.Done():
	}
}
