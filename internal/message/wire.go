package message

import (
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode/utf8"
)

// wire is the top level of every format, decoded in one pass. The key sets
// of the formats do not overlap (encoding/json prefers an exact key match,
// so "time" and "Time" land in different fields).
type wire struct {
	// EventBridge envelope. "version" is deliberately not read (see
	// parseEventBridge).
	ID         text            `json:"id"`
	DetailType text            `json:"detail-type"`
	Source     text            `json:"source"`
	Account    text            `json:"account"`
	Time       text            `json:"time"`
	Region     text            `json:"region"`
	Resources  json.RawMessage `json:"resources"` // decoded only for AWS Health
	Detail     *detail         `json:"detail"`

	// SNS notification.
	Type      text `json:"Type"`
	MessageID text `json:"MessageId"`
	TopicArn  text `json:"TopicArn"`
	Message   text `json:"Message"`

	// Auto Scaling notification sent straight to the queue.
	asgNotification
}

// detail is the union of the EventBridge details lifeboat reads. It is
// decoded in the same pass as the envelope (a second json.Unmarshal of a
// json.RawMessage would scan the detail twice more). No two kinds share a
// key; a key that matches another kind's field only case-insensitively
// (a scaling activity's "StartTime") lands in a field that kind never reads.
type detail struct {
	ec2Detail
	healthDetail
	asgNotification
}

// ec2Detail is the detail of the aws.ec2 events lifeboat acts on.
type ec2Detail struct {
	InstanceID      text `json:"instance-id"`
	InstanceAction  text `json:"instance-action"`
	State           text `json:"state"`
	TerminationTime text `json:"instance-termination-time"`
}

// healthDetail is the part of an AWS Health event lifeboat reads. page,
// totalPages and backupEvent are strings in AWS's schema and are not read:
// every page is handled on its own.
type healthDetail struct {
	EventArn          text     `json:"eventArn"`
	Service           text     `json:"service"`
	EventTypeCode     text     `json:"eventTypeCode"`
	EventTypeCategory text     `json:"eventTypeCategory"`
	StatusCode        text     `json:"statusCode"`
	StartTime         text     `json:"startTime"`
	EventRegion       text     `json:"eventRegion"`
	AffectedAccount   text     `json:"affectedAccount"`
	AffectedEntities  []entity `json:"affectedEntities"`
}

// entity is one of AWS Health's affectedEntities.
type entity struct {
	EntityValue text `json:"entityValue"`
	Status      text `json:"status"`
}

// asgNotification holds the fields of an Auto Scaling lifecycle-hook
// notification: the flat body sent to SQS or SNS, and the detail of the
// EventBridge lifecycle-action events (which lacks the last five fields).
type asgNotification struct {
	LifecycleHookName    text `json:"LifecycleHookName"`
	LifecycleTransition  text `json:"LifecycleTransition"`
	LifecycleActionToken text `json:"LifecycleActionToken"`
	AutoScalingGroupName text `json:"AutoScalingGroupName"`
	EC2InstanceID        text `json:"EC2InstanceId"`
	NotificationMetadata text `json:"NotificationMetadata"`
	Origin               text `json:"Origin"`
	Destination          text `json:"Destination"`

	RequestID           text `json:"RequestId"`
	AccountID           text `json:"AccountId"`
	Time                text `json:"Time"`
	Event               text `json:"Event"`
	Service             text `json:"Service"`
	AutoScalingGroupARN text `json:"AutoScalingGroupARN"`
}

func (b *wire) isSNS() bool {
	return b.Type != "" && (b.Message != "" || b.TopicArn != "" || b.MessageID != "")
}

func (b *wire) isEventBridge() bool {
	return b.DetailType != "" || (b.Source != "" && b.Detail != nil)
}

func (b *wire) isAutoScaling() bool {
	n := &b.asgNotification
	return n.LifecycleTransition != "" || n.Event != "" || n.EC2InstanceID != "" ||
		n.LifecycleHookName != "" || n.LifecycleActionToken != "" ||
		n.AutoScalingGroupName != "" || n.Service == "AWS Auto Scaling"
}

// text is a JSON value read as a string. A JSON string is unquoted, null is
// "", and any other value (a number, a boolean, an object) is kept as its
// JSON text, so a number where AWS documents a string still reads.
type text string

func (t *text) UnmarshalJSON(b []byte) error {
	if len(b) >= 2 && b[0] == '"' {
		inner := b[1 : len(b)-1]
		if !containsByte(inner, '\\') && utf8.Valid(inner) {
			*t = text(inner)
			return nil
		}
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = text(s)
		return nil
	}
	if string(b) == "null" {
		*t = ""
		return nil
	}
	*t = text(b)
	return nil
}

func containsByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}

// trimmed returns t without surrounding white space.
func (t text) trimmed() string { return strings.TrimSpace(string(t)) }

// stringList is a list of strings that also accepts a single string (the
// capacity-reservation doc publishes "resources": "[instance arn]").
type stringList []string

func (l *stringList) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '[' {
		var items []text
		if err := decodeLenient(b, &items); err != nil {
			return err
		}
		out := make([]string, 0, len(items))
		for _, it := range items {
			out = append(out, string(it))
		}
		*l = out
		return nil
	}
	var one text
	if err := one.UnmarshalJSON(b); err != nil {
		return err
	}
	*l = stringList{string(one)}
	return nil
}

// decodeLenient decodes data into v. A value whose JSON type does not fit
// the Go field (an object where a list is expected, a string where the
// detail object is expected) leaves that field zero instead of failing the
// whole message: the checks on what lifeboat acts on come afterwards.
// Syntax errors are returned.
func decodeLenient(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return nil
	}
	return err
}

// Layouts of the dates AWS puts in messages. The EventBridge "time" and the
// Auto Scaling "Time" are RFC 3339, with or without fractional seconds. AWS
// Health dates look like "Fri, 3 Jun 2022 05:01:10 GMT": the day of month
// may have one digit and the weekday may be wrong (Go does not check it).
var dateLayouts = []string{
	time.RFC3339,
	"Mon, 2 Jan 2006 15:04:05 MST",
	"Mon, 2 Jan 2006 15:04:05 -0700",
	"2 Jan 2006 15:04:05 MST",
}

// parseTime returns the time in s, in UTC, or the zero time when s is empty
// or not a date (doc placeholders such as "yyyy-mm-ddThh:mm:ssZ").
func parseTime(s string) time.Time {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}
	}
	for _, layout := range dateLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

// stamp renders a time for use in an event ID ("" for the zero time).
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// firstNonEmpty returns the first non-empty string.
func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// arnRegion returns the region field of an ARN, or "".
func arnRegion(arn string) string {
	parts := strings.SplitN(arn, ":", 5)
	if len(parts) < 5 || parts[0] != "arn" {
		return ""
	}
	return parts[3]
}
