// Package message turns the body of one queue message into lifeboat events.
//
// It owns the wire formats AWS delivers to a lifeboat queue: the EventBridge
// envelope (Spot interruption, rebalance recommendation, instance state
// change, AWS Health scheduled change, capacity-reservation interruption,
// Auto Scaling lifecycle actions), the flat Auto Scaling lifecycle-hook
// notification sent straight to SQS, and either of them wrapped in an SNS
// notification. It decides which messages are relevant, derives each event's
// stable ID from the message content, and names why a message was ignored or
// rejected with a reason from a small fixed set (usable as a metric label).
//
// It must stay a pure function of its input: no I/O, no AWS or Kubernetes
// clients, no clock, no logging and no global state. It must never panic on
// any input. It imports only the standard library, internal/event and the
// route table (internal/route).
package message

import (
	"bytes"
	"errors"
	"fmt"

	"lifeboat.dev/lifeboat/internal/event"
)

// MaxBodySize is the largest body Parse accepts: 1 MiB, the SQS maximum
// message size (raised from 256 KiB in 2025). EventBridge events and SNS
// messages are smaller, but an SNS envelope around a large EventBridge event
// (a paginated AWS Health event) grows through JSON escaping, so the bound is
// the queue's, not the event's.
const MaxBodySize = 1 << 20

// Formats of a message body, as reported in Result.Format.
const (
	// FormatEventBridge is an EventBridge event delivered to SQS.
	FormatEventBridge = "eventbridge"
	// FormatAutoScaling is a lifecycle-hook notification whose target is the
	// queue itself (flat JSON, no envelope).
	FormatAutoScaling = "autoscaling"
	// FormatSNS is an SNS notification (raw delivery off) whose Message is an
	// EventBridge event or an Auto Scaling notification.
	FormatSNS = "sns"
)

// Reasons for ignoring a well-formed message (Result.Ignored).
const (
	// IgnoredTestNotification: autoscaling:TEST_NOTIFICATION, sent when a
	// lifecycle hook or notification target is created.
	IgnoredTestNotification = "test-notification"
	// IgnoredUnhandledDetailType: an EventBridge event lifeboat does not act
	// on (scaling-activity results, instance refresh, reclamation completed,
	// Capacity Block events, a detail-type from an unexpected source...).
	IgnoredUnhandledDetailType = "unhandled-detail-type"
	// IgnoredStateNotTerminal: an instance state change to pending, running
	// or a state EC2 does not document.
	IgnoredStateNotTerminal = "state-not-terminal"
	// IgnoredHealthNotEC2ScheduledChange: an AWS Health event that is not
	// service EC2 with eventTypeCategory scheduledChange.
	IgnoredHealthNotEC2ScheduledChange = "health-not-ec2-scheduled-change"
	// IgnoredHealthNoInstances: an EC2 scheduled change whose entities are not
	// instances (dedicated hosts, reservations) or that names none.
	IgnoredHealthNoInstances = "health-no-instances"
	// IgnoredLifecycleTransitionUnknown: a lifecycle action whose
	// LifecycleTransition is neither launching nor terminating.
	IgnoredLifecycleTransitionUnknown = "lifecycle-transition-unknown"
	// IgnoredUnhandledNotification: an Auto Scaling notification that is not
	// a lifecycle action (scaling notifications such as
	// autoscaling:EC2_INSTANCE_TERMINATE).
	IgnoredUnhandledNotification = "unhandled-notification"
	// IgnoredUnknownFormat: a JSON object that is none of the known formats
	// (an SNS subscription confirmation, a Lambda event, a ReceiveMessage
	// response...).
	IgnoredUnknownFormat = "unknown-format"
)

// IgnoredReasons lists every value of Result.Ignored, in a stable order.
var IgnoredReasons = []string{
	IgnoredTestNotification,
	IgnoredUnhandledDetailType,
	IgnoredStateNotTerminal,
	IgnoredHealthNotEC2ScheduledChange,
	IgnoredHealthNoInstances,
	IgnoredLifecycleTransitionUnknown,
	IgnoredUnhandledNotification,
	IgnoredUnknownFormat,
}

// Reasons for rejecting a malformed message (MalformedError.Reason).
const (
	// MalformedTooLarge: the body is larger than MaxBodySize.
	MalformedTooLarge = "too-large"
	// MalformedInvalidJSON: the body (or the Message of an SNS envelope) is
	// not a JSON object.
	MalformedInvalidJSON = "invalid-json"
	// MalformedMissingInstanceID: a message that must name an instance names none.
	MalformedMissingInstanceID = "missing-instance-id"
	// MalformedInvalidInstanceID: the instance ID is not i- followed by 8 or
	// 17 lower-case hex digits (also as the last segment of an ARN).
	MalformedInvalidInstanceID = "invalid-instance-id"
)

// MalformedReasons lists every value of MalformedError.Reason, in a stable order.
var MalformedReasons = []string{
	MalformedTooLarge,
	MalformedInvalidJSON,
	MalformedMissingInstanceID,
	MalformedInvalidInstanceID,
}

// ErrMalformed matches (errors.Is) every error Parse returns.
var ErrMalformed = errors.New("malformed message")

// MalformedError is the error Parse returns. Reason is one of
// MalformedReasons; Detail is for humans and logs, never for labels.
type MalformedError struct {
	Reason string
	Detail string
}

func (e *MalformedError) Error() string {
	if e.Detail == "" {
		return "malformed message: " + e.Reason
	}
	return "malformed message: " + e.Reason + ": " + e.Detail
}

// Is makes errors.Is(err, ErrMalformed) true.
func (e *MalformedError) Is(target error) bool { return target == ErrMalformed }

// Reason returns the bounded reason of an error returned by Parse, or ""
// when err is nil or not a *MalformedError.
func Reason(err error) string {
	var m *MalformedError
	if errors.As(err, &m) {
		return m.Reason
	}
	return ""
}

func malformed(reason, format string, args ...any) *MalformedError {
	return &MalformedError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Result is what one message body means.
type Result struct {
	// Events holds one event per affected instance; empty when the message is
	// known but irrelevant (see Ignored) or malformed.
	Events []event.Event
	// Format is FormatEventBridge, FormatAutoScaling or FormatSNS; empty when
	// the body is not recognised at all.
	Format string
	// Ignored is one of IgnoredReasons when Events is empty and the message
	// is well formed; empty otherwise.
	Ignored string
}

func ignored(format, reason string) Result {
	return Result{Format: format, Ignored: reason}
}

// Parse turns one SQS message body into events. It never panics.
//
// Parse is liberal in what it accepts (missing envelope fields, any
// EventBridge version, instance IDs with stray whitespace or given as ARNs,
// RFC 1123 dates with one-digit days, numbers where strings are expected,
// placeholder times) and exact in what it acts on (exact detail-types,
// states, lifecycle transitions; every event names a valid instance ID).
// A redelivery of the same message, or a duplicate EventBridge event,
// yields identical events with identical IDs.
//
// The error is always a *MalformedError (errors.Is(err, ErrMalformed)); the
// Result returned with it still carries the Format when it was recognised.
func Parse(body []byte) (Result, error) {
	if len(body) > MaxBodySize {
		return Result{}, malformed(MalformedTooLarge, "%d bytes, more than %d", len(body), MaxBodySize)
	}
	var b wire
	if err := decodeObject(body, &b); err != nil {
		return Result{}, err
	}
	if b.isSNS() {
		return parseSNS(&b)
	}
	return parseInner(&b)
}

// parseInner parses a body that is not (or no longer) an SNS envelope.
func parseInner(b *wire) (Result, error) {
	switch {
	case b.isEventBridge():
		return parseEventBridge(b)
	case b.isAutoScaling():
		return parseAutoScaling(b)
	default:
		return ignored("", IgnoredUnknownFormat), nil
	}
}

// parseSNS unwraps one SNS notification. The Message is parsed as an
// EventBridge event or an Auto Scaling notification; an SNS envelope inside
// an SNS envelope is not unwrapped again. An event that names no region
// (a lifecycle-hook notification never does) takes the topic's: a hook's
// notification target must be in the group's region.
func parseSNS(b *wire) (Result, error) {
	if b.Type.trimmed() != "Notification" {
		// SubscriptionConfirmation, UnsubscribeConfirmation.
		return ignored(FormatSNS, IgnoredUnknownFormat), nil
	}
	var inner wire
	if err := decodeObject([]byte(b.Message), &inner); err != nil {
		err.Detail = "SNS Message: " + err.Detail
		return Result{Format: FormatSNS}, err
	}
	if inner.isSNS() {
		return ignored(FormatSNS, IgnoredUnknownFormat), nil
	}
	res, err := parseInner(&inner)
	res.Format = FormatSNS
	if region := arnRegion(b.TopicArn.trimmed()); region != "" {
		for i := range res.Events {
			if res.Events[i].Region == "" {
				res.Events[i].Region = region
			}
		}
	}
	return res, err
}

// decodeObject decodes a JSON object into v. Values of an unexpected JSON
// type are left zero (see decodeLenient); anything that is not a JSON
// object is MalformedInvalidJSON.
func decodeObject(data []byte, v any) *MalformedError {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 {
		return malformed(MalformedInvalidJSON, "empty body")
	}
	if trimmed[0] != '{' {
		return malformed(MalformedInvalidJSON, "not a JSON object (starts with %.16q)", trimmed)
	}
	if err := decodeLenient(data, v); err != nil {
		return malformed(MalformedInvalidJSON, "%v", err)
	}
	return nil
}
