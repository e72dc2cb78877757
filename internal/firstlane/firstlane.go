// Package firstlane lets one of lifeboat's Kubernetes clients go before the
// others at the API server: while a node write (a cordon) is in flight,
// the drains' requests wait, a bounded time.
//
// Each client has a rate limiter of its own (cmd/lifeboat's lanes), but at
// the API server they all share one flow of API Priority and Fairness:
// lifeboat's ServiceAccount, served first in, first out. In a storm of a
// thousand notices the cordons queued there behind the evictions of the
// nodes cordoned first (docs/benchmarks.md, 5,000 × 2: 6.5 times the
// floor's cordon time). Cordons first stops new pods landing on every
// dying node; the evictions follow a moment later.
package firstlane

import (
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Gate holds the requests of the lanes that wait (Then) while requests of
// the first lane (First) are in flight, each at most MaxWait. The zero
// Gate is not usable: use New.
type Gate struct {
	maxWait time.Duration
	clock   clock.WithTicker

	mu       sync.Mutex
	inFlight int
	clear    chan struct{} // closed when inFlight drops to 0
}

// New returns a Gate whose waiting requests wait at most maxWait.
func New(maxWait time.Duration, clk clock.WithTicker) *Gate {
	c := make(chan struct{})
	close(c)
	return &Gate{maxWait: maxWait, clock: clk, clear: c}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// First wraps the transport of the lane that goes first: each request
// counts as in flight until its response headers arrive.
func (g *Gate) First(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		g.enter()
		defer g.leave()
		return rt.RoundTrip(r)
	})
}

// Then wraps the transport of a lane that waits: a request waits while a
// first-lane request is in flight, at most MaxWait, then goes.
func (g *Gate) Then(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if err := g.wait(r); err != nil {
			return nil, err
		}
		return rt.RoundTrip(r)
	})
}

func (g *Gate) enter() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inFlight == 0 {
		g.clear = make(chan struct{})
	}
	g.inFlight++
}

func (g *Gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inFlight--
	if g.inFlight == 0 {
		close(g.clear)
	}
}

// wait returns once no first-lane request is in flight, MaxWait has
// passed, or the request's context is done (its error).
func (g *Gate) wait(r *http.Request) error {
	g.mu.Lock()
	clear := g.clear
	g.mu.Unlock()
	select {
	case <-clear:
		return nil
	default:
	}
	t := g.clock.NewTimer(g.maxWait)
	defer t.Stop()
	select {
	case <-clear:
	case <-t.C():
	case <-r.Context().Done():
		return r.Context().Err()
	}
	return nil
}
