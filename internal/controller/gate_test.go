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
