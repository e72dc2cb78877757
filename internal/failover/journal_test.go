package failover

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/internal/source/sqs"
)

const ns = "lifeboat"

var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// holder is a source holding a fixed list of messages.
type holder struct {
	mu   sync.Mutex
	held []sqs.Held
}

func (h *holder) Held() []sqs.Held {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.held)
}

func (h *holder) set(held ...sqs.Held) {
	h.mu.Lock()
	h.held = held
	h.mu.Unlock()
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// running starts j.Run against h and returns a step that moves the clock
// one Interval and waits until the journal has sent want more writes, and
// a stop that ends Run and waits for it.
func running(t *testing.T, j *Journal, h Holder, fc *clocktesting.FakeClock, cs *fake.Clientset) (step func(want int), stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); j.Run(ctx, h) }()
	waitFor(t, "the journal's ticker", func() bool { return fc.HasWaiters() })
	step = func(want int) {
		t.Helper()
		before := writes(cs)
		fc.Step(Interval)
		waitFor(t, fmt.Sprintf("%d writes", want), func() bool { return writes(cs)-before >= want })
		time.Sleep(20 * time.Millisecond) // no more than want
		if got := writes(cs) - before; got != want {
			t.Fatalf("%d writes after a tick, want %d", got, want)
		}
	}
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return step, stop
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// writes counts the creates and updates of ConfigMaps.
func writes(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetResource().Resource == "configmaps" && (a.GetVerb() == "create" || a.GetVerb() == "update") {
			n++
		}
	}
	return n
}

func handle(i int) string { return fmt.Sprintf("AQEB%04d%s", i, strings.Repeat("x", 380)) }

func msg(i int, hiddenFor time.Duration) sqs.Held {
	return sqs.Held{MessageID: fmt.Sprintf("m-%d", i), Handle: handle(i), HiddenUntil: start.Add(hiddenFor)}
}

// shardsHolding is the number of shards held has messages in.
func shardsHolding(held ...sqs.Held) int {
	seen := map[int]bool{}
	for _, h := range held {
		seen[shardOf(h.MessageID)] = true
	}
	return len(seen)
}

func TestTheNextLeaderRevealsWhatTheDeadOneHeld(t *testing.T) {
	cs := fake.NewClientset()
	fc := clocktesting.NewFakeClock(start)
	h := &holder{}
	msgs := []sqs.Held{msg(1, 30*time.Second), msg(2, 25*time.Second), msg(3, time.Second), msg(4, -time.Second)}
	h.set(msgs...)
	old := New(cs.CoreV1().ConfigMaps(ns), "lb-inflight", map[string]string{"a": "b"}, fc, quiet())
	step, _ := running(t, old, h, fc, cs)
	step(shardsHolding(msgs...))
	for _, m := range msgs {
		if !old.Recorded(m.Handle) {
			t.Errorf("Recorded(%s) false after the write", m.MessageID)
		}
	}
	// The old leader dies here: no stop, no final write. The next one
	// (its clock 1 s on) reveals the messages still hidden for longer
	// than the margin.
	fc.Step(time.Second)
	next := New(cs.CoreV1().ConfigMaps(ns), "lb-inflight", map[string]string{"a": "b"}, fc, quiet())
	var revealed []string
	if err := next.Recover(context.Background(), func(_ context.Context, hs []string) int { revealed = append(revealed, hs...); return len(hs) }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(revealed)
	if want := []string{handle(1), handle(2)}; !slices.Equal(revealed, want) {
		t.Errorf("revealed %d handles %v, want messages 1 and 2 (3 is hidden for less than the margin, 4 lapsed)", len(revealed), revealed)
	}
	for i := range Shards {
		name := Name("lb-inflight", i)
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if cm.Data[dataKey] != "" {
			t.Errorf("%s still holds %q after the recovery; want it emptied", name, cm.Data[dataKey])
		}
		if cm.Labels["a"] != "b" {
			t.Errorf("%s lost its labels: %v", name, cm.Labels)
		}
	}
}

func TestWritesOnlyWhatChanged(t *testing.T) {
	cs := fake.NewClientset()
	fc := clocktesting.NewFakeClock(start)
	h := &holder{}
	j := New(cs.CoreV1().ConfigMaps(ns), "lb-inflight", nil, fc, quiet())
	step, stop := running(t, j, h, fc, cs)
	step(0) // nothing held, nothing known: nothing to write
	h.set(msg(1, time.Minute))
	step(1)
	step(0)
	step(0)
	h.set(msg(1, 2*time.Minute)) // extended: a new visibility recorded
	step(1)
	h.set()
	stop() // the source handed everything back: the journal is emptied
	if got := writes(cs); got != 3 {
		t.Errorf("%d writes in all, want 3 (create, update, emptied on stop)", got)
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), Name("lb-inflight", shardOf("m-1")), metav1.GetOptions{})
	if err != nil || cm.Data[dataKey] != "" {
		t.Errorf("after the stop the shard holds %v (%v), want nothing", cm, err)
	}
	if j.Recorded(handle(1)) {
		t.Errorf("Recorded true for a message the emptied journal no longer holds")
	}
}

func TestWritesOverAShardChangedUnderIt(t *testing.T) {
	cs := fake.NewClientset()
	fc := clocktesting.NewFakeClock(start)
	h := &holder{}
	h.set(msg(1, time.Minute))
	j := New(cs.CoreV1().ConfigMaps(ns), "lb-inflight", nil, fc, quiet())
	step, _ := running(t, j, h, fc, cs)
	step(1)
	conflicts := 0
	cs.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			return false, nil, nil
		}
		conflicts++
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, Name("lb-inflight", shardOf("m-1")), fmt.Errorf("changed"))
	})
	h.set(msg(1, time.Minute), msg(2, time.Minute), msg(5, time.Minute))
	step(shardsHolding(msg(1, 0), msg(2, 0), msg(5, 0))) // one of them refused with 409
	step(1)                                              // read again and written over
	if got := shardText(t, cs, "m-1"); !strings.Contains(got, handle(1)) {
		t.Errorf("shard of m-1 after the conflict: %q, want it to hold message 1", got)
	}
	if conflicts != 1 {
		t.Errorf("%d conflicts, want 1", conflicts)
	}
}

func shardText(t *testing.T, cs *fake.Clientset, messageID string) string {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), Name("lb-inflight", shardOf(messageID)), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data[dataKey]
}

func TestRecoverReportsAnUnreadableJournal(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "lb-inflight-0", fmt.Errorf("no"))
	})
	j := New(cs.CoreV1().ConfigMaps(ns), "lb-inflight", nil, clocktesting.NewFakeClock(start), quiet())
	called := false
	err := j.Recover(context.Background(), func(context.Context, []string) int { called = true; return 0 })
	if err == nil || !apierrors.IsForbidden(err) || called {
		t.Errorf("Recover = %v (reveal called: %v), want the Forbidden error and nothing revealed", err, called)
	}
}

func TestSplitKeepsEachShardUnderTheLimit(t *testing.T) {
	var held []sqs.Held
	for i := range 12_000 { // ~5 MB of real-sized handles: more than four shards hold
		held = append(held, msg(i, time.Minute))
	}
	kept, left := 0, 0
	for i, d := range split(held) {
		if len(d.text) > maxShardBytes {
			t.Errorf("shard %d holds %d bytes, over %d", i, len(d.text), maxShardBytes)
		}
		if n := strings.Count(d.text, "\n"); n != len(d.handles) {
			t.Errorf("shard %d: %d lines, %d handles", i, n, len(d.handles))
		}
		kept += len(d.handles)
		left += d.leftOut
	}
	if kept+left != len(held) || left == 0 || kept < 9_000 {
		t.Errorf("kept %d, left out %d of %d; want every message counted, some left out, at least 9,000 kept", kept, left, len(held))
	}
	reversed := slices.Clone(held)
	slices.Reverse(reversed)
	if a, b := split(held), split(reversed); !sameText(a, b) {
		t.Errorf("the same messages in another order make another text")
	}
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name      string
		text      string
		want      []sqs.Held
		malformed int
	}{
		{"empty", "", nil, 0},
		{"two lines", "1000 a\n2000 b\n", []sqs.Held{{Handle: "a", HiddenUntil: time.UnixMilli(1000)}, {Handle: "b", HiddenUntil: time.UnixMilli(2000)}}, 0},
		{"no final newline", "1000 a", []sqs.Held{{Handle: "a", HiddenUntil: time.UnixMilli(1000)}}, 0},
		{"no time", "a\n", nil, 1},
		{"a bad time", "x a\n", nil, 1},
		{"no handle", "1000 \n", nil, 1},
		{"a space in the handle", "1000 a b\n2000 c\n", []sqs.Held{{Handle: "c", HiddenUntil: time.UnixMilli(2000)}}, 1},
		{"blank lines", "\n\n1000 a\n", []sqs.Held{{Handle: "a", HiddenUntil: time.UnixMilli(1000)}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, bad := decode(tc.text)
			if !slices.EqualFunc(got, tc.want, func(a, b sqs.Held) bool { return a.Handle == b.Handle && a.HiddenUntil.Equal(b.HiddenUntil) }) || bad != tc.malformed {
				t.Errorf("decode(%q) = %v, %d malformed; want %v, %d", tc.text, got, bad, tc.want, tc.malformed)
			}
		})
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	held := []sqs.Held{msg(1, time.Minute), msg(2, 2*time.Minute)}
	var all []sqs.Held
	for _, d := range split(held) {
		got, bad := decode(d.text)
		if bad != 0 {
			t.Fatalf("%d malformed lines in %q", bad, d.text)
		}
		all = append(all, got...)
	}
	if len(all) != 2 {
		t.Fatalf("decoded %d messages, want 2", len(all))
	}
	for _, h := range held {
		if !slices.ContainsFunc(all, func(g sqs.Held) bool { return g.Handle == h.Handle && g.HiddenUntil.Equal(h.HiddenUntil) }) {
			t.Errorf("message %s lost in the round trip", h.MessageID)
		}
	}
}

func sameText(a, b [Shards]shardData) bool {
	for i := range a {
		if a[i].text != b[i].text {
			return false
		}
	}
	return true
}

var _ ConfigMaps = fake.NewClientset().CoreV1().ConfigMaps(ns)

// Newly held messages are written at once after a Notify, or Soon after
// the last round of writes; they do not wait for Interval.
func TestNotifyWritesNewMessagesSoon(t *testing.T) {
	cs := fake.NewClientset()
	fc := clocktesting.NewFakeClock(start)
	h := &holder{}
	j := New(cs.CoreV1().ConfigMaps(ns), "lb-inflight", nil, fc, quiet())
	running(t, j, h, fc, cs)
	h.set(msg(1, time.Minute))
	j.Notify()
	waitFor(t, "the first message written without a tick", func() bool { return writes(cs) == 1 })
	h.set(msg(1, time.Minute), msg(2, time.Minute))
	j.Notify()
	j.Notify() // a second notice while a round is due adds nothing
	waitFor(t, "the round armed", func() bool { return fc.HasWaiters() && len(j.notify) == 0 })
	time.Sleep(20 * time.Millisecond)
	if got := writes(cs); got != 1 {
		t.Fatalf("%d writes right after the second notice, want 1: the round waits Soon after the last", got)
	}
	fc.Step(Soon)
	// Recorded once the write has returned: the fake counts the write
	// inside it, a moment before (1 run in 100 read it in between).
	waitFor(t, "the second message written Soon after the first, and recorded", func() bool { return writes(cs) == 2 && j.Recorded(handle(2)) })
	if got := writes(cs); got != 2 {
		t.Errorf("%d writes, want 2", got)
	}
}

// gatedUpdates holds every Update until gate closes, then fails it if its
// context ended meanwhile, as a real client does.
type gatedUpdates struct {
	ConfigMaps
	gate    chan struct{}
	waiting chan struct{} // one value per Update that reached the gate
	mu      sync.Mutex
	failed  int
}

func (g *gatedUpdates) Update(ctx context.Context, cm *corev1.ConfigMap, opts metav1.UpdateOptions) (*corev1.ConfigMap, error) {
	g.waiting <- struct{}{}
	<-g.gate
	if err := ctx.Err(); err != nil {
		g.mu.Lock()
		g.failed++
		g.mu.Unlock()
		return nil, err
	}
	return g.ConfigMaps.Update(ctx, cm, opts)
}

// A stop during a round of writes lets the round finish, then writes what
// is left (nothing, after the hand-back). On the first build the stop
// cancelled the round's write ("context canceled" in a 1,000-node
// rollout's log).
func TestStopLetsARoundFinish(t *testing.T) {
	cs := fake.NewClientset()
	g := &gatedUpdates{ConfigMaps: cs.CoreV1().ConfigMaps(ns), gate: make(chan struct{}), waiting: make(chan struct{}, 10)}
	fc := clocktesting.NewFakeClock(start)
	h := &holder{}
	j := New(g, "lb-inflight", nil, fc, quiet())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); j.Run(ctx, h) }()
	h.set(msg(1, time.Minute))
	j.Notify()
	waitFor(t, "the create", func() bool { return writes(cs) == 1 })
	h.set(msg(1, 2*time.Minute))
	waitFor(t, "the ticker", fc.HasWaiters)
	fc.Step(Interval)
	<-g.waiting // the round's update is on its way
	cancel()
	time.Sleep(20 * time.Millisecond)
	h.set() // handed back
	close(g.gate)
	<-done
	if g.failed != 0 {
		t.Errorf("%d updates failed: the stop cancelled a round on its way", g.failed)
	}
	if got := shardText(t, cs, "m-1"); got != "" {
		t.Errorf("after the stop the shard holds %q, want nothing", got)
	}
}

// A large journal is written no faster than bytesPerSecond: after a round
// of 4,000 real-sized handles (~1.6 MB) a newly held message waits about
// 1.5 s, not Soon.
func TestLargeJournalRoundsSpacedByBytes(t *testing.T) {
	cs := fake.NewClientset()
	fc := clocktesting.NewFakeClock(start)
	h := &holder{}
	j := New(cs.CoreV1().ConfigMaps(ns), "lb-inflight", nil, fc, quiet())
	running(t, j, h, fc, cs)
	var held []sqs.Held
	for i := range 4000 {
		held = append(held, msg(i, time.Minute))
	}
	h.set(held...)
	j.Notify()
	waitFor(t, "the first round", func() bool { return writes(cs) == Shards })
	wrote := 0
	for _, d := range split(held) {
		wrote += len(d.text)
	}
	spacing := time.Duration(wrote) * time.Second / bytesPerSecond
	if spacing < 4*Soon {
		t.Fatalf("the test's journal is %d bytes, a spacing of %v: too small to tell from Soon", wrote, spacing)
	}
	h.set(append(held, msg(9999, time.Minute))...)
	j.Notify()
	waitFor(t, "the round armed", func() bool { return len(j.notify) == 0 })
	fc.Step(Soon)
	time.Sleep(20 * time.Millisecond)
	if got := writes(cs); got != Shards {
		t.Fatalf("%d writes Soon after a ~%d-byte round, want none yet", got-Shards, wrote)
	}
	fc.Step(spacing - Soon)
	waitFor(t, "the new message written once the bytes allow", func() bool { return writes(cs) == Shards+1 })
}
