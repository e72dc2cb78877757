// Package route is the route table: which EventBridge event (source,
// detail-type) becomes which lifeboat event kind, and which real events
// lifeboat knows and ignores. It is the only place that spells a
// detail-type: the parser (internal/message), `lifeboat check`
// (internal/check), the Auto Scaling simulator (test/awssim) and the demo
// (hack/demo) read it, and internal/message's tests parse a real AWS
// payload of every route.
//
// It imports only the standard library and internal/event.
package route

import (
	"encoding/json"
	"slices"
	"strings"

	"lifeboat.dev/lifeboat/internal/event"
)

// EventBridge sources, exactly as AWS spells them.
const (
	SourceEC2         = "aws.ec2"
	SourceHealth      = "aws.health"
	SourceAutoScaling = "aws.autoscaling"
)

// Detail-types lifeboat acts on, exactly as AWS spells them.
const (
	SpotInterruption        = "EC2 Spot Instance Interruption Warning"
	RebalanceRecommendation = "EC2 Instance Rebalance Recommendation"
	StateChange             = "EC2 Instance State-change Notification"
	CapacityInterruption    = "EC2 Capacity Reservation Instance Interruption Warning"
	// CapacityInterruptionAlt is the spelling of the rendered HTML copy of
	// the interruptible Capacity Reservation page; the markdown source of
	// the same page (and Karpenter) use CapacityInterruption. AWS documents
	// both, the detail is the same, so both are accepted.
	CapacityInterruptionAlt = "EC2 Interruptible Capacity Reservation Instance Interruption Warning"
	Health                  = "AWS Health Event"
	LifecycleTerminate      = "EC2 Instance-terminate Lifecycle Action"
	LifecycleLaunch         = "EC2 Instance-launch Lifecycle Action"
)

// Route is one kind of EventBridge event.
type Route struct {
	Source     string
	DetailType string
	// Kind is the event kind lifeboat makes of it; empty for an event
	// lifeboat knows and ignores. A Health event becomes ScheduledChange
	// or, once closed or resolved, ScheduledChangeCanceled.
	Kind event.Kind
}

// Routes are the events lifeboat acts on; a detail-type appears once.
var Routes = []Route{
	{SourceEC2, SpotInterruption, event.SpotInterruption},
	{SourceEC2, RebalanceRecommendation, event.RebalanceRecommendation},
	{SourceEC2, StateChange, event.StateChange},
	{SourceEC2, CapacityInterruption, event.CapacityReservationInterruption},
	{SourceEC2, CapacityInterruptionAlt, event.CapacityReservationInterruption},
	{SourceHealth, Health, event.ScheduledChange},
	{SourceAutoScaling, LifecycleTerminate, event.LifecycleTerminate},
	{SourceAutoScaling, LifecycleLaunch, event.LifecycleLaunch},
}

// Ignored are real events of the same sources that lifeboat deliberately
// ignores (a rule that sends only these is useless, not wrong).
var Ignored = []Route{
	{SourceAutoScaling, "EC2 Instance Launch Successful", ""},
	{SourceAutoScaling, "EC2 Instance Launch Unsuccessful", ""},
	{SourceAutoScaling, "EC2 Instance Terminate Successful", ""},
	{SourceAutoScaling, "EC2 Instance Terminate Unsuccessful", ""},
	{SourceAutoScaling, "EC2 Auto Scaling Instance Refresh Checkpoint Reached", ""},
	{SourceAutoScaling, "EC2 Auto Scaling Instance Refresh Started", ""},
	{SourceAutoScaling, "EC2 Auto Scaling Instance Refresh Succeeded", ""},
	{SourceAutoScaling, "EC2 Auto Scaling Instance Refresh Failed", ""},
	{SourceAutoScaling, "EC2 Auto Scaling Instance Refresh Cancelled", ""},
	{SourceEC2, "EC2 Interruptible Capacity Reservation Allocation Reclamation Completed", ""},
	{SourceEC2, "EC2 Capacity Reservation Interruptible Reclamation Complete", ""}, // the HTML copy's spelling
	{SourceHealth, "AWS Health Abuse Event", ""},
}

// Lookup returns the route lifeboat acts on for a detail-type.
func Lookup(detailType string) (Route, bool) {
	for _, r := range Routes {
		if r.DetailType == detailType {
			return r, true
		}
	}
	return Route{}, false
}

// IsIgnored reports whether lifeboat knows the detail-type and ignores it.
func IsIgnored(detailType string) bool {
	for _, r := range Ignored {
		if r.DetailType == detailType {
			return true
		}
	}
	return false
}

// Of returns the routes of kind k, in table order.
func Of(k event.Kind) []Route {
	var out []Route
	for _, r := range Routes {
		if r.Kind == k {
			out = append(out, r)
		}
	}
	return out
}

// DetailTypes returns the detail-types lifeboat acts on, in table order.
func DetailTypes() []string {
	out := make([]string, len(Routes))
	for i, r := range Routes {
		out[i] = r.DetailType
	}
	return out
}

// Sources returns the sources of the routes, each once, in table order.
func Sources() []string {
	var out []string
	for _, r := range Routes {
		if !slices.Contains(out, r.Source) {
			out = append(out, r.Source)
		}
	}
	return out
}

// TerminalStates are the instance states of a state-change notification
// that take the instance away; the others (pending, running) are not
// events.
var TerminalStates = []string{"stopping", "stopped", "shutting-down", "terminated"}

// detailFilters narrow a kind's rule to the events lifeboat acts on.
var detailFilters = map[event.Kind][]filter{
	event.ScheduledChange: {{"service", []string{"EC2"}}, {"eventTypeCategory", []string{"scheduledChange"}}},
	event.StateChange:     {{"state", TerminalStates}},
}

type filter struct {
	field  string
	values []string
}

// Pattern returns the EventBridge event pattern of the rule that delivers
// kind k's events (the one deploy/aws/lifeboat.cfn.json creates); "" for
// a kind no EventBridge event carries.
func Pattern(k event.Kind) string {
	routes := Of(k)
	if len(routes) == 0 {
		return ""
	}
	var sources, types []string
	for _, r := range routes {
		if !slices.Contains(sources, r.Source) {
			sources = append(sources, r.Source)
		}
		types = append(types, r.DetailType)
	}
	var b strings.Builder
	b.WriteString(`{"source":` + jsonList(sources) + `,"detail-type":` + jsonList(types))
	if fs := detailFilters[k]; len(fs) > 0 {
		b.WriteString(`,"detail":{`)
		for i, f := range fs {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(jsonString(f.field) + ":" + jsonList(f.values))
		}
		b.WriteString("}")
	}
	b.WriteString("}")
	return b.String()
}

func jsonString(s string) string {
	b, _ := json.Marshal(s) // a string always encodes
	return string(b)
}

func jsonList(l []string) string {
	b, _ := json.Marshal(l) // strings always encode
	return string(b)
}
