// Package drainreport says how a node's drain ended: the one Event (type,
// reason, bounded message) and log line lifeboat reports, the pods cut off
// for the webhook, and what to add to lifeboat_evictions_total. It keeps
// the account of one piece of work: a drain cut short by new events, then
// the drain under the next plan, add up.
//
// It is pure: no I/O, no clock. It must not decide what to do next (the
// controller does) nor talk to any API.
package drainreport

import (
	"errors"
	"slices"

	"lifeboat.dev/lifeboat/internal/drain"
)

// Ending says how a drain, or the draining of a piece of work, ended.
type Ending int

const (
	// Finished: every pod is gone or finished, or was deleted at the
	// deadline (--force-delete-at-deadline).
	Finished Ending = iota + 1
	// DeadlinePassed: AWS's deadline passed with pods on the node.
	DeadlinePassed
	// Incomplete: a drain without a deadline ended with pods that cannot
	// leave (eviction refused for good, stuck terminating).
	Incomplete
	// CutShort: new events for the node stopped the drain; the next plan
	// follows, so nothing is lost yet.
	CutShort
	// NodeGone: the Node was deleted (its instance is gone); the pods still
	// on it died with it.
	NodeGone
)

// EndingOf classifies the error a drain returned (nil: Finished). ok is
// false for any other error: the drain failed and is retried.
func EndingOf(err error) (e Ending, ok bool) {
	switch {
	case err == nil:
		return Finished, true
	case errors.Is(err, drain.ErrDeadline):
		return DeadlinePassed, true
	case errors.Is(err, drain.ErrNotEvicted), errors.Is(err, drain.ErrStuck):
		return Incomplete, true
	}
	return 0, false
}

// Result labels of lifeboat_evictions_total that Work counts (documented
// in docs/metrics.md). "blocked" is counted as evictions are refused.
const (
	LabelEvicted      = "evicted"
	LabelGraceCapped  = "grace-capped"
	LabelForceDeleted = "force-deleted"
	LabelRefused      = "refused"
	LabelStuck        = "stuck"
	LabelCutOff       = "cut-off"
	// LabelDeletedBlocked: pods whose eviction was still refused, deleted
	// in time for their shutdown before an enforced deadline.
	LabelDeletedBlocked = "deleted-blocked"
)

// Labels are the result labels Work counts, in a fixed order.
var Labels = []string{LabelEvicted, LabelGraceCapped, LabelForceDeleted, LabelRefused, LabelStuck, LabelCutOff, LabelDeletedBlocked}

// Work is the account of one piece of work's drains. The zero value is
// an empty account. It is not safe for concurrent use.
type Work struct {
	res     drain.Result // the drains' results merged
	counted map[string]bool
}

// Result is what the drains did so far, merged: every pod evicted (once),
// the grace periods capped and the force deletions added up, and, as the
// last drain saw them, the pods left, refused, stuck and cut off.
func (w *Work) Result() drain.Result { return w.res }

// Add merges the result of a drain that ended so and returns what to add
// to lifeboat_evictions_total, by result label: the evictions this drain
// made (grace-capped, force-deleted, refused, stuck, deleted-blocked:
// each counts), each pod that left the node after its eviction (evicted: once
// over the work) and, unless the drain was cut short, each pod cut off
// (once over the work). A pod cut off is not counted evicted.
func (w *Work) Add(r drain.Result, end Ending) map[string]int {
	counts := map[string]int{LabelGraceCapped: r.GraceCapped, LabelForceDeleted: r.ForceDeleted,
		LabelRefused: len(r.NotEvicted), LabelStuck: len(r.Stuck), LabelDeletedBlocked: len(r.DeletedBlocked)}
	m := &w.res
	known := 0
	for _, p := range r.Pods {
		if slices.Contains(m.Pods, p) {
			known++
		} else {
			m.Pods = append(m.Pods, p)
		}
	}
	// Evictions without a name (r.Evicted beyond r.Pods) add up as they are.
	unnamed := max(r.Evicted-len(r.Pods), 0)
	counts[LabelEvicted] += unnamed
	m.Evicted += r.Evicted - known
	m.GraceCapped += r.GraceCapped
	m.ForceDeleted += r.ForceDeleted
	if r.Listed {
		// Only a drain that listed the node's pods knows which are left;
		// one stopped before its list keeps the last view (test/realnode
		// TestInstanceDiesMidShutdown saw a drain canceled at once by the
		// Node's deletion drop the pod the drain before it had cut off).
		m.Remaining, m.NotEvicted, m.Stuck, m.CutOff = r.Remaining, r.NotEvicted, r.Stuck, r.CutOff
	}
	m.Finished = addNew(m.Finished, r.Finished)
	m.DeletedBlocked = addNew(m.DeletedBlocked, r.DeletedBlocked)
	w.count(counts, end != CutShort)
	return counts
}

// addNew adds to ps the pods of more it does not name yet.
func addNew(ps, more []drain.PodProblem) []drain.PodProblem {
	for _, f := range more {
		if !slices.ContainsFunc(ps, func(g drain.PodProblem) bool { return g.Namespace == f.Namespace && g.Name == f.Name }) {
			ps = append(ps, f)
		}
	}
	return ps
}

// End ends the work without another drain (the Node is gone): the pods
// the last drain left on the node are cut off. It returns what to add to
// lifeboat_evictions_total.
func (w *Work) End() map[string]int {
	counts := map[string]int{}
	w.count(counts, true)
	return counts
}

// count adds the pods that left and, final, those cut off, each once.
func (w *Work) count(counts map[string]int, final bool) {
	if w.counted == nil {
		w.counted = map[string]bool{}
	}
	// Pods are counted when the work ends: a pod a drain cut short saw
	// evicted may still be terminating when the instance goes, and is then
	// cut off, not evicted (test/realnode TestInstanceDiesMidShutdown saw it
	// counted evicted).
	if !final {
		return
	}
	cut := map[string]bool{}
	for _, c := range w.res.CutOff {
		cut[c.Key()] = true
	}
	for _, p := range w.res.Pods {
		if !cut[p] && !w.counted[p] {
			w.counted[p] = true
			counts[LabelEvicted]++
		}
	}
	for _, c := range w.res.CutOff {
		if !w.counted[c.Key()] {
			w.counted[c.Key()] = true
			counts[LabelCutOff]++
		}
	}
}
