package imdsflow

import (
	"context"
	"log/slog"
	"time"

	"lifeboat.dev/lifeboat/internal/event"
)

// LookupActions finds the terminate lifecycle actions of an instance
// (asg.Client.TerminateActions in the full build).
type LookupActions func(ctx context.Context, instanceID string) ([]event.LifecycleAction, error)

// lookupTimeout bounds the lookup of the node's terminate hooks (the Auto
// Scaling client retries inside it). The drain waits for it, so it must
// stay short against the hook's heartbeat timeout (30 s at the least; the
// first heartbeat follows at once).
const lookupTimeout = 20 * time.Second

// withActions gives the terminate events of evs the node's own terminate
// lifecycle actions, so that the controller heartbeats them while it drains
// and completes them after (--imds-complete-lifecycle). When the lookup
// fails the node is drained all the same: the action then ends at its
// timeout with the hook's default result, as without the option.
func withActions(ctx context.Context, log *slog.Logger, lookup LookupActions, evs []event.Event) []event.Event {
	i := indexTerminate(evs)
	if lookup == nil || i < 0 {
		return evs
	}
	lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	actions, err := lookup(lctx, evs[i].InstanceID)
	switch {
	case err != nil:
		log.Warn("finding the instance's terminate lifecycle hooks failed: draining without completing its lifecycle action (it ends at the hook's timeout with its default result)",
			"instanceID", evs[i].InstanceID, "error", err.Error())
		return evs
	case len(actions) == 0:
		log.Info("the instance is in no Auto Scaling group with a terminate lifecycle hook: nothing to complete", "instanceID", evs[i].InstanceID)
		return evs
	}
	return attachActions(evs, i, actions)
}

// indexTerminate returns the index of the terminate event without an
// action in evs, or -1.
func indexTerminate(evs []event.Event) int {
	for i, e := range evs {
		if e.Kind == event.LifecycleTerminate && e.Lifecycle == nil {
			return i
		}
	}
	return -1
}

// attachActions returns evs with the terminate event evs[i] carrying
// actions[0] and, for a group with several terminate hooks, one copy of it
// per further hook. A copy's ID derives from the event's and the hook's, so
// it is the same after a restart (the node's record of done events).
func attachActions(evs []event.Event, i int, actions []event.LifecycleAction) []event.Event {
	out := make([]event.Event, 0, len(evs)+len(actions)-1)
	out = append(out, evs...)
	base := evs[i]
	for k, a := range actions {
		e := base
		e.Lifecycle = &a
		if k == 0 {
			out[i] = e
			continue
		}
		e.ID = event.ID(base.Kind, base.InstanceID, base.ID, a.Key())
		out = append(out, e)
	}
	return out
}
