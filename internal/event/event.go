// Package event defines the plain-data events that every lifeboat source
// produces and every later step consumes.
//
// It owns the vocabulary (kinds, lifecycle actions, stable IDs) and nothing
// else: an Event holds no clients, channels or closures, and this package
// imports only the standard library.
package event

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
)

// Kind says what AWS announced. The set is closed: it is used as a metric
// label, so it must stay small.
type Kind string

const (
	// SpotInterruption is the two-minute Spot notice (terminate, stop or hibernate).
	SpotInterruption Kind = "spot-interruption"
	// RebalanceRecommendation says the Spot instance is at elevated risk.
	RebalanceRecommendation Kind = "rebalance-recommendation"
	// ScheduledChange is an AWS Health scheduledChange for EC2 or an IMDS
	// scheduled maintenance event.
	ScheduledChange Kind = "scheduled-change"
	// ScheduledChangeCanceled says a scheduled maintenance was canceled or
	// completed (IMDS maintenance history): undo what lifeboat did for it.
	ScheduledChangeCanceled Kind = "scheduled-change-canceled"
	// StateChange is an EC2 instance state-change notification for a state
	// that takes the instance away (stopping, stopped, shutting-down, terminated).
	StateChange Kind = "state-change"
	// CapacityReservationInterruption is the interruption warning of an
	// interruptible capacity reservation.
	CapacityReservationInterruption Kind = "capacity-reservation-interruption"
	// LifecycleTerminate is an Auto Scaling terminate lifecycle action
	// (queue mode: with a token; IMDS mode: target-lifecycle-state Terminated,
	// without one).
	LifecycleTerminate Kind = "lifecycle-terminate"
	// LifecycleLaunch is an Auto Scaling launch lifecycle action.
	LifecycleLaunch Kind = "lifecycle-launch"
)

// Kinds lists every kind, in a stable order.
var Kinds = []Kind{
	SpotInterruption, RebalanceRecommendation, ScheduledChange, ScheduledChangeCanceled,
	StateChange, CapacityReservationInterruption, LifecycleTerminate, LifecycleLaunch,
}

// Source names where an event came from.
type Source string

const (
	SourceSQS  Source = "sqs"
	SourceIMDS Source = "imds"
)

// Auto Scaling lifecycle transitions, origins and destinations, exactly as AWS spells them.
const (
	TransitionLaunching   = "autoscaling:EC2_INSTANCE_LAUNCHING"
	TransitionTerminating = "autoscaling:EC2_INSTANCE_TERMINATING"

	PlaceEC2              = "EC2"
	PlaceWarmPool         = "WarmPool"
	PlaceAutoScalingGroup = "AutoScalingGroup"
)

// LifecycleAction identifies one Auto Scaling lifecycle action.
type LifecycleAction struct {
	GroupName  string `json:"groupName"`
	HookName   string `json:"hookName"`
	Token      string `json:"token,omitempty"`
	Transition string `json:"transition"`
	// Origin and Destination are EC2, WarmPool or AutoScalingGroup; empty in
	// notifications that predate warm pools.
	Origin      string `json:"origin,omitempty"`
	Destination string `json:"destination,omitempty"`
	Metadata    string `json:"notificationMetadata,omitempty"`
}

// Key identifies the action among a node's actions: its token, or, for an
// action known without one (IMDS mode completes its own instance's action
// by instance ID), its group and hook. "" when it cannot be completed.
func (a LifecycleAction) Key() string {
	if a.Token != "" {
		return a.Token
	}
	if a.GroupName == "" || a.HookName == "" {
		return ""
	}
	return a.GroupName + "/" + a.HookName
}

// Event is one thing AWS announced about one instance.
type Event struct {
	// ID is stable: derived from the content, never from the time it was read,
	// so a redelivered or re-polled event has the same ID.
	ID         string `json:"id"`
	Kind       Kind   `json:"kind"`
	Source     Source `json:"source"`
	InstanceID string `json:"instanceID"`
	// Time is when AWS emitted the event (zero if unknown).
	Time time.Time `json:"time,omitzero"`
	// Deadline is when AWS acts on the instance (zero if unknown).
	Deadline time.Time `json:"deadline,omitzero"`
	// Action refines the kind: the Spot instance-action (terminate, stop,
	// hibernate), the EC2 state, the maintenance code or Health event type.
	Action string `json:"action,omitempty"`
	// Region and Account come from the envelope when present.
	Region  string `json:"region,omitempty"`
	Account string `json:"account,omitempty"`
	// Lifecycle is set for LifecycleTerminate and LifecycleLaunch from a
	// queue, and for LifecycleTerminate in IMDS mode when lifeboat completes
	// the node's own action (no token: completed by instance ID).
	Lifecycle *LifecycleAction `json:"lifecycle,omitempty"`
}

// ID derives a stable event ID from the parts that identify an event: its
// kind, its instance and whatever distinguishes two events of that kind for
// one instance (a lifecycle token, a Health event ARN, a notice time).
func ID(kind Kind, instanceID string, parts ...string) string {
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write([]byte(instanceID))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return string(kind) + "-" + hex.EncodeToString(h.Sum(nil)[:10])
}

// NormalizeInstanceID returns the instance ID in s: it trims whitespace and
// accepts an ARN (arn:aws:ec2:region:account:instance/i-...). It returns ""
// when s holds no well-formed instance ID.
func NormalizeInstanceID(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "/"); i >= 0 && strings.HasPrefix(s, "arn:") {
		s = s[i+1:]
	}
	if !ValidInstanceID(s) {
		return ""
	}
	return s
}

// ValidInstanceID reports whether s is an EC2 instance ID: "i-" followed by
// 8 or 17 lower-case hex digits.
func ValidInstanceID(s string) bool {
	if !strings.HasPrefix(s, "i-") {
		return false
	}
	hexPart := s[2:]
	if len(hexPart) != 8 && len(hexPart) != 17 {
		return false
	}
	for _, c := range hexPart {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
