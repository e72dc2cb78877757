package imds

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/rebootmark"
)

// Metadata paths lifeboat reads, relative to /latest/meta-data/. Each one
// answers 404 while nothing applies.
const (
	PathSpot        = "spot/instance-action"
	PathRebalance   = "events/recommendations/rebalance"
	PathScheduled   = "events/maintenance/scheduled"
	PathHistory     = "events/maintenance/history"
	PathTargetState = "autoscaling/target-lifecycle-state"
	// PathInstanceID is read once, at start.
	PathInstanceID = "instance-id"
)

// Maintenance event states (events/maintenance/*: State).
const (
	StateActive    = "active"
	StateCanceled  = "canceled"
	StateCompleted = "completed"
)

// Maintenance codes whose maintenance reboots the instance: after the
// reboot lifeboat uncordons the node (package rebootmark).
const (
	CodeSystemReboot   = rebootmark.CodeSystemReboot
	CodeInstanceReboot = rebootmark.CodeInstanceReboot
)

// TargetTerminated is the only target-lifecycle-state lifeboat acts on.
const TargetTerminated = "Terminated"

// maintenanceTime is the layout of NotBefore / NotAfter: "21 Jan 2019 09:00:43 GMT".
const maintenanceTime = "2 Jan 2006 15:04:05 GMT"

// ErrMalformed is returned (wrapped) for a body lifeboat cannot read.
var ErrMalformed = errors.New("malformed instance metadata")

// ErrUnknownPath is returned for a path Parse does not know.
var ErrUnknownPath = errors.New("unknown instance metadata path")

// Parse turns the body of one metadata path (HTTP 200) into the events it
// announces about instanceID. It is pure: the same body always gives the
// same events with the same IDs, whenever it is read. A body that
// announces nothing (a target-lifecycle-state other than Terminated, an
// empty maintenance list) gives no events and no error.
//
// IDs come from the content that identifies a signal, and only from that:
//   - spot/instance-action: the action. The notice's time is its Deadline but
//     not part of the ID: an instance is interrupted once, and a time that
//     moved between reads must not make a second interruption.
//   - rebalance: nothing but the kind (one recommendation per instance).
//   - maintenance: EventId, Code, NotBefore and, for canceled/completed
//     entries, the State.
//   - target-lifecycle-state: the value Terminated.
func Parse(path, instanceID string, body []byte) ([]event.Event, error) {
	switch path {
	case PathSpot:
		return parseSpot(instanceID, body)
	case PathRebalance:
		return parseRebalance(instanceID, body)
	case PathScheduled, PathHistory:
		return parseMaintenance(path, instanceID, body)
	case PathTargetState:
		return parseTargetState(instanceID, body), nil
	default:
		return nil, fmt.Errorf("%w %q", ErrUnknownPath, path)
	}
}

func newEvent(kind event.Kind, instanceID string) event.Event {
	return event.Event{Kind: kind, Source: event.SourceIMDS, InstanceID: instanceID}
}

// decodeObject decodes a JSON object strictly enough to notice garbage and
// leniently enough to survive fields AWS may add.
func decodeObject(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: trailing data after the JSON value", ErrMalformed)
	}
	return nil
}

// text is a JSON string that also accepts a number or null, so that a
// changed type does not hide a notice; only its trimmed text is used.
type text string

func (t *text) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*t = text(strings.TrimSpace(s))
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err == nil {
		*t = text(n.String())
		return nil
	}
	if string(b) == "null" {
		*t = ""
		return nil
	}
	return fmt.Errorf("%w: %s is not a string", ErrMalformed, b)
}

// spot/instance-action: {"action": "terminate|stop|hibernate", "time": RFC 3339}.
func parseSpot(instanceID string, body []byte) ([]event.Event, error) {
	var v struct {
		Action text `json:"action"`
		Time   text `json:"time"`
	}
	if err := decodeObject(body, &v); err != nil {
		return nil, fmt.Errorf("reading %s: %w", PathSpot, err)
	}
	action := strings.ToLower(string(v.Action))
	if action == "" {
		return nil, fmt.Errorf("reading %s: %w: no action", PathSpot, ErrMalformed)
	}
	e := newEvent(event.SpotInterruption, instanceID)
	// Any action is an interruption: an action AWS adds later must not be
	// ignored. terminate, stop and hibernate are the documented ones.
	e.Action = action
	e.Deadline = parseRFC3339(string(v.Time))
	e.ID = event.ID(e.Kind, instanceID, action)
	return []event.Event{e}, nil
}

// events/recommendations/rebalance: {"noticeTime": RFC 3339}.
func parseRebalance(instanceID string, body []byte) ([]event.Event, error) {
	var v struct {
		NoticeTime text `json:"noticeTime"`
	}
	if err := decodeObject(body, &v); err != nil {
		return nil, fmt.Errorf("reading %s: %w", PathRebalance, err)
	}
	e := newEvent(event.RebalanceRecommendation, instanceID)
	e.Time = parseRFC3339(string(v.NoticeTime))
	e.ID = event.ID(e.Kind, instanceID)
	return []event.Event{e}, nil
}

type maintenance struct {
	Code        text `json:"Code"`
	Description text `json:"Description"`
	State       text `json:"State"`
	EventID     text `json:"EventId"`
	NotBefore   text `json:"NotBefore"`
	NotAfter    text `json:"NotAfter"`
}

// events/maintenance/scheduled and .../history: a JSON array of
// {NotBefore, Code, Description, EventId, NotAfter, State}. State active is a
// ScheduledChange due at NotBefore; canceled or completed (history, or the
// scheduled list while AWS moves it) is a ScheduledChangeCanceled whose
// Deadline is the NotBefore of the change it ends, so that the plan can
// match the two. In the history only canceled and completed count; other
// states are ignored.
func parseMaintenance(path, instanceID string, body []byte) ([]event.Event, error) {
	var list []maintenance
	if err := decodeObject(body, &list); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	var evs []event.Event
	seen := map[string]bool{}
	for _, m := range list {
		code := strings.ToLower(string(m.Code))
		notBefore := parseMaintenanceTime(string(m.NotBefore))
		when := string(m.NotBefore)
		if !notBefore.IsZero() {
			when = notBefore.Format(time.RFC3339)
		}
		var e event.Event
		switch state := strings.ToLower(string(m.State)); state {
		case StateActive, "":
			if path == PathHistory {
				continue
			}
			e = newEvent(event.ScheduledChange, instanceID)
			e.ID = event.ID(e.Kind, instanceID, string(m.EventID), code, when)
		case StateCanceled, StateCompleted:
			e = newEvent(event.ScheduledChangeCanceled, instanceID)
			e.ID = event.ID(e.Kind, instanceID, string(m.EventID), code, when, state)
		default:
			continue
		}
		if m.EventID == "" && code == "" && m.NotBefore == "" {
			continue // an empty object announces nothing
		}
		e.Action = code
		e.Deadline = notBefore
		if seen[e.ID] {
			continue
		}
		seen[e.ID] = true
		evs = append(evs, e)
	}
	return evs, nil
}

// autoscaling/target-lifecycle-state: plain text. Only Terminated drains:
// InService, Standby, Detached and Warmed:* are not terminations (the
// value is the target state, not the current one).
func parseTargetState(instanceID string, body []byte) []event.Event {
	if strings.TrimSpace(string(body)) != TargetTerminated {
		return nil
	}
	e := newEvent(event.LifecycleTerminate, instanceID)
	e.Action = TargetTerminated
	e.ID = event.ID(e.Kind, instanceID, TargetTerminated)
	return []event.Event{e}
}

func parseRFC3339(s string) time.Time {
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(s))
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// parseMaintenanceTime parses "21 Jan 2019 09:00:43 GMT", tolerating a
// weekday prefix and RFC 3339; it returns zero for anything else (the
// change is then due at once, the safe side).
func parseMaintenanceTime(s string) time.Time {
	s = strings.TrimSpace(s)
	if _, rest, ok := strings.Cut(s, ", "); ok {
		s = rest
	}
	if t, err := time.Parse(maintenanceTime, s); err == nil {
		return t.UTC()
	}
	return parseRFC3339(s)
}
