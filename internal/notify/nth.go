package notify

import (
	"encoding/json"
	"strings"
	"time"
)

// The methods below answer the fields of aws-node-termination-handler's
// webhook templates, so that a migrated template renders (a template method
// is called like a field: {{ .EventID }}). NTH's instance metadata fields
// (.InstanceType, .AvailabilityZone, ...) are not known here: a template
// using them fails at start, never at the first interruption.

// EventID identifies the interruption: its kind and instance.
func (n Notification) EventID() string { return string(n.Kind) + "-" + n.InstanceID }

// NodeName is Node.
func (n Notification) NodeName() string { return n.Node }

// Description is Detail, or the summary when there is none, escaped for a
// JSON string: NTH's templates place their fields inside JSON strings
// without escaping, and lifeboat's details can hold quotes.
func (n Notification) Description() string {
	d := n.Detail
	if d == "" {
		d = summary(n)
	}
	b, _ := json.Marshal(d) // a string always marshals
	return strings.TrimSuffix(strings.TrimPrefix(string(b), `"`), `"`)
}

// StartTime is when AWS acts (the deadline), else when this happened.
func (n Notification) StartTime() time.Time {
	if !n.Deadline.IsZero() {
		return n.Deadline
	}
	return n.Time
}

// State is the phase (received, finished, failed).
func (n Notification) State() string { return string(n.Phase) }

// Monitor is what noticed the interruption, as NTH names its monitors.
func (n Notification) Monitor() string { return "lifeboat" }
