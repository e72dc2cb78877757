// Package lbdrain holds a terminating node's lifecycle action until the
// Elastic Load Balancing v2 target groups no longer send it traffic: every
// target group that lists the node's instance (instance targets) or one of
// its pod IPs (IP targets) as anything but unused must let it go first,
// bounded by AWS's deadline. It holds the pure decision (Decide) and the
// plain data of a wait's outcome, with the standard library only (and
// internal/textlist, which uses nothing else; the controller, in the
// IMDS-only build too, uses them); package poll looks at the target
// groups.
//
// Nothing here deregisters a target (the node's
// node.kubernetes.io/exclude-from-external-load-balancers label and the
// pods' eviction make their owners deregister them; docs/operations.md
// says why), never records Events and never completes an action (package
// controller does).
package lbdrain

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"lifeboat.dev/lifeboat/internal/textlist"
)

// TargetType is a target group's target type, as ELBv2 names it.
type TargetType string

// The target types lifeboat looks at (lambda and alb targets are no node's).
const (
	Instance TargetType = "instance"
	IP       TargetType = "ip"
)

// Unused is the one target health state in which a load balancer sends a
// target nothing and holds no connection to it (not registered, in no
// enabled zone, or its target group in no listener rule). Every other
// state (initial, healthy, unhealthy, unhealthy.draining, draining,
// unavailable) may still carry requests: a draining target keeps its
// connections for the deregistration delay, and an unhealthy one still
// gets traffic when every target of its group is unhealthy (fail open).
const Unused = "unused"

// Node is what a node is known as to ELBv2.
type Node struct {
	InstanceID string
	IPs        []string // pod IPs at cordon time and the node's InternalIP
}

// Registration is one target of a target group, as DescribeTargetHealth
// lists it.
type Registration struct {
	TargetGroup string // ARN
	Type        TargetType
	ID          string // instance ID or IP address
	Port        int32
	State       string // TargetHealthStateEnum
}

func (r Registration) String() string {
	return fmt.Sprintf("%s %s:%d %s", groupName(r.TargetGroup), r.ID, r.Port, r.State)
}

// groupName is the name part of a target group ARN
// (arn:aws:elasticloadbalancing:…:targetgroup/<name>/<id>), or the ARN.
func groupName(arn string) string {
	_, rest, ok := strings.Cut(arn, ":targetgroup/")
	if !ok {
		return arn
	}
	name, _, _ := strings.Cut(rest, "/")
	return name
}

// Verdict is what to do with the lifecycle action.
type Verdict int

const (
	// Release: no target group holds the node; complete the action.
	Release Verdict = iota + 1
	// Hold: some still do and the bound is ahead; look again later.
	Hold
	// CutShort: some still do but the bound has come; complete anyway.
	CutShort
)

func (v Verdict) String() string {
	switch v {
	case Release:
		return "release"
	case Hold:
		return "hold"
	case CutShort:
		return "cut-short"
	}
	return "unknown"
}

// Decision is a verdict with the registrations that still hold the node.
type Decision struct {
	Verdict Verdict
	Held    []Registration
}

// Holds reports whether r is one of n's targets that a load balancer may
// still send traffic to.
func (n Node) Holds(r Registration) bool {
	if r.State == Unused {
		return false
	}
	switch r.Type {
	case Instance:
		return n.InstanceID != "" && r.ID == n.InstanceID
	case IP:
		return slices.Contains(n.IPs, r.ID)
	}
	return false
}

// Decide says whether the node's action may be completed, given the
// registrations of the target groups looked at (now) and the bound of the
// wait (until).
func Decide(n Node, regs []Registration, now, until time.Time) Decision {
	var held []Registration
	for _, r := range regs {
		if n.Holds(r) {
			held = append(held, r)
		}
	}
	switch {
	case len(held) == 0:
		return Decision{Verdict: Release}
	case !now.Before(until):
		return Decision{Verdict: CutShort, Held: held}
	}
	return Decision{Verdict: Hold, Held: held}
}

// Groups returns the names of the target groups of regs, sorted, without
// repeats.
func Groups(regs []Registration) []string {
	var out []string
	for _, r := range regs {
		out = append(out, groupName(r.TargetGroup))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Describe lists regs for a message ("tg-a 10.0.0.1:80 draining, …"),
// at most max of them.
func Describe(regs []Registration, max int) string { return textlist.Join(regs, max, ", ") }

// Result is how a wait ended.
type Result string

const (
	// NotHeld: no target group held the node.
	NotHeld Result = "none"
	// Drained: some did, and let it go before the bound.
	Drained Result = "drained"
	// NotDrained: the bound came first; the action is completed anyway.
	NotDrained Result = "cut-short"
	// Unknown: lifeboat may not read target groups (a denied call): it
	// did not wait.
	Unknown Result = "unknown"
)

// Results lists every Result (the metric's label values).
var Results = []Result{NotHeld, Drained, NotDrained, Unknown}

// Outcome is the end of a wait.
type Outcome struct {
	Result Result
	Waited time.Duration
	Held   []Registration // NotDrained: what still held the node
	Err    error          // Unknown: the denial; NotDrained: the last failed look, if any
}
