// Package notify tells people what lifeboat does: webhooks (Slack, Microsoft
// Teams, generic JSON) rendered from templates parsed at start.
//
// It owns outbound notifications only. It must not decide anything: the
// controller says what happened, once per node per interruption.
package notify

import (
	"time"

	"lifeboat.dev/lifeboat/internal/event"
)

// Phase is where a node's interruption handling stands.
type Phase string

const (
	// PhaseReceived: an interruption was received; the drain is about to start.
	PhaseReceived Phase = "received"
	// PhaseFinished: the node was drained and its lifecycle actions completed.
	PhaseFinished Phase = "finished"
	// PhaseFailed: the work failed for good (it is still retried, but people should look).
	PhaseFailed Phase = "failed"
	// PhaseForecastMiss: the drain forecast says pods cannot finish their
	// shutdown before AWS's deadline whatever they do (certain misses;
	// Pods names them); sent before the deadline.
	PhaseForecastMiss Phase = "forecast-miss"
)

// Notification is plain data about one node's interruption.
type Notification struct {
	Phase      Phase      `json:"phase"`
	Node       string     `json:"node"`
	InstanceID string     `json:"instanceID"`
	Kind       event.Kind `json:"kind"`
	// Action refines the kind (terminate, stop, ...).
	Action   string    `json:"action,omitempty"`
	Deadline time.Time `json:"deadline,omitzero"`
	// Detail is a human sentence about what happened.
	Detail string `json:"detail,omitempty"`
	// Pods are the pods concerned, namespace/name: those the drain evicted
	// (finished), those that cannot finish their shutdown before the
	// deadline (forecast-miss).
	Pods []string `json:"pods,omitempty"`
	// CutOff names the pods still on the node when its drain ended (the
	// deadline passed, the Node was deleted), each "namespace/name: cause
	// (detail)": cause is mid-shutdown, not-started or finalizer
	// (finished).
	CutOff []string  `json:"cutOff,omitempty"`
	Time   time.Time `json:"time"`
}
