package drainreport

import (
	"fmt"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/kevents"
	"lifeboat.dev/lifeboat/internal/notify"
)

// MaxMessage bounds an Event's message, in bytes (events.k8s.io/v1 allows
// 1 KiB for a note).
const MaxMessage = 1024

// mostCut is how many cut-off pods a message names before "and K more";
// mostDetail bounds what it says about each.
const (
	mostCut    = 5
	mostDetail = 110
)

// Reasons are every reason and type Compose reports with (a test holds
// them to it); hack/docdrift counts them as recorded wherever a Report's
// Reason is.
var Reasons = []kevents.Reason{
	{Name: "Drained", Type: corev1.EventTypeNormal},
	{Name: "DeadlinePassed", Type: corev1.EventTypeWarning},
	{Name: "DrainIncomplete", Type: corev1.EventTypeWarning},
	{Name: "DrainInterrupted", Type: corev1.EventTypeNormal},
	{Name: "NodeGone", Type: corev1.EventTypeNormal},
	{Name: "NodeGone", Type: corev1.EventTypeWarning},
}

// Report is what lifeboat says when a drain ends: one Event on the Node
// (the log line carries the same message) and, for the webhook, the pods
// cut off.
type Report struct {
	Type    string // corev1.EventTypeNormal or corev1.EventTypeWarning
	Reason  string
	Message string // at most MaxMessage bytes
	// CutOff names every pod cut off, "namespace/name: cause (detail)"
	// (none when the drain was cut short: the next plan follows).
	CutOff []string
}

// LogAttrs are the attributes of the report's log line besides its
// message: cutOff, every pod cut off (a message names five at most).
func (r Report) LogAttrs() []any {
	if len(r.CutOff) == 0 {
		return nil
	}
	return []any{"cutOff", r.CutOff}
}

// Compose reports a drain, or a piece of work, that ended so; r is what
// its drains did (Work.Result).
func Compose(end Ending, r drain.Result) Report {
	rep := Report{Type: corev1.EventTypeNormal}
	for _, c := range r.CutOff {
		if end != CutShort { // those are not lost yet: the next plan follows
			rep.CutOff = append(rep.CutOff, c.String())
		}
	}
	var msg string
	switch end {
	case Finished:
		rep.Reason = "Drained"
		msg = drained(r)
	case DeadlinePassed:
		rep.Type, rep.Reason = corev1.EventTypeWarning, "DeadlinePassed"
		tail := "; " + evicted(r, "before it") + deletedBlocked(r)
		if len(r.Stuck) > 0 {
			tail = "; not deleted: " + drain.ListProblems(r.Stuck) + tail
		}
		msg = fit(fmt.Sprintf("AWS's deadline passed with %d pods still on the node, cut off: ", len(r.CutOff)), r.CutOff, tail)
	case Incomplete:
		rep.Type, rep.Reason = corev1.EventTypeWarning, "DrainIncomplete"
		msg = fmt.Sprintf("drain ended with %d pods that cannot leave", r.Remaining)
		if len(r.NotEvicted) > 0 {
			msg += "; eviction refused for good: " + drain.ListProblems(r.NotEvicted)
		}
		if len(r.Stuck) > 0 {
			msg += "; did not leave within their bound: " + drain.ListProblems(r.Stuck)
		}
		msg += "; " + evicted(r, "")
	case CutShort:
		rep.Reason = "DrainInterrupted"
		msg = "new events for the node stopped the drain; planning again. So far " + evicted(r, "")
		if len(r.CutOff) > 0 {
			msg = fit(msg+fmt.Sprintf("; %d still on the node: ", len(r.CutOff)), r.CutOff, "")
		}
	case NodeGone:
		rep.Reason = "NodeGone"
		if len(r.CutOff) == 0 {
			msg = "node no longer exists: nothing left to drain"
			if r.Evicted > 0 {
				msg += "; " + evicted(r, "")
			}
			break
		}
		rep.Type = corev1.EventTypeWarning
		msg = fit(fmt.Sprintf("node deleted mid-drain (its instance is gone): %d pods on it died with it, cut off: ", len(r.CutOff)),
			r.CutOff, "; "+evicted(r, "before"))
	}
	rep.Message = bound(msg)
	return rep
}

// drained is the message of a drain that finished.
func drained(r drain.Result) string {
	msg := fmt.Sprintf("drained: %d pods evicted", r.Evicted)
	if len(r.Pods) > 0 {
		msg += " (" + notify.ListPods(r.Pods) + ")"
	}
	if r.GraceCapped > 0 {
		msg += fmt.Sprintf(", %d with grace cut to AWS's deadline", r.GraceCapped)
	}
	if r.ForceDeleted > 0 {
		msg += fmt.Sprintf(", %d deleted at the deadline (AWS would have killed them)", r.ForceDeleted)
	}
	msg += deletedBlocked(r)
	if len(r.Finished) > 0 {
		msg += fmt.Sprintf(", %d finished but not deleted, not waited for (%s)", len(r.Finished), drain.ListProblems(r.Finished))
	}
	if len(r.CutOff) > 0 {
		msg = fit(msg+"; cut off at the deadline: ", r.CutOff, "")
	}
	return msg
}

// deletedBlocked names the pods deleted before the deadline while still
// blocked, if any: ", N blocked pods deleted in time for their shutdown
// (...)".
func deletedBlocked(r drain.Result) string {
	if len(r.DeletedBlocked) == 0 {
		return ""
	}
	names := make([]string, len(r.DeletedBlocked))
	for i, p := range r.DeletedBlocked {
		names[i] = p.Namespace + "/" + p.Name
	}
	return fmt.Sprintf(", %d blocked pods deleted in time for their shutdown (%s)", len(r.DeletedBlocked), notify.ListPods(names))
}

// evicted says how many pods were evicted and left the node (when),
// naming them: those cut off are not among them.
func evicted(r drain.Result, when string) string {
	cut := map[string]bool{}
	for _, c := range r.CutOff {
		cut[c.Key()] = true
	}
	var gone []string
	for _, p := range r.Pods {
		if !cut[p] {
			gone = append(gone, p)
		}
	}
	n := len(gone) + max(r.Evicted-len(r.Pods), 0)
	s := fmt.Sprintf("%d pods evicted and gone", n)
	if when != "" {
		s += " " + when
	}
	if len(gone) > 0 {
		s += " (" + notify.ListPods(gone) + ")"
	}
	return s
}

// listCut names up to five cut-off pods, what cut them off and, bounded,
// why, then how many more there are, in at most budget bytes (the first
// pod is always named, its detail cut to fit).
func listCut(ps []drain.CutOffPod, budget int) string {
	var b strings.Builder
	for i, p := range ps {
		s := p.Key() + ": " + string(p.Cause)
		if p.Forced {
			s += ", deleted at the deadline"
		}
		if p.Detail != "" {
			s += " (" + truncate(p.Detail, mostDetail) + ")"
		}
		sep, more := "", ""
		if i > 0 {
			sep = "; "
		}
		if i < len(ps)-1 {
			more = fmt.Sprintf("; and %d more", len(ps)-i-1)
		}
		need := b.Len() + len(sep) + len(s) + len(more)
		if i > 0 && (i == mostCut || need > budget) {
			fmt.Fprintf(&b, "; and %d more", len(ps)-i)
			break
		}
		if need > budget {
			s = truncate(s, budget-len(more))
		}
		b.WriteString(sep + s)
	}
	return b.String()
}

// tailRoom is what a message keeps for what follows its list of cut-off
// pods (the pods evicted) before the list takes the rest.
const tailRoom = 250

// fit joins head, the cut-off pods listed in what is left of MaxMessage
// and tail; the list gives way to head and to tailRoom bytes of tail, the
// rest of tail gives way to the list.
func fit(head string, cut []drain.CutOffPod, tail string) string {
	list := listCut(cut, MaxMessage-len(head)-min(len(tail), tailRoom))
	return bound(head + list + truncate(tail, MaxMessage-len(head)-len(list)))
}

// bound cuts a message to MaxMessage bytes.
func bound(s string) string { return truncate(s, MaxMessage) }

// truncate cuts s to at most n bytes, on a rune boundary, ending with "…".
func truncate(s string, n int) string {
	const ellipsis = "…"
	if len(s) <= n {
		return s
	}
	if n < len(ellipsis) {
		return ""
	}
	s = s[:n-len(ellipsis)]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + ellipsis
}
