package podwatch

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"
)

// opened is one watch the hub opened: its options, its context and the
// fake that feeds it.
type opened struct {
	opts metav1.ListOptions
	ctx  context.Context
	w    *watch.FakeWatcher
}

// newHub returns a hub over fake watches; each watch it opens arrives on
// the returned channel.
func newHub(t *testing.T) (*Hub, chan opened, *clocktesting.FakeClock) {
	t.Helper()
	ch := make(chan opened, 10)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC))
	h := New(func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		w := watch.NewFakeWithChanSize(100, false)
		ch <- opened{opts: opts, ctx: ctx, w: w}
		return w, nil
	}, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return h, ch, clk
}

func next(t *testing.T, ch chan opened) opened {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(5 * time.Second):
		t.Fatal("the hub opened no watch")
		return opened{}
	}
}

func noWatch(t *testing.T, ch chan opened) {
	t.Helper()
	select {
	case o := <-ch:
		t.Fatalf("the hub opened another watch from %q", o.opts.ResourceVersion)
	case <-time.After(50 * time.Millisecond):
	}
}

func pod(name, node, rv string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), ResourceVersion: rv,
		Labels: map[string]string{"big": "yes"}, Finalizers: []string{"f"}},
		Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"}}
}

// got reads n events from w, failing on a timeout or a closed channel.
func got(t *testing.T, w watch.Interface, n int) []string {
	t.Helper()
	var out []string
	for range n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("channel closed after %v", out)
			}
			p := ev.Object.(*corev1.Pod)
			out = append(out, string(ev.Type)+" "+p.Name+"@"+p.ResourceVersion)
		case <-time.After(5 * time.Second):
			t.Fatalf("after %v: no event", out)
		}
	}
	return out
}

func closed(t *testing.T, w watch.Interface) {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if ok {
			t.Fatalf("event %v, want the channel closed", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed")
	}
}

func equal(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
}

// One watch serves every node: each subscriber gets its own node's events
// after its own version, slimmed; a later one gets the kept events it
// missed; the hub's watch starts at the first version with bookmarks.
func TestOneWatchServesEveryNode(t *testing.T) {
	h, ch, _ := newHub(t)
	a, ok := h.WatchNode("a", "10")
	if !ok {
		t.Fatal("not served")
	}
	defer a.Stop()
	o := next(t, ch)
	if o.opts.ResourceVersion != "10" || !o.opts.AllowWatchBookmarks || o.opts.FieldSelector != "" {
		t.Fatalf("watch options %+v", o.opts)
	}
	o.w.Modify(pod("p1", "a", "11"))
	o.w.Add(pod("q1", "b", "12"))
	o.w.Action(watch.Bookmark, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "13"}})
	o.w.Delete(pod("p1", "a", "14"))
	equal(t, got(t, a, 2), []string{"MODIFIED p1@11", "DELETED p1@14"})

	b, ok := h.WatchNode("b", "11") // its list is older than the hub's place: replayed
	if !ok {
		t.Fatal("not served")
	}
	defer b.Stop()
	a2, ok := h.WatchNode("a", "11")
	if !ok {
		t.Fatal("not served")
	}
	defer a2.Stop()
	equal(t, got(t, b, 1), []string{"ADDED q1@12"})
	equal(t, got(t, a2, 1), []string{"DELETED p1@14"})
	noWatch(t, ch)

	c, ok := h.WatchNode("c", "20") // ahead of the hub: nothing before 20
	if !ok {
		t.Fatal("not served")
	}
	defer c.Stop()
	o.w.Modify(pod("r1", "c", "19"))
	o.w.Modify(pod("r1", "c", "21"))
	equal(t, got(t, c, 1), []string{"MODIFIED r1@21"})

	o.w.Modify(pod("p2", "a", "22"))
	ev := <-a.ResultChan()
	p := ev.Object.(*corev1.Pod)
	if p.Labels != nil || len(p.Spec.Containers) != 0 || p.Status.PodIP != "" || p.Status.Phase != corev1.PodRunning ||
		p.Spec.NodeName != "a" || len(p.Finalizers) != 1 || p.UID == "" {
		t.Errorf("event pod not slim, or missing what a drain reads: %+v", p)
	}
}

// A version the hub cannot serve is the caller's to watch.
func TestNotServed(t *testing.T) {
	h, ch, _ := newHub(t)
	for _, rv := range []string{"", "0", "abc"} {
		if _, ok := h.WatchNode("a", rv); ok {
			t.Errorf("version %q served", rv)
		}
	}
	noWatch(t, ch)
	a, _ := h.WatchNode("a", "10")
	defer a.Stop()
	next(t, ch)
	if _, ok := h.WatchNode("b", "9"); ok {
		t.Error("a version older than the hub's first served")
	}
}

// The ring keeps the last maxRecent events, oldest first, and says which
// it dropped; the hub then no longer serves versions before it.
func TestRing(t *testing.T) {
	var r ring
	var dropped []uint64
	for v := uint64(1); v <= maxRecent+2; v++ {
		if d, ok := r.push(event{rv: v}); ok {
			dropped = append(dropped, d.rv)
		}
	}
	var kept []uint64
	r.each(func(e event) { kept = append(kept, e.rv) })
	if len(dropped) != 2 || dropped[0] != 1 || dropped[1] != 2 || len(kept) != maxRecent || kept[0] != 3 || kept[len(kept)-1] != maxRecent+2 {
		t.Fatalf("dropped %v, kept %d from %d to %d", dropped, len(kept), kept[0], kept[len(kept)-1])
	}
}

// A watch that ends is reopened from the last version seen (a bookmark's
// too), without the subscribers noticing.
func TestReopensFromTheLastVersion(t *testing.T) {
	h, ch, clk := newHub(t)
	a, _ := h.WatchNode("a", "10")
	defer a.Stop()
	o := next(t, ch)
	o.w.Modify(pod("p1", "a", "11"))
	o.w.Action(watch.Bookmark, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "15"}})
	equal(t, got(t, a, 1), []string{"MODIFIED p1@11"})
	o.w.Stop() // the server closed it
	waitWaiters(t, clk)
	clk.Step(time.Second)
	o2 := next(t, ch)
	if o2.opts.ResourceVersion != "15" {
		t.Fatalf("reopened from %q, want 15", o2.opts.ResourceVersion)
	}
	o2.w.Delete(pod("p1", "a", "16"))
	equal(t, got(t, a, 1), []string{"DELETED p1@16"})
}

// 410 Gone: the hub lost its place, so every subscriber's channel closes
// (its drain lists again) and the next subscriber starts a new watch at its
// own version.
func TestGoneClosesSubscribers(t *testing.T) {
	h, ch, _ := newHub(t)
	a, _ := h.WatchNode("a", "10")
	defer a.Stop()
	o := next(t, ch)
	o.w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "too old"})
	closed(t, a)
	b, ok := h.WatchNode("b", "30")
	if !ok {
		t.Fatal("not served after a reset")
	}
	defer b.Stop()
	if o2 := next(t, ch); o2.opts.ResourceVersion != "30" {
		t.Fatalf("new watch from %q, want 30", o2.opts.ResourceVersion)
	}
}

// Stop closes the subscriber's channel; the watch stays open linger after
// the last Stop, then closes, and the next subscriber opens a new one.
func TestLingerThenStop(t *testing.T) {
	h, ch, clk := newHub(t)
	a, _ := h.WatchNode("a", "10")
	o := next(t, ch)
	a.Stop()
	closed(t, a)
	clk.Step(linger - time.Second)
	b, _ := h.WatchNode("b", "10") // within linger: the same watch
	noWatch(t, ch)
	b.Stop()
	clk.Step(linger)
	select {
	case <-o.ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the watch stayed open after linger")
	}
	c, ok := h.WatchNode("c", "40")
	if !ok {
		t.Fatal("not served after the stop")
	}
	defer c.Stop()
	if o2 := next(t, ch); o2.opts.ResourceVersion != "40" {
		t.Fatalf("new watch from %q, want 40", o2.opts.ResourceVersion)
	}
}

// A subscriber that does not read never holds the others up.
func TestSlowSubscriber(t *testing.T) {
	h, ch, _ := newHub(t)
	slow, _ := h.WatchNode("a", "10")
	defer slow.Stop()
	fast, _ := h.WatchNode("b", "10")
	defer fast.Stop()
	o := next(t, ch)
	for i := range 50 {
		o.w.Modify(pod("p", "a", itoa(11+i)))
	}
	o.w.Modify(pod("q", "b", "100"))
	equal(t, got(t, fast, 1), []string{"MODIFIED q@100"})
	if evs := got(t, slow, 50); evs[49] != "MODIFIED p@60" {
		t.Fatalf("slow subscriber's last event %s", evs[49])
	}
}

func waitWaiters(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the hub never waited to reopen")
		}
		time.Sleep(time.Millisecond)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
