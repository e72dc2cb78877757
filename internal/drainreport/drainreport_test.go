package drainreport

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/kevents"
)

var (
	midShutdown = drain.CutOffPod{Namespace: "shop", Name: "web-0", Cause: drain.CauseMidShutdown, Detail: "evicted with a grace period of 30 s, still terminating"}
	pdbBlocked  = drain.CutOffPod{Namespace: "shop", Name: "cart-1", Cause: drain.CauseNotStarted, Detail: "eviction refused (429): Cannot evict pod as it would violate the pod's disruption budget."}
	held        = drain.CutOffPod{Namespace: "batch", Name: "job-x", Cause: drain.CauseFinalizer, Detail: "its grace period is over; finalizers: example.com/hold", Forced: true}
)

// many returns n cut-off pods with long details.
func many(n int) []drain.CutOffPod {
	var out []drain.CutOffPod
	for i := range n {
		out = append(out, drain.CutOffPod{Namespace: "a-rather-long-namespace-name", Name: fmt.Sprintf("a-rather-long-pod-name-%03d-abcdefgh", i),
			Cause: drain.CauseNotStarted, Detail: "eviction refused (429): " + strings.Repeat("Cannot evict pod as it would violate the pod's disruption budget. ", 5)})
	}
	return out
}

// Issue 23 items 4 and 5: how a drain ended is one Event whose message
// names each pod cut off and why, bounded to 1 KiB.
func TestCompose(t *testing.T) {
	tests := []struct {
		name     string
		end      Ending
		r        drain.Result
		typ      string
		reason   string
		want     []string // in the message
		wantNot  []string
		wantCuts int // Report.CutOff
	}{
		{name: "finished", end: Finished, r: drain.Result{Evicted: 2, Pods: []string{"shop/web-0", "shop/cart-1"}, GraceCapped: 1},
			typ: corev1.EventTypeNormal, reason: "Drained", want: []string{"drained: 2 pods evicted (shop/web-0, shop/cart-1), 1 with grace cut to AWS's deadline"}, wantNot: []string{"cut off"}},
		{name: "finished, a pod deleted at the deadline", end: Finished, r: drain.Result{Evicted: 1, Pods: []string{"batch/job-x"}, ForceDeleted: 1, CutOff: []drain.CutOffPod{held}},
			typ: corev1.EventTypeNormal, reason: "Drained", wantCuts: 1,
			want: []string{"1 deleted at the deadline", "cut off at the deadline: batch/job-x: finalizer, deleted at the deadline (its grace period is over; finalizers: example.com/hold)"}},
		{name: "deadline passed: each pod named with why", end: DeadlinePassed,
			r:   drain.Result{Evicted: 2, Pods: []string{"shop/web-0", "shop/api-2"}, Remaining: 2, CutOff: []drain.CutOffPod{pdbBlocked, midShutdown}},
			typ: corev1.EventTypeWarning, reason: "DeadlinePassed", wantCuts: 2,
			want: []string{"AWS's deadline passed with 2 pods still on the node", "shop/web-0: mid-shutdown (evicted with a grace period of 30 s, still terminating)",
				"shop/cart-1: not-started (eviction refused (429): Cannot evict pod as it would violate the pod's disruption budget.)", "1 pods evicted and gone before it (shop/api-2)"}},
		{name: "incomplete", end: Incomplete, r: drain.Result{Remaining: 1, NotEvicted: []drain.PodProblem{{Namespace: "ns", Name: "guarded", Reason: "denied"}}},
			typ: corev1.EventTypeWarning, reason: "DrainIncomplete", want: []string{"1 pods that cannot leave", "eviction refused for good: ns/guarded: denied"}},
		{name: "cut short: what it did, what is left", end: CutShort, r: drain.Result{Evicted: 2, Pods: []string{"shop/api-2", "shop/web-0"}, CutOff: []drain.CutOffPod{midShutdown}},
			typ: corev1.EventTypeNormal, reason: "DrainInterrupted", wantCuts: 0, // not lost yet
			want: []string{"planning again", "1 pods evicted and gone (shop/api-2)", "1 still on the node: shop/web-0: mid-shutdown"}},
		{name: "node gone mid-drain: the pods died with it", end: NodeGone, r: drain.Result{Evicted: 1, Pods: []string{"shop/web-0"}, CutOff: []drain.CutOffPod{midShutdown, pdbBlocked}},
			typ: corev1.EventTypeWarning, reason: "NodeGone", wantCuts: 2,
			want: []string{"node deleted mid-drain", "2 pods on it died with it", "shop/web-0: mid-shutdown", "shop/cart-1: not-started", "0 pods evicted and gone before"}},
		{name: "node gone, nothing on it", end: NodeGone, typ: corev1.EventTypeNormal, reason: "NodeGone", want: []string{"nothing left to drain"}},
		{name: "many pods: as many named as fit in 1 KiB, then how many more", end: DeadlinePassed, r: drain.Result{Remaining: 40, CutOff: many(40)},
			typ: corev1.EventTypeWarning, reason: "DeadlinePassed", wantCuts: 40,
			want: []string{"40 pods still on the node", "a-rather-long-pod-name-003", "and 36 more", "0 pods evicted and gone before it"}, wantNot: []string{"a-rather-long-pod-name-004"}},
		{name: "short details: at most five named", end: DeadlinePassed, r: drain.Result{Remaining: 7, CutOff: []drain.CutOffPod{midShutdown, midShutdown, midShutdown, midShutdown, midShutdown, pdbBlocked, pdbBlocked}},
			typ: corev1.EventTypeWarning, reason: "DeadlinePassed", wantCuts: 7, want: []string{"and 2 more"}, wantNot: []string{"cart-1"}},
		{name: "many evicted and many cut off on a node gone: within 1 KiB", end: NodeGone,
			r:   drain.Result{Evicted: 40, Pods: podNames(40), CutOff: many(40)},
			typ: corev1.EventTypeWarning, reason: "NodeGone", wantCuts: 40, want: []string{"40 pods on it died with it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compose(tt.end, tt.r)
			if got.Type != tt.typ || got.Reason != tt.reason {
				t.Errorf("Compose = %s %s, want %s %s", got.Type, got.Reason, tt.typ, tt.reason)
			}
			for _, w := range tt.want {
				if !strings.Contains(got.Message, w) {
					t.Errorf("message %q\ndoes not say %q", got.Message, w)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(got.Message, w) {
					t.Errorf("message %q says %q", got.Message, w)
				}
			}
			if len(got.Message) > MaxMessage || !utf8.ValidString(got.Message) {
				t.Errorf("message of %d bytes (valid UTF-8: %v), want at most %d", len(got.Message), utf8.ValidString(got.Message), MaxMessage)
			}
			if len(got.CutOff) != tt.wantCuts {
				t.Errorf("Report.CutOff = %q, want %d pods", got.CutOff, tt.wantCuts)
			}
		})
	}
}

func podNames(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("a-rather-long-namespace-name/evicted-pod-with-a-long-name-%03d", i))
	}
	return out
}

func TestTruncateKeepsRunes(t *testing.T) {
	s := strings.Repeat("é", 600) // 1200 bytes
	got := truncate(s, MaxMessage)
	if len(got) > MaxMessage || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("truncate: %d bytes, valid %v, suffix …: %v", len(got), utf8.ValidString(got), strings.HasSuffix(got, "…"))
	}
	if truncate("short", 10) != "short" {
		t.Error("a short string was changed")
	}
}

func TestEndingOf(t *testing.T) {
	tests := []struct {
		err  error
		want Ending
		ok   bool
	}{
		{nil, Finished, true},
		{fmt.Errorf("x: %w", drain.ErrDeadline), DeadlinePassed, true},
		{fmt.Errorf("x: %w", drain.ErrNotEvicted), Incomplete, true},
		{fmt.Errorf("x: %w", drain.ErrStuck), Incomplete, true},
		{errors.New("listing pods: connection refused"), 0, false},
	}
	for _, tt := range tests {
		if got, ok := EndingOf(tt.err); got != tt.want || ok != tt.ok {
			t.Errorf("EndingOf(%v) = %v, %v; want %v, %v", tt.err, got, ok, tt.want, tt.ok)
		}
	}
}

// step is one drain of a piece of work (or, with end NodeGone and no
// result, the work's end without another drain).
type step struct {
	r    drain.Result
	end  Ending
	want map[string]int // counts returned (zero counts left out)
}

// Issue 23 items 4 and 5: a drain cut short and the drains after it add
// up; each pod is counted once, evicted when it left the node, cut off
// when the work's draining ended with it there.
func TestWorkAccumulates(t *testing.T) {
	cutSlow := drain.CutOffPod{Namespace: "ns", Name: "slow", Cause: drain.CauseMidShutdown}
	cutGuarded := drain.CutOffPod{Namespace: "ns", Name: "guarded", Cause: drain.CauseNotStarted}
	tests := []struct {
		name        string
		steps       []step
		wantEvicted int
		wantPods    []string
		wantCut     []string
	}{
		{name: "cut short, then finished: every pod counted evicted once",
			steps: []step{
				{r: drain.Result{Listed: true, Evicted: 2, Pods: []string{"ns/quick", "ns/slow"}, GraceCapped: 1, CutOff: []drain.CutOffPod{cutSlow}}, end: CutShort,
					want: map[string]int{LabelGraceCapped: 1}},
				{r: drain.Result{Listed: true, Evicted: 1, Pods: []string{"ns/slow"}}, end: Finished, want: map[string]int{LabelEvicted: 2}},
			},
			wantEvicted: 2, wantPods: []string{"ns/quick", "ns/slow"}},
		{name: "cut short, the pod left before the next drain listed it",
			steps: []step{
				{r: drain.Result{Listed: true, Evicted: 1, Pods: []string{"ns/slow"}, CutOff: []drain.CutOffPod{cutSlow}}, end: CutShort, want: map[string]int{}},
				{r: drain.Result{Listed: true}, end: Finished, want: map[string]int{LabelEvicted: 1}},
			},
			wantEvicted: 1, wantPods: []string{"ns/slow"}},
		{name: "cut short, then the node gone: the pods left are cut off",
			steps: []step{
				{r: drain.Result{Listed: true, Evicted: 1, Pods: []string{"ns/slow"}, Remaining: 2, CutOff: []drain.CutOffPod{cutGuarded, cutSlow}}, end: CutShort, want: map[string]int{}},
				{end: NodeGone, want: map[string]int{LabelCutOff: 2}},
			},
			wantEvicted: 1, wantPods: []string{"ns/slow"}, wantCut: []string{"ns/guarded", "ns/slow"}},
		{name: "cut short, cut short again before its list, then the node gone: the pod cut off first died with it",
			steps: []step{
				{r: drain.Result{Listed: true, Evicted: 1, Pods: []string{"ns/slow"}, Remaining: 1, CutOff: []drain.CutOffPod{cutSlow}}, end: CutShort, want: map[string]int{}},
				{r: drain.Result{}, end: CutShort, want: map[string]int{}},
				{end: NodeGone, want: map[string]int{LabelCutOff: 1}},
			},
			wantEvicted: 1, wantPods: []string{"ns/slow"}, wantCut: []string{"ns/slow"}},
		{name: "deadline passed twice (a new event after it): cut off counted once",
			steps: []step{
				{r: drain.Result{Listed: true, Remaining: 1, CutOff: []drain.CutOffPod{cutGuarded}}, end: DeadlinePassed, want: map[string]int{LabelCutOff: 1}},
				{r: drain.Result{Listed: true, Remaining: 1, CutOff: []drain.CutOffPod{cutGuarded}}, end: DeadlinePassed, want: map[string]int{}},
				{end: NodeGone, want: map[string]int{}},
			},
			wantCut: []string{"ns/guarded"}},
		{name: "refusals and force deletions count per drain, unnamed evictions as they come",
			steps: []step{
				{r: drain.Result{Listed: true, Evicted: 1, NotEvicted: []drain.PodProblem{{Name: "x"}}}, end: CutShort, want: map[string]int{LabelEvicted: 1, LabelRefused: 1}},
				{r: drain.Result{Listed: true, Evicted: 1, ForceDeleted: 1, NotEvicted: []drain.PodProblem{{Name: "x"}}}, end: Finished,
					want: map[string]int{LabelEvicted: 1, LabelRefused: 1, LabelForceDeleted: 1}},
			},
			wantEvicted: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w Work
			for i, s := range tt.steps {
				var got map[string]int
				if s.end == NodeGone {
					got = w.End()
				} else {
					got = w.Add(s.r, s.end)
				}
				maps.DeleteFunc(got, func(_ string, n int) bool { return n == 0 })
				if !maps.Equal(got, s.want) {
					t.Errorf("step %d: counts %v, want %v", i+1, got, s.want)
				}
			}
			r := w.Result()
			if r.Evicted != tt.wantEvicted || strings.Join(r.Pods, ",") != strings.Join(tt.wantPods, ",") {
				t.Errorf("merged: %d evicted %v, want %d %v", r.Evicted, r.Pods, tt.wantEvicted, tt.wantPods)
			}
			var cut []string
			for _, c := range r.CutOff {
				cut = append(cut, c.Key())
			}
			if strings.Join(cut, ",") != strings.Join(tt.wantCut, ",") {
				t.Errorf("merged cut off %v, want %v", cut, tt.wantCut)
			}
		})
	}
}

// Every result label counted into lifeboat_evictions_total is documented.
func TestLabelsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range append([]string{"blocked"}, Labels...) {
		if !strings.Contains(string(doc), "`"+l+"`") {
			t.Errorf("docs/metrics.md does not document lifeboat_evictions_total{result=%q}", l)
		}
	}
}

// Reasons lists exactly the reasons and types Compose reports with, for
// every ending, with and without pods cut off.
func TestReasonsListed(t *testing.T) {
	seen := map[kevents.Reason]bool{}
	for _, end := range []Ending{Finished, DeadlinePassed, Incomplete, CutShort, NodeGone} {
		for _, r := range []drain.Result{{Evicted: 1}, {Evicted: 1, Remaining: 1, CutOff: []drain.CutOffPod{midShutdown}}} {
			rep := Compose(end, r)
			got := kevents.Reason{Name: rep.Reason, Type: rep.Type}
			if !slices.Contains(Reasons, got) {
				t.Errorf("Compose(%v) reports %v, not in Reasons", end, got)
			}
			seen[got] = true
		}
	}
	for _, r := range Reasons {
		if !seen[r] {
			t.Errorf("Reasons lists %v, which Compose never reports", r)
		}
	}
}

// Issue 25 item 2: pods deleted before an enforced deadline while still
// blocked are named in Drained and DeadlinePassed, counted
// deleted-blocked per drain that deleted them, and listed once over the
// work (a drain cut short and the next both report the same pod).
func TestDeletedBlocked(t *testing.T) {
	blocked := drain.PodProblem{Namespace: "shop", Name: "cart-1", Reason: "grace 30 s; blocked by: The disruption budget cart needs 1 healthy pods and has 1 currently"}
	r := drain.Result{Evicted: 1, Pods: []string{"shop/api-2"}, DeletedBlocked: []drain.PodProblem{blocked}}
	if msg := Compose(Finished, r).Message; !strings.Contains(msg, "1 blocked pods deleted in time for their shutdown (shop/cart-1)") {
		t.Errorf("Drained %q does not name the blocked pod deleted", msg)
	}
	cut := r
	cut.CutOff = []drain.CutOffPod{midShutdown}
	if msg := Compose(DeadlinePassed, cut).Message; !strings.Contains(msg, "1 blocked pods deleted in time for their shutdown (shop/cart-1)") {
		t.Errorf("DeadlinePassed %q does not name the blocked pod deleted", msg)
	}
	var w Work
	if got := w.Add(r, CutShort)[LabelDeletedBlocked]; got != 1 {
		t.Errorf("first drain: deleted-blocked %d, want 1", got)
	}
	if got := w.Add(drain.Result{DeletedBlocked: []drain.PodProblem{blocked}}, Finished)[LabelDeletedBlocked]; got != 1 {
		t.Errorf("second drain: deleted-blocked %d, want 1 (its own deletion)", got)
	}
	if n := len(w.Result().DeletedBlocked); n != 1 {
		t.Errorf("merged DeletedBlocked %v, want the pod once", w.Result().DeletedBlocked)
	}
}
