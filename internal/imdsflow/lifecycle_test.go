package imdsflow

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"

	"lifeboat.dev/lifeboat/internal/event"
)

func TestWithActions(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	const id = "i-1234abcd"
	terminate := event.Event{ID: "lt-1", Kind: event.LifecycleTerminate, Source: event.SourceIMDS, InstanceID: id, Action: "Terminated"}
	spot := event.Event{ID: "spot-1", Kind: event.SpotInterruption, Source: event.SourceIMDS, InstanceID: id}
	drain := event.LifecycleAction{GroupName: "g", HookName: "drain", Transition: event.TransitionTerminating}
	backup := event.LifecycleAction{GroupName: "g", HookName: "backup", Transition: event.TransitionTerminating}
	with := func(e event.Event, a event.LifecycleAction, id string) event.Event {
		e.Lifecycle = &a
		e.ID = id
		return e
	}
	found := func(as ...event.LifecycleAction) LookupActions {
		return func(_ context.Context, instanceID string) ([]event.LifecycleAction, error) {
			if instanceID != id {
				return nil, errors.New("looked up " + instanceID)
			}
			return as, nil
		}
	}
	failing := func(context.Context, string) ([]event.LifecycleAction, error) { return nil, errors.New("AccessDenied") }
	tests := []struct {
		name   string
		lookup LookupActions
		evs    []event.Event
		want   []event.Event
	}{
		{"off: unchanged", nil, []event.Event{terminate}, []event.Event{terminate}},
		{"no termination: no lookup", failing, []event.Event{spot}, []event.Event{spot}},
		{"one hook: the event carries it", found(drain), []event.Event{spot, terminate}, []event.Event{spot, with(terminate, drain, "lt-1")}},
		{"two hooks: a copy per further hook, with a stable ID", found(drain, backup), []event.Event{terminate},
			[]event.Event{with(terminate, drain, "lt-1"), with(terminate, backup, event.ID(event.LifecycleTerminate, id, "lt-1", "g/backup"))}},
		{"no hook: drained without an action", found(), []event.Event{terminate}, []event.Event{terminate}},
		{"lookup failed: drained without an action", failing, []event.Event{terminate}, []event.Event{terminate}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := withActions(t.Context(), log, tt.lookup, tt.evs)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("withActions (-want +got):\n%s", diff)
			}
		})
	}
}
