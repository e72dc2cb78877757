package controller

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// cordonFirstMax bounds how long a drain waits for other nodes' cordons.
const cordonFirstMax = 2 * time.Second

// cordonGate puts cordons before drains in a burst: a cordon is what stops
// new pods landing on a dying node, so a drain (a pod LIST and evictions,
// which the API server serves on the same cores) waits, a bounded time,
// while any node that arrived is not yet cordoned.
type cordonGate struct {
	mu      sync.Mutex
	pending int           // nodes whose first cordon is not done
	idle    chan struct{} // closed while pending is 0
}

func newCordonGate() *cordonGate {
	idle := make(chan struct{})
	close(idle)
	return &cordonGate{idle: idle}
}

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
