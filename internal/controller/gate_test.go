package controller

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// The gate lets a drain through at once when no cordon is pending, holds it
// while one is, lets it through when the last is done, and never longer
// than cordonFirstMax.
func TestCordonGate(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	g := newCordonGate()
	g.wait(context.Background(), clk) // idle: returns at once

	passed := func() <-chan struct{} {
		ch := make(chan struct{})
		go func() { g.wait(context.Background(), clk); close(ch) }()
		return ch
	}
	g.add()
	g.add()
	ch := passed()
	waitFor(t, "the drain to wait", clk.HasWaiters)
	g.done()
	select {
	case <-ch:
		t.Fatal("a drain passed with a cordon still pending")
	case <-time.After(20 * time.Millisecond):
	}
	g.done()
	waitFor(t, "the drain to pass once every cordon is done", func() bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	})

	g.add() // a cordon that never finishes
	ch = passed()
	waitFor(t, "the drain to wait", clk.HasWaiters)
	clk.Step(cordonFirstMax)
	waitFor(t, "the drain to pass after cordonFirstMax", func() bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	})
}

// At most cordonsInFlight cordon requests are under way at once; a place
// given back lets the next one go, and a waiting one gives up with its
// context.
func TestCordonSlots(t *testing.T) {
	g := newCordonGate()
	ctx := context.Background()
	for i := range cordonsInFlight {
		if !g.begin(ctx) {
			t.Fatalf("cordon %d did not get a place", i)
		}
	}
	next := make(chan bool)
	go func() { next <- g.begin(ctx) }()
	select {
	case <-next:
		t.Fatalf("cordon %d got a place with %d under way", cordonsInFlight+1, cordonsInFlight)
	case <-time.After(20 * time.Millisecond):
	}
	g.end()
	if !<-next {
		t.Fatal("the waiting cordon did not get the place given back")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if g.begin(cctx) {
		t.Fatal("a cordon got a place beyond the bound after its context ended")
	}
}
