// Package plan decides what to do with a node, given everything AWS has
// announced about its instance. It is pure: no I/O, no clock (the caller
// passes now), no clients; the controller carries the plan out.
package plan

import (
	"slices"
	"time"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/window"
)

// TaintPrefix starts the key of every taint lifeboat sets: one per kind,
// e.g. lifeboat.io/spot-interruption.
const TaintPrefix = "lifeboat.io/"

// Policy is the part of the configuration that planning needs.
type Policy struct {
	// DrainKinds drain the node; other kinds cordon and taint only.
	DrainKinds []event.Kind
	// ScheduledChangeLead moves a scheduled change's start earlier.
	ScheduledChangeLead time.Duration
	// Windows, when any, move it earlier still, into the last maintenance
	// window that opens before it (window.Due).
	Windows []window.Window
	// CompleteLifecycle heartbeats and completes terminate lifecycle actions.
	CompleteLifecycle bool
}

// Plan is what lifeboat does to one node.
type Plan struct {
	// Act is false when nothing is due yet (see NotBefore) or nothing applies.
	Act bool
	// NotBefore is when the earliest not-yet-due event becomes due (zero: none waiting).
	NotBefore time.Time
	Cordon    bool
	// TaintKeys are the lifeboat.io/<kind> taints to set (effect NoSchedule).
	TaintKeys []string
	Drain     bool
	// Deadline is when AWS acts on the instance, the earliest of the due
	// events (zero: no known deadline).
	Deadline time.Time
	// Enforced: AWS takes the instance at Deadline whatever lifeboat does:
	// a due event of an enforced kind (Enforces) has that deadline. A
	// scheduled change's start alone is not enforced: the change begins
	// not before it.
	Enforced bool
	// Lifecycle are the terminate actions to heartbeat while draining and to
	// complete when the drain is done.
	Lifecycle []event.LifecycleAction
	// Undo uncordons the node and removes lifeboat's taints: every due event
	// was a cancellation.
	Undo bool
	// Reason is the kind that decided the plan (the most severe due kind).
	Reason event.Kind
	// EventIDs are the due events the plan covers.
	EventIDs []string
	// Waiting are the events not yet due (scheduled changes ahead): carrying
	// out this plan settles every other event, never these.
	Waiting []string
	// KubeletWindow is the time the kubelet's graceful node shutdown still
	// gives the pods left after Deadline (WithKubeletShutdown); zero: none.
	KubeletWindow time.Duration
}

// DrainEnd is when the drain of this plan ends at the latest: the
// deadline, or margin before it when lifecycle actions are completed after
// the drain, so that the completion reaches Auto Scaling before the
// action's own timeout (a drain that ran to the deadline itself was seen
// completing 0.16 s before it). Zero: no deadline. Only AWS's deadline
// moves: the node grace period the drain applies on top of it is kept
// whole (the drain takes the earlier of the two).
func (p Plan) DrainEnd(margin time.Duration) time.Time {
	if p.Deadline.IsZero() || len(p.Lifecycle) == 0 {
		return p.PodDeadline()
	}
	return p.PodDeadline().Add(-margin)
}

// PodDeadline is when the pods left on the node are gone at the latest:
// the deadline, and the kubelet's window after it (KubeletWindow). The
// drain and its forecast both work to it. Zero: no deadline.
func (p Plan) PodDeadline() time.Time {
	if p.Deadline.IsZero() {
		return p.Deadline
	}
	return p.Deadline.Add(p.KubeletWindow)
}

// WithKubeletShutdown plans a Spot interruption's drain with the window
// the kubelet's graceful node shutdown still gives the node's pods after
// the notice's end, when EC2 begins to shut the instance down:
// ordinary is the least time a pod below system-critical priority gets
// then (shutdownGracePeriod - shutdownGracePeriodCriticalPods). The plan's
// deadline must be the Spot interruption's own: another due event with a
// deadline AWS enforces at or before it (a terminal state change, a
// terminate action's end) leaves the plan unchanged, as does ordinary <=
// 0. Pure: the caller reads the kubelet's configuration.
func WithKubeletShutdown(p Plan, events []event.Event, ordinary time.Duration) Plan {
	if ordinary > 0 && KubeletShutdownApplies(p, events) {
		p.KubeletWindow = ordinary
	}
	return p
}

// KubeletShutdownApplies reports whether WithKubeletShutdown would move
// p's pod deadline given a window: the caller reads the kubelet's
// configuration only then.
func KubeletShutdownApplies(p Plan, events []event.Event) bool {
	if p.Deadline.IsZero() || !p.Enforced || p.Reason != event.SpotInterruption {
		return false
	}
	spot := false
	for _, e := range events {
		if !slices.Contains(p.EventIDs, e.ID) || e.Deadline.IsZero() || !Enforces(e.Kind) || e.Deadline.After(p.Deadline) {
			continue
		}
		if e.Kind != event.SpotInterruption {
			return false
		}
		spot = true
	}
	return spot
}

// severity orders kinds: the most severe due kind names the plan.
var severity = map[event.Kind]int{
	event.ScheduledChangeCanceled:         0,
	event.RebalanceRecommendation:         1,
	event.ScheduledChange:                 2,
	event.CapacityReservationInterruption: 3,
	event.LifecycleTerminate:              4,
	event.StateChange:                     5,
	event.SpotInterruption:                6,
}

// For plans one node. events are all the node's known events; launch
// lifecycle events are not node plans and are ignored here.
func For(events []event.Event, p Policy, now time.Time) Plan {
	var pl Plan
	var cancels, actions int
	reason := -1
	// A cancellation that names the start of the change it ends (IMDS
	// maintenance history: same code, Deadline = the change's NotBefore)
	// removes that change, due or not: a maintenance canceled while
	// lifeboat drains for it is undone, not finished.
	canceled := map[string]bool{}
	for _, e := range events {
		if e.Kind == event.ScheduledChangeCanceled && !e.Deadline.IsZero() {
			canceled[changeKey(e)] = true
		}
	}
	for _, e := range events {
		if e.Kind == event.LifecycleLaunch || e.Kind == event.ScheduledChange && canceled[changeKey(e)] {
			continue
		}
		if start := startOf(e, p, now); start.After(now) {
			if pl.NotBefore.IsZero() || start.Before(pl.NotBefore) {
				pl.NotBefore = start
			}
			pl.Waiting = append(pl.Waiting, e.ID)
			continue
		}
		pl.EventIDs = append(pl.EventIDs, e.ID)
		if s, ok := severity[e.Kind]; ok && s > reason {
			reason = s
			pl.Reason = e.Kind
		}
		if e.Kind == event.ScheduledChangeCanceled {
			cancels++
			continue
		}
		actions++
		key := TaintPrefix + string(e.Kind)
		if !slices.Contains(pl.TaintKeys, key) {
			pl.TaintKeys = append(pl.TaintKeys, key)
		}
		if slices.Contains(p.DrainKinds, e.Kind) {
			pl.Drain = true
		}
		if !e.Deadline.IsZero() && (pl.Deadline.IsZero() || e.Deadline.Before(pl.Deadline)) {
			pl.Deadline = e.Deadline
		}
		if e.Kind == event.LifecycleTerminate && e.Lifecycle != nil && e.Lifecycle.Key() != "" && p.CompleteLifecycle {
			if !slices.ContainsFunc(pl.Lifecycle, func(a event.LifecycleAction) bool { return a.Key() == e.Lifecycle.Key() }) {
				pl.Lifecycle = append(pl.Lifecycle, *e.Lifecycle)
			}
		}
	}
	for _, id := range pl.EventIDs {
		for _, e := range events {
			if e.ID == id && Enforces(e.Kind) && !e.Deadline.IsZero() && e.Deadline.Equal(pl.Deadline) {
				pl.Enforced = true
			}
		}
	}
	slices.Sort(pl.TaintKeys)
	switch {
	case actions > 0:
		pl.Act, pl.Cordon = true, true
	case cancels > 0:
		// A cancellation undoes scheduled changes; it cannot undo a Spot
		// notice or a termination, which keep the node cordoned above.
		pl.Act, pl.Undo = true, true
		pl.TaintKeys = nil
	}
	return pl
}

// Enforces reports whether AWS takes the instance at the deadline of an
// event of kind k whatever lifeboat does: a Spot interruption, a state
// change to a terminal state, a terminate lifecycle action (its end), a
// capacity reservation's interruption. A scheduled change starts not
// before its deadline, and a rebalance recommendation has none.
func Enforces(k event.Kind) bool {
	switch k {
	case event.SpotInterruption, event.StateChange, event.LifecycleTerminate, event.CapacityReservationInterruption:
		return true
	}
	return false
}

// changeKey identifies a scheduled change and its cancellation: the
// maintenance code and start.
func changeKey(e event.Event) string {
	return e.Action + "\x00" + e.Deadline.UTC().Format(time.RFC3339Nano)
}

// startOf is when an event becomes due: a scheduled change at its start
// minus the lead, or at the last maintenance window that opens before
// that (window.Due); everything else at once.
func startOf(e event.Event, p Policy, now time.Time) time.Time {
	if e.Kind == event.ScheduledChange && !e.Deadline.IsZero() {
		due, _ := window.Due(p.Windows, e.Deadline.Add(-p.ScheduledChangeLead), now)
		return due
	}
	return time.Time{}
}
