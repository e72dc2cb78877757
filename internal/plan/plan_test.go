package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/window"
)

func TestFor(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	policy := Policy{
		DrainKinds:          []event.Kind{event.SpotInterruption, event.ScheduledChange, event.StateChange, event.LifecycleTerminate},
		ScheduledChangeLead: 10 * time.Minute,
		CompleteLifecycle:   true,
	}
	spot := event.Event{ID: "spot-1", Kind: event.SpotInterruption, InstanceID: "i-1234abcd", Deadline: now.Add(2 * time.Minute)}
	rebalance := event.Event{ID: "reb-1", Kind: event.RebalanceRecommendation, InstanceID: "i-1234abcd"}
	action := event.LifecycleAction{GroupName: "g", HookName: "h", Token: "tok-1", Transition: event.TransitionTerminating}
	terminate := event.Event{ID: "lt-1", Kind: event.LifecycleTerminate, InstanceID: "i-1234abcd", Lifecycle: &action}
	terminateDup := terminate
	terminateDup.ID = "lt-1-redelivered"
	// IMDS mode: the node's own actions, no token, one per terminate hook.
	self1 := event.LifecycleAction{GroupName: "g", HookName: "h1", Transition: event.TransitionTerminating}
	self2 := event.LifecycleAction{GroupName: "g", HookName: "h2", Transition: event.TransitionTerminating}
	selfTerm1 := event.Event{ID: "lt-s1", Kind: event.LifecycleTerminate, InstanceID: "i-1234abcd", Lifecycle: &self1}
	selfTerm2 := event.Event{ID: "lt-s2", Kind: event.LifecycleTerminate, InstanceID: "i-1234abcd", Lifecycle: &self2}
	selfTerm1Again := selfTerm1
	selfTerm1Again.ID = "lt-s1-again"
	noHook := event.Event{ID: "lt-nohook", Kind: event.LifecycleTerminate, InstanceID: "i-1234abcd", Lifecycle: &event.LifecycleAction{GroupName: "g"}}
	launch := event.Event{ID: "ll-1", Kind: event.LifecycleLaunch, InstanceID: "i-1234abcd", Lifecycle: &event.LifecycleAction{Token: "tok-2"}}
	soon := event.Event{ID: "sc-1", Kind: event.ScheduledChange, InstanceID: "i-1234abcd", Deadline: now.Add(5 * time.Minute)}
	later := event.Event{ID: "sc-2", Kind: event.ScheduledChange, InstanceID: "i-1234abcd", Deadline: now.Add(3 * time.Hour)}
	cancel := event.Event{ID: "cx-1", Kind: event.ScheduledChangeCanceled, InstanceID: "i-1234abcd"}
	// IMDS maintenance: the cancellation names the code and start of the change it ends.
	reboot := event.Event{ID: "sc-r", Kind: event.ScheduledChange, InstanceID: "i-1234abcd", Action: "system-reboot", Deadline: now.Add(5 * time.Minute)}
	rebootCanceled := event.Event{ID: "cx-r", Kind: event.ScheduledChangeCanceled, InstanceID: "i-1234abcd", Action: "system-reboot", Deadline: reboot.Deadline}
	oldRebootCompleted := event.Event{ID: "cx-old", Kind: event.ScheduledChangeCanceled, InstanceID: "i-1234abcd", Action: "system-reboot", Deadline: now.Add(-30 * 24 * time.Hour)}
	// Deadlines AWS enforces (issue 25 item 2), and a scheduled change
	// due before the Spot notice's end.
	stopping := event.Event{ID: "st-1", Kind: event.StateChange, InstanceID: "i-1234abcd", Action: "stopping", Deadline: now}
	hookEnd := event.Event{ID: "lt-d", Kind: event.LifecycleTerminate, InstanceID: "i-1234abcd", Lifecycle: &action, Deadline: now.Add(time.Hour)}
	reservation := event.Event{ID: "cr-1", Kind: event.CapacityReservationInterruption, InstanceID: "i-1234abcd", Deadline: now.Add(2 * time.Minute)}
	sooner := event.Event{ID: "sc-3", Kind: event.ScheduledChange, InstanceID: "i-1234abcd", Deadline: now.Add(time.Minute)}
	laterReboot := event.Event{ID: "sc-r2", Kind: event.ScheduledChange, InstanceID: "i-1234abcd", Action: "system-reboot", Deadline: now.Add(3 * time.Hour)}

	tests := []struct {
		name   string
		events []event.Event
		policy Policy
		want   Plan
	}{
		{"nothing", nil, policy, Plan{}},
		{"spot drains with its deadline", []event.Event{spot}, policy, Plan{
			Act: true, Cordon: true, Drain: true, TaintKeys: []string{"lifeboat.io/spot-interruption"},
			Deadline: spot.Deadline, Enforced: true, Reason: event.SpotInterruption, EventIDs: []string{"spot-1"},
		}},
		{"rebalance cordons only by default", []event.Event{rebalance}, policy, Plan{
			Act: true, Cordon: true, TaintKeys: []string{"lifeboat.io/rebalance-recommendation"},
			Reason: event.RebalanceRecommendation, EventIDs: []string{"reb-1"},
		}},
		{"rebalance drains when configured", []event.Event{rebalance}, Policy{DrainKinds: []event.Kind{event.RebalanceRecommendation}}, Plan{
			Act: true, Cordon: true, Drain: true, TaintKeys: []string{"lifeboat.io/rebalance-recommendation"},
			Reason: event.RebalanceRecommendation, EventIDs: []string{"reb-1"},
		}},
		{"rebalance then spot: one plan, spot decides", []event.Event{rebalance, spot}, policy, Plan{
			Act: true, Cordon: true, Drain: true,
			TaintKeys: []string{"lifeboat.io/rebalance-recommendation", "lifeboat.io/spot-interruption"},
			Deadline:  spot.Deadline, Enforced: true, Reason: event.SpotInterruption, EventIDs: []string{"reb-1", "spot-1"},
		}},
		{"terminate action heartbeated once however often delivered", []event.Event{terminate, terminateDup}, policy, Plan{
			Act: true, Cordon: true, Drain: true, TaintKeys: []string{"lifeboat.io/lifecycle-terminate"},
			Lifecycle: []event.LifecycleAction{action}, Reason: event.LifecycleTerminate, EventIDs: []string{"lt-1", "lt-1-redelivered"},
		}},
		{"lifecycle not completed when disabled", []event.Event{terminate}, Policy{DrainKinds: policy.DrainKinds}, Plan{
			Act: true, Cordon: true, Drain: true, TaintKeys: []string{"lifeboat.io/lifecycle-terminate"},
			Reason: event.LifecycleTerminate, EventIDs: []string{"lt-1"},
		}},
		{"token-less actions: one per hook, each once", []event.Event{selfTerm1, selfTerm2, selfTerm1Again}, policy, Plan{
			Act: true, Cordon: true, Drain: true, TaintKeys: []string{"lifeboat.io/lifecycle-terminate"},
			Lifecycle: []event.LifecycleAction{self1, self2}, Reason: event.LifecycleTerminate, EventIDs: []string{"lt-s1", "lt-s2", "lt-s1-again"},
		}},
		{"an action with neither token nor hook is not completed", []event.Event{noHook}, policy, Plan{
			Act: true, Cordon: true, Drain: true, TaintKeys: []string{"lifeboat.io/lifecycle-terminate"},
			Reason: event.LifecycleTerminate, EventIDs: []string{"lt-nohook"},
		}},
		{"launch is not a node plan", []event.Event{launch}, policy, Plan{}},
		{"scheduled change inside the lead acts", []event.Event{soon}, policy, Plan{
			Act: true, Cordon: true, Drain: true, TaintKeys: []string{"lifeboat.io/scheduled-change"},
			Deadline: soon.Deadline, Reason: event.ScheduledChange, EventIDs: []string{"sc-1"},
		}},
		{"scheduled change far ahead waits", []event.Event{later}, policy, Plan{NotBefore: later.Deadline.Add(-10 * time.Minute), Waiting: []string{later.ID}}},
		{"due events acted on, a change ahead left waiting", []event.Event{rebalance, later}, policy, Plan{
			Act: true, Cordon: true, TaintKeys: []string{"lifeboat.io/rebalance-recommendation"}, Reason: event.RebalanceRecommendation,
			EventIDs: []string{"reb-1"}, NotBefore: later.Deadline.Add(-10 * time.Minute), Waiting: []string{later.ID},
		}},
		{"cancel alone undoes", []event.Event{cancel}, policy, Plan{Act: true, Undo: true, Reason: event.ScheduledChangeCanceled, EventIDs: []string{"cx-1"}}},
		{"cancel does not undo a spot notice", []event.Event{cancel, spot}, policy, Plan{
			Act: true, Cordon: true, Drain: true, TaintKeys: []string{"lifeboat.io/spot-interruption"},
			Deadline: spot.Deadline, Enforced: true, Reason: event.SpotInterruption, EventIDs: []string{"cx-1", "spot-1"},
		}},
		{"canceled while due (drain in flight): undone", []event.Event{reboot, rebootCanceled}, policy, Plan{
			Act: true, Undo: true, Reason: event.ScheduledChangeCanceled, EventIDs: []string{"cx-r"},
		}},
		{"canceled before due: undone, nothing left to wait for", []event.Event{laterReboot, {ID: "cx-r2", Kind: event.ScheduledChangeCanceled, Action: "system-reboot", Deadline: laterReboot.Deadline}}, policy, Plan{
			Act: true, Undo: true, Reason: event.ScheduledChangeCanceled, EventIDs: []string{"cx-r2"},
		}},
		{"an old completed maintenance does not cancel a new one", []event.Event{oldRebootCompleted, reboot}, policy, Plan{
			Act: true, Cordon: true, Drain: true, TaintKeys: []string{"lifeboat.io/scheduled-change"},
			Deadline: reboot.Deadline, Reason: event.ScheduledChange, EventIDs: []string{"cx-old", "sc-r"},
		}},
		{"a cancellation without a start does not match (Health closed)", []event.Event{cancel, soon}, policy, Plan{
			Act: true, Cordon: true, Drain: true, TaintKeys: []string{"lifeboat.io/scheduled-change"},
			Deadline: soon.Deadline, Reason: event.ScheduledChange, EventIDs: []string{"cx-1", "sc-1"},
		}},
		{"earliest deadline wins", []event.Event{soon, spot}, policy, Plan{
			Act: true, Cordon: true, Drain: true, TaintKeys: []string{"lifeboat.io/scheduled-change", "lifeboat.io/spot-interruption"},
			Deadline: spot.Deadline, Enforced: true, Reason: event.SpotInterruption, EventIDs: []string{"sc-1", "spot-1"},
		}},
		{"a state change's deadline is enforced", []event.Event{stopping}, policy, Plan{
			Act: true, Cordon: true, Drain: true, TaintKeys: []string{"lifeboat.io/state-change"},
			Deadline: now, Enforced: true, Reason: event.StateChange, EventIDs: []string{"st-1"},
		}},
		{"a terminate hook's end is enforced", []event.Event{hookEnd}, policy, Plan{
			Act: true, Cordon: true, Drain: true, TaintKeys: []string{"lifeboat.io/lifecycle-terminate"}, Lifecycle: []event.LifecycleAction{action},
			Deadline: hookEnd.Deadline, Enforced: true, Reason: event.LifecycleTerminate, EventIDs: []string{"lt-d"},
		}},
		{"a capacity reservation's interruption is enforced", []event.Event{reservation}, policy, Plan{
			Act: true, Cordon: true, TaintKeys: []string{"lifeboat.io/capacity-reservation-interruption"},
			Deadline: reservation.Deadline, Enforced: true, Reason: event.CapacityReservationInterruption, EventIDs: []string{"cr-1"},
		}},
		{"a scheduled change's start is not, even before a Spot notice's end", []event.Event{sooner, spot}, policy, Plan{
			Act: true, Cordon: true, Drain: true, TaintKeys: []string{"lifeboat.io/scheduled-change", "lifeboat.io/spot-interruption"},
			Deadline: sooner.Deadline, Reason: event.SpotInterruption, EventIDs: []string{"sc-3", "spot-1"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := For(tt.events, tt.policy, now)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("For() (-want +got):\n%s", d)
			}
		})
	}
}

// Issue 23 item 2: a drain whose lifecycle actions are completed after it
// ends --deadline-margin before AWS's deadline; any other drain (a Spot
// notice: nothing follows it) runs to the deadline.
func TestDrainEnd(t *testing.T) {
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	action := []event.LifecycleAction{{GroupName: "g", HookName: "h", Token: "t"}}
	tests := []struct {
		name string
		p    Plan
		want time.Time
	}{
		{"no deadline", Plan{Lifecycle: action}, time.Time{}},
		{"no lifecycle action to complete", Plan{Deadline: at}, at},
		{"a lifecycle action to complete", Plan{Deadline: at, Lifecycle: action}, at.Add(-5 * time.Second)},
		{"the kubelet's window after the deadline", Plan{Deadline: at, KubeletWindow: 2 * time.Minute}, at.Add(2 * time.Minute)},
		{"the kubelet's window, then the margin", Plan{Deadline: at, KubeletWindow: 2 * time.Minute, Lifecycle: action}, at.Add(2*time.Minute - 5*time.Second)},
		{"a window without a deadline", Plan{KubeletWindow: 2 * time.Minute}, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.DrainEnd(5 * time.Second); !got.Equal(tt.want) {
				t.Errorf("DrainEnd = %v, want %v", got, tt.want)
			}
		})
	}
}

// With maintenance windows a scheduled change days ahead waits for the
// last window that opens before it (then drains, for the change's
// start), and when that window has passed unused, for the lead as before.
func TestForMaintenanceWindow(t *testing.T) {
	ws, err := window.Parse("Sat,Sun 02:00-06:00 UTC")
	if err != nil {
		t.Fatal(err)
	}
	policy := Policy{DrainKinds: []event.Kind{event.ScheduledChange}, ScheduledChangeLead: 10 * time.Minute, Windows: ws}
	saturday := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	change := event.Event{ID: "sc-1", Kind: event.ScheduledChange, InstanceID: "i-1234abcd", Action: "system-reboot",
		Deadline: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)} // Tuesday
	soon := event.Event{ID: "sc-2", Kind: event.ScheduledChange, InstanceID: "i-1234abcd", Deadline: saturday.Add(30 * time.Minute)}
	drain := Plan{Act: true, Cordon: true, Drain: true, TaintKeys: []string{"lifeboat.io/scheduled-change"},
		Deadline: change.Deadline, Reason: event.ScheduledChange, EventIDs: []string{"sc-1"}}
	for _, tc := range []struct {
		name   string
		events []event.Event
		now    time.Time
		want   Plan
	}{
		{"days ahead: waits for Sunday's window", []event.Event{change}, saturday,
			Plan{NotBefore: time.Date(2026, 11, 22, 2, 0, 0, 0, time.UTC), Waiting: []string{"sc-1"}}},
		{"inside the window: drains for the change", []event.Event{change}, time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC), drain},
		{"the window passed unused (lifeboat was down): the lead, as without windows", []event.Event{change}, time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC),
			Plan{NotBefore: change.Deadline.Add(-10 * time.Minute), Waiting: []string{"sc-1"}}},
		{"no window before a change this close: the lead", []event.Event{soon}, saturday,
			Plan{NotBefore: soon.Deadline.Add(-10 * time.Minute), Waiting: []string{"sc-2"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, For(tc.events, policy, tc.now)); d != "" {
				t.Errorf("plan (-want +got):\n%s", d)
			}
		})
	}
}

// Issue 25 item 5: with --plan-with-kubelet-shutdown a Spot drain works to
// the notice's end plus the window the kubelet's graceful node shutdown
// gives ordinary pods after it; nothing else moves.
func TestWithKubeletShutdown(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	policy := Policy{DrainKinds: []event.Kind{event.SpotInterruption, event.StateChange, event.LifecycleTerminate, event.CapacityReservationInterruption}, CompleteLifecycle: true}
	spot := event.Event{ID: "spot-1", Kind: event.SpotInterruption, InstanceID: "i-1", Deadline: now.Add(2 * time.Minute)}
	action := event.LifecycleAction{GroupName: "g", HookName: "h", Token: "tok", Transition: event.TransitionTerminating}
	hookEnd := event.Event{ID: "lt-1", Kind: event.LifecycleTerminate, InstanceID: "i-1", Lifecycle: &action, Deadline: now.Add(time.Hour)}
	hookSooner := event.Event{ID: "lt-2", Kind: event.LifecycleTerminate, InstanceID: "i-1", Lifecycle: &action, Deadline: now.Add(time.Minute)}
	stopping := event.Event{ID: "st-1", Kind: event.StateChange, InstanceID: "i-1", Action: "stopping", Deadline: now}
	reservation := event.Event{ID: "cr-1", Kind: event.CapacityReservationInterruption, InstanceID: "i-1", Deadline: now.Add(2 * time.Minute)}
	tests := []struct {
		name     string
		events   []event.Event
		ordinary time.Duration
		want     time.Duration // the plan's KubeletWindow
	}{
		{"spot: the window after the notice", []event.Event{spot}, 2 * time.Minute, 2 * time.Minute},
		{"spot, not configured", []event.Event{spot}, 0, 0},
		{"spot and a later hook end", []event.Event{spot, hookEnd}, 2 * time.Minute, 2 * time.Minute},
		{"spot and a sooner hook end", []event.Event{spot, hookSooner}, 2 * time.Minute, 0},
		{"spot and a state change (the shutdown began)", []event.Event{spot, stopping}, 2 * time.Minute, 0},
		{"spot and a reservation ending with it", []event.Event{spot, reservation}, 2 * time.Minute, 0},
		{"a reservation only", []event.Event{reservation}, 2 * time.Minute, 0},
		{"a hook end only", []event.Event{hookEnd}, 2 * time.Minute, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := For(tt.events, policy, now)
			got := WithKubeletShutdown(p, tt.events, tt.ordinary)
			if got.KubeletWindow != tt.want {
				t.Errorf("KubeletWindow = %v, want %v", got.KubeletWindow, tt.want)
			}
			if !got.Deadline.Equal(p.Deadline) {
				t.Errorf("Deadline moved: %v, want AWS's %v", got.Deadline, p.Deadline)
			}
			if want := p.Deadline.Add(tt.want); !got.PodDeadline().Equal(want) {
				t.Errorf("PodDeadline = %v, want %v", got.PodDeadline(), want)
			}
			got.KubeletWindow = 0
			if d := cmp.Diff(p, got); d != "" {
				t.Errorf("the rest of the plan changed (-want +got):\n%s", d)
			}
		})
	}
}
