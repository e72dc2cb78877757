package message

import (
	"slices"
	"strings"
	"time"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/route"
)

// spotNotice is how long before the action EC2 sends a Spot interruption
// warning (and an interruptible Capacity Reservation warning), except for
// hibernation, which starts when the warning is sent.
const spotNotice = 2 * time.Minute

// envelope is the part of an EventBridge event every kind uses.
type envelope struct {
	id      string
	time    time.Time
	rawTime string
	region  string
	account string
}

// newEvent returns an event of kind for instance with the envelope's data.
func (e *envelope) newEvent(kind event.Kind, instanceID string) event.Event {
	return event.Event{
		Kind:       kind,
		Source:     event.SourceSQS,
		InstanceID: instanceID,
		Time:       e.time,
		Region:     e.region,
		Account:    e.account,
	}
}

// parseEventBridge routes an EventBridge event on (source, detail-type)
// through the route table (internal/route).
// The version is not checked: AWS sends "0", but samples in the wild omit
// it or use other values, and the detail-type alone fixes the schema. A
// missing source is accepted; a source that does not own the detail-type
// is not.
func parseEventBridge(b *wire) (Result, error) {
	env := envelope{
		id:      b.ID.trimmed(),
		rawTime: b.Time.trimmed(),
		region:  b.Region.trimmed(),
		account: b.Account.trimmed(),
	}
	env.time = parseTime(env.rawTime)
	d := b.Detail
	if d == nil {
		d = &detail{}
	}
	source := b.Source.trimmed()

	var (
		evs    []event.Event
		reason string
		err    error
	)
	r, ok := route.Lookup(b.DetailType.trimmed())
	switch {
	case !ok || (source != "" && source != r.Source):
		reason = IgnoredUnhandledDetailType
	case r.Kind == event.SpotInterruption:
		evs, err = spotInterruption(&env, &d.ec2Detail)
	case r.Kind == event.RebalanceRecommendation:
		evs, err = rebalance(&env, &d.ec2Detail)
	case r.Kind == event.StateChange:
		evs, reason, err = stateChange(&env, &d.ec2Detail)
	case r.Kind == event.CapacityReservationInterruption:
		evs, err = capacityInterruption(&env, &d.ec2Detail)
	case r.Kind == event.ScheduledChange:
		evs, reason = health(&env, &d.healthDetail, b.Resources)
	case r.Kind == event.LifecycleTerminate || r.Kind == event.LifecycleLaunch:
		evs, reason, err = lifecycle(&d.asgNotification, r.Kind, &env)
	default:
		reason = IgnoredUnhandledDetailType // a route this parser does not know yet: TestEveryRouteParses
	}
	if err != nil {
		return Result{Format: FormatEventBridge}, err
	}
	return Result{Events: evs, Format: FormatEventBridge, Ignored: reason}, nil
}

// instanceID returns the normalised instance ID in raw, or why there is none.
func instanceID(raw text, field string) (string, error) {
	s := raw.trimmed()
	if s == "" {
		return "", malformed(MalformedMissingInstanceID, "no %s", field)
	}
	id := event.NormalizeInstanceID(s)
	if id == "" {
		return "", malformed(MalformedInvalidInstanceID, "%s %.64q", field, s)
	}
	return id, nil
}

// instanceAction returns the Spot or Capacity Reservation instance-action,
// or "" when it is not one EC2 documents (the docs' placeholder "action").
func instanceAction(raw text) string {
	switch a := strings.ToLower(raw.trimmed()); a {
	case "terminate", "stop", "hibernate":
		return a
	default:
		return ""
	}
}

// spotInterruption: the deadline is the envelope time plus two minutes
// (hibernation: the envelope time). The ID is the action and its deadline,
// which is also what IMDS spot/instance-action reports.
func spotInterruption(env *envelope, d *ec2Detail) ([]event.Event, error) {
	id, err := instanceID(d.InstanceID, "detail.instance-id")
	if err != nil {
		return nil, err
	}
	ev := env.newEvent(event.SpotInterruption, id)
	ev.Action = instanceAction(d.InstanceAction)
	if !env.time.IsZero() {
		ev.Deadline = env.time
		if ev.Action != "hibernate" {
			ev.Deadline = env.time.Add(spotNotice)
		}
	}
	ev.ID = event.ID(ev.Kind, id, ev.Action, firstNonEmpty(stamp(ev.Deadline), env.id))
	return []event.Event{ev}, nil
}

// rebalance: the ID is the notice time (the envelope time, which is also
// what IMDS events/recommendations/rebalance reports).
func rebalance(env *envelope, d *ec2Detail) ([]event.Event, error) {
	id, err := instanceID(d.InstanceID, "detail.instance-id")
	if err != nil {
		return nil, err
	}
	ev := env.newEvent(event.RebalanceRecommendation, id)
	ev.ID = event.ID(ev.Kind, id, firstNonEmpty(stamp(env.time), env.id))
	return []event.Event{ev}, nil
}

// stateChange: only terminal states are events; the instance is already on
// its way, so the deadline is the envelope time. The ID is the state and
// the envelope time (or id).
func stateChange(env *envelope, d *ec2Detail) ([]event.Event, string, error) {
	state := strings.ToLower(d.State.trimmed())
	if !slices.Contains(route.TerminalStates, state) {
		return nil, IgnoredStateNotTerminal, nil
	}
	id, err := instanceID(d.InstanceID, "detail.instance-id")
	if err != nil {
		return nil, "", err
	}
	ev := env.newEvent(event.StateChange, id)
	ev.Action = state
	ev.Deadline = env.time
	ev.ID = event.ID(ev.Kind, id, state, firstNonEmpty(stamp(env.time), env.id))
	return []event.Event{ev}, "", nil
}

// capacityInterruption: the deadline is detail.instance-termination-time,
// or the envelope time plus two minutes (the documented notice) without it.
func capacityInterruption(env *envelope, d *ec2Detail) ([]event.Event, error) {
	id, err := instanceID(d.InstanceID, "detail.instance-id")
	if err != nil {
		return nil, err
	}
	ev := env.newEvent(event.CapacityReservationInterruption, id)
	ev.Action = instanceAction(d.InstanceAction)
	ev.Deadline = parseTime(string(d.TerminationTime))
	if ev.Deadline.IsZero() && !env.time.IsZero() {
		ev.Deadline = env.time.Add(spotNotice)
	}
	ev.ID = event.ID(ev.Kind, id, ev.Action, firstNonEmpty(stamp(ev.Deadline), env.id))
	return []event.Event{ev}, nil
}

// health turns an EC2 scheduledChange into one event per affected instance
// (affectedEntities[].entityValue, then resources[]; other entities such as
// Capacity Reservations or dedicated hosts are skipped). The deadline is
// startTime. The ID is the eventArn and the instance, so the pages of a
// paginated event, and the backup copy of an event, combine per instance.
//
// A closed event, or an entity whose status is RESOLVED, means the change
// is over: it becomes ScheduledChangeCanceled, so that what lifeboat did
// for it can be undone, instead of a new drain.
func health(env *envelope, d *healthDetail, rawResources []byte) ([]event.Event, string) {
	if !strings.EqualFold(d.Service.trimmed(), "EC2") ||
		!strings.EqualFold(d.EventTypeCategory.trimmed(), "scheduledChange") {
		return nil, IgnoredHealthNotEC2ScheduledChange
	}
	var resources stringList
	if len(rawResources) > 0 {
		// The body is valid JSON, so only type mismatches can happen, and
		// decodeLenient ignores them.
		_ = decodeLenient(rawResources, &resources)
	}
	closed := strings.EqualFold(d.StatusCode.trimmed(), "closed")
	eventArn := d.EventArn.trimmed()
	code := d.EventTypeCode.trimmed()
	discriminators := []string{eventArn}
	if eventArn == "" {
		discriminators = []string{code, d.StartTime.trimmed()}
	}
	deadline := parseTime(string(d.StartTime))
	region := firstNonEmpty(d.EventRegion.trimmed(), env.region)
	account := firstNonEmpty(d.AffectedAccount.trimmed(), env.account)

	var evs []event.Event
	seen := make(map[string]bool, len(d.AffectedEntities)+len(resources))
	add := func(value string, resolved bool) {
		id := event.NormalizeInstanceID(value)
		if id == "" || seen[id] {
			return
		}
		seen[id] = true
		ev := env.newEvent(event.ScheduledChange, id)
		ev.Region, ev.Account = region, account
		ev.Action = code
		if closed || resolved {
			ev.Kind = event.ScheduledChangeCanceled
		} else {
			ev.Deadline = deadline
		}
		ev.ID = event.ID(ev.Kind, id, discriminators...)
		evs = append(evs, ev)
	}
	for _, e := range d.AffectedEntities {
		add(string(e.EntityValue), strings.EqualFold(e.Status.trimmed(), "RESOLVED"))
	}
	for _, r := range resources {
		add(r, false)
	}
	if len(evs) == 0 {
		return nil, IgnoredHealthNoInstances
	}
	return evs, ""
}
