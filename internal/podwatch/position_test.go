package podwatch

import (
	"context"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// caughtUp runs CaughtUp in the background; its answer arrives on the
// returned channel.
func caughtUp(h *Hub, rv string, within time.Duration) chan bool {
	out := make(chan bool, 1)
	go func() { out <- h.CaughtUp(context.Background(), rv, within) }()
	return out
}

func answer(t *testing.T, ch chan bool, want bool) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("CaughtUp = %v, want %v", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("CaughtUp did not return")
	}
}

func noAnswer(t *testing.T, ch chan bool) {
	t.Helper()
	select {
	case got := <-ch:
		t.Fatalf("CaughtUp = %v while the watch is still moving", got)
	case <-time.After(50 * time.Millisecond):
	}
}

// CaughtUp says yes once the shared watch has received the version (an
// event's or a bookmark's), waiting while the watch moves; no at once
// without a watch, for a version that is not a number, before the watch
// has received anything, and after it lost its place; no when the watch
// goes quiet for a second or the wait's bound passes.
func TestCaughtUp(t *testing.T) {
	h, ch, clk := newHub(t)
	for _, rv := range []string{"5", "", "abc"} {
		answer(t, caughtUp(h, rv, time.Minute), false) // no watch running
	}
	a, _ := h.WatchNode("a", "10")
	defer a.Stop()
	o := next(t, ch)
	answer(t, caughtUp(h, "10", time.Minute), false) // nothing received yet

	o.w.Modify(pod("p1", "a", "12"))
	equal(t, got(t, a, 1), []string{"MODIFIED p1@12"})
	answer(t, caughtUp(h, "12", time.Minute), true)
	answer(t, caughtUp(h, "11", time.Minute), true)
	answer(t, caughtUp(h, "0", time.Minute), false)

	// Waits while the watch moves: another node's event, then a bookmark.
	wait := caughtUp(h, "20", time.Minute)
	noAnswer(t, wait)
	o.w.Modify(pod("q1", "b", "15"))
	noAnswer(t, wait)
	o.w.Action(watch.Bookmark, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "20"}})
	answer(t, wait, true)

	// The watch goes quiet: no after a second without an event.
	wait = caughtUp(h, "30", time.Minute)
	noAnswer(t, wait)
	waitWaiters(t, clk)
	clk.Step(quiet)
	answer(t, wait, false)

	// The wait's bound passes while the watch still moves.
	o.w.Modify(pod("q1", "b", "21"))
	waitPosition(t, h, 21)
	wait = caughtUp(h, "30", 300*time.Millisecond)
	noAnswer(t, wait)
	waitWaiters(t, clk)
	clk.Step(300 * time.Millisecond)
	answer(t, wait, false)

	// 410 Gone: the hub lost its place and knows of no cache position.
	o.w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "too old"})
	closed(t, a)
	answer(t, caughtUp(h, "12", time.Minute), false)
}

// waitPosition waits until the hub has received rv.
func waitPosition(t *testing.T, h *Hub, rv uint64) {
	t.Helper()
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(time.Millisecond) {
		h.mu.Lock()
		at := h.at.rv
		h.mu.Unlock()
		if at >= rv {
			return
		}
	}
	t.Fatalf("the hub never received %d", rv)
}

// Each waiter is woken once its own version is reached, not by every
// event before it; the watch's stop wakes them all.
func TestPositionWakesWhenReached(t *testing.T) {
	var p position
	w5, w10, w20 := p.wait(5), p.wait(10), p.wait(20)
	isClosed := func(ch chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	for _, step := range []struct {
		rv          uint64
		woken       [3]bool
		lowestAfter uint64
	}{
		{rv: 4, woken: [3]bool{false, false, false}, lowestAfter: 5},
		{rv: 10, woken: [3]bool{true, true, false}, lowestAfter: 20},
		{rv: 19, woken: [3]bool{true, true, false}, lowestAfter: 20},
	} {
		p.rv = step.rv
		p.reached()
		got := [3]bool{isClosed(w5), isClosed(w10), isClosed(w20)}
		if got != step.woken || p.lowest != step.lowestAfter {
			t.Fatalf("at %d: woken %v (lowest %d), want %v (lowest %d)", step.rv, got, p.lowest, step.woken, step.lowestAfter)
		}
	}
	p.reset()
	if !isClosed(w20) || len(p.waiters) != 0 {
		t.Fatal("reset left a waiter asleep")
	}
}
