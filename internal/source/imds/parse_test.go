package imds

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"lifeboat.dev/lifeboat/internal/event"
)

const testInstance = "i-0123456789abcdef0"

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func ev(kind event.Kind, action string, deadline, at time.Time, idParts ...string) event.Event {
	return event.Event{ID: event.ID(kind, testInstance, idParts...), Kind: kind, Source: event.SourceIMDS,
		InstanceID: testInstance, Action: action, Deadline: deadline, Time: at}
}

// TestParseFixtures parses every real payload in testdata/.
func TestParseFixtures(t *testing.T) {
	spot := func(action, deadline string) event.Event {
		return ev(event.SpotInterruption, action, ts(deadline), time.Time{}, action)
	}
	rebalance := func(notice string) event.Event {
		return ev(event.RebalanceRecommendation, "", time.Time{}, ts(notice))
	}
	terminated := ev(event.LifecycleTerminate, "Terminated", time.Time{}, time.Time{}, "Terminated")
	tests := []struct {
		file, path string
		want       []event.Event
	}{
		{"spot/aws-doc.instance-action-terminate.json", PathSpot, []event.Event{spot("terminate", "2017-09-18T08:22:00Z")}},
		{"spot/aws-doc.instance-action-stop.json", PathSpot, []event.Event{spot("stop", "2017-09-18T08:22:00Z")}},
		{"spot/amazon-ecs-agent-test.instance-action-hibernate.json", PathSpot, []event.Event{spot("hibernate", "2017-09-18T08:22:00Z")}},
		{"spot/runs-on-issue-277.instance-action-terminate.real-compact.json", PathSpot, []event.Event{spot("terminate", "2025-03-31T16:34:24Z")}},
		{"rebalance/aws-doc.rebalance-notice.json", PathRebalance, []event.Event{rebalance("2020-10-27T08:22:00Z")}},
		{"rebalance/aws-doc-categories-table.rebalance-notice.json", PathRebalance, []event.Event{rebalance("2020-11-05T08:22:00Z")}},
		{"maintenance/aws-doc.scheduled-system-reboot-active.json", PathScheduled, []event.Event{
			ev(event.ScheduledChange, "system-reboot", ts("2019-01-21T09:00:43Z"), time.Time{},
				"instance-event-0d59937288b749b32", "system-reboot", "2019-01-21T09:00:43Z"),
		}},
		{"maintenance/aws-doc.history-system-reboot-canceled-and-completed.json", PathHistory, []event.Event{
			ev(event.ScheduledChangeCanceled, "system-reboot", ts("2019-01-21T09:00:43Z"), time.Time{},
				"instance-event-0d59937288b749b32", "system-reboot", "2019-01-21T09:00:43Z", "canceled"),
			ev(event.ScheduledChangeCanceled, "system-reboot", ts("2019-01-29T09:00:43Z"), time.Time{},
				"instance-event-0d59937288b749b32", "system-reboot", "2019-01-29T09:00:43Z", "completed"),
		}},
		// The mock lists canceled events under scheduled; so may AWS while it moves them.
		{"maintenance/aemm.scheduled-system-reboot-canceled.json", PathScheduled, []event.Event{
			ev(event.ScheduledChangeCanceled, "system-reboot", ts("2026-11-22T00:11:37Z"), time.Time{},
				"instance-event-1234567890abcdef0", "system-reboot", "2026-11-22T00:11:37Z", "canceled"),
		}},
		{"maintenance/aemm.scheduled-instance-stop-active.json", PathScheduled, []event.Event{
			ev(event.ScheduledChange, "instance-stop", ts("2026-11-22T00:11:37Z"), time.Time{},
				"instance-event-1234567890abcdef0", "instance-stop", "2026-11-22T00:11:37Z"),
		}},
		// An active entry in the history is not a change to act on.
		{"maintenance/aws-doc.scheduled-system-reboot-active.json", PathHistory, nil},
		{"target-lifecycle-state/documented-value.Terminated.txt", PathTargetState, []event.Event{terminated}},
		{"target-lifecycle-state/aws-doc.example-InService.txt", PathTargetState, nil},
		{"target-lifecycle-state/documented-value.InService.txt", PathTargetState, nil},
		{"target-lifecycle-state/documented-value.Detached.txt", PathTargetState, nil},
		{"target-lifecycle-state/documented-value.Standby.txt", PathTargetState, nil},
		{"target-lifecycle-state/documented-value.Warmed_Hibernated.txt", PathTargetState, nil},
		{"target-lifecycle-state/documented-value.Warmed_Running.txt", PathTargetState, nil},
		{"target-lifecycle-state/documented-value.Warmed_Stopped.txt", PathTargetState, nil},
		{"target-lifecycle-state/documented-value.Warmed_Terminated.txt", PathTargetState, nil},
	}
	// Every fixture file is covered, except the legacy termination-time,
	// which lifeboat does not read (instance-action says more).
	covered := map[string]bool{"spot/aws-doc.termination-time.txt": true, "README.md": true}
	for _, tt := range tests {
		covered[tt.file] = true
		t.Run(tt.path+"/"+filepath.Base(tt.file), func(t *testing.T) {
			got, err := Parse(tt.path, testInstance, fixture(t, tt.file))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("Parse (-want +got):\n%s", d)
			}
		})
	}
	err := filepath.WalkDir("testdata", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(p, "testdata/fuzz") {
			return err
		}
		if rel, _ := filepath.Rel("testdata", p); !covered[rel] {
			t.Errorf("fixture %s has no test row", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestParseStableIDs: what changes from one read to the next (a Spot time
// or a rebalance notice time the metadata recomputes) does not change the
// ID; what identifies a signal does.
func TestParseStableIDs(t *testing.T) {
	id := func(path, body string) string {
		t.Helper()
		evs, err := Parse(path, testInstance, []byte(body))
		if err != nil || len(evs) != 1 {
			t.Fatalf("Parse(%s, %s) = %v, %v", path, body, evs, err)
		}
		return evs[0].ID
	}
	tests := []struct {
		name   string
		path   string
		a, b   string
		sameID bool
	}{
		{"spot time moves", PathSpot, `{"action":"terminate","time":"2030-01-01T00:02:00Z"}`, `{"action": "terminate", "time": "2030-01-01T00:02:01Z"}`, true},
		{"spot action differs", PathSpot, `{"action":"stop","time":"2030-01-01T00:02:00Z"}`, `{"action":"terminate","time":"2030-01-01T00:02:00Z"}`, false},
		{"rebalance notice time moves", PathRebalance, `{"noticeTime":"2030-01-01T00:00:00Z"}`, `{"noticeTime":"2030-01-01T00:00:07Z"}`, true},
		{"maintenance reformatted", PathScheduled,
			`[{"NotBefore":"1 Jan 2030 00:00:00 GMT","Code":"system-reboot","EventId":"instance-event-1","State":"active"}]`,
			`[ {"State" : "active", "EventId" : "instance-event-1", "Code" : "system-reboot", "NotBefore" : "01 Jan 2030 00:00:00 GMT", "Description": "x"} ]`, true},
		{"maintenance rescheduled", PathScheduled,
			`[{"NotBefore":"1 Jan 2030 00:00:00 GMT","Code":"system-reboot","EventId":"instance-event-1","State":"active"}]`,
			`[{"NotBefore":"2 Jan 2030 00:00:00 GMT","Code":"system-reboot","EventId":"instance-event-1","State":"active"}]`, false},
		{"canceled vs completed", PathHistory,
			`[{"NotBefore":"1 Jan 2030 00:00:00 GMT","Code":"system-reboot","EventId":"instance-event-1","State":"canceled"}]`,
			`[{"NotBefore":"1 Jan 2030 00:00:00 GMT","Code":"system-reboot","EventId":"instance-event-1","State":"completed"}]`, false},
		{"target state with newline", PathTargetState, "Terminated", "Terminated\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := id(tt.path, tt.a) == id(tt.path, tt.b); got != tt.sameID {
				t.Errorf("same ID = %v, want %v", got, tt.sameID)
			}
		})
	}
}

func TestParseEdgeCases(t *testing.T) {
	tests := []struct {
		name    string
		path    string
		body    string
		want    []event.Event
		wantErr error
	}{
		{"spot garbage", PathSpot, `<html>`, nil, ErrMalformed},
		{"spot without action", PathSpot, `{"time":"2030-01-01T00:00:00Z"}`, nil, ErrMalformed},
		{"spot trailing data", PathSpot, `{"action":"stop"} {}`, nil, ErrMalformed},
		{"spot unknown action still interrupts, bad time means no deadline", PathSpot, `{"action":"Reboot","time":"soon"}`,
			[]event.Event{ev(event.SpotInterruption, "reboot", time.Time{}, time.Time{}, "reboot")}, nil},
		{"rebalance not an object", PathRebalance, `[]`, nil, ErrMalformed},
		{"maintenance not a list", PathScheduled, `{"Code":"system-reboot"}`, nil, ErrMalformed},
		{"maintenance empty list", PathScheduled, `[]`, nil, nil},
		{"maintenance null", PathScheduled, `null`, nil, nil},
		{"maintenance unknown state ignored", PathScheduled, `[{"EventId":"e","Code":"system-reboot","State":"pending"}]`, nil, nil},
		{"maintenance empty object ignored", PathScheduled, `[{}]`, nil, nil},
		{"maintenance duplicates once, bad time acts at once", PathScheduled,
			`[{"EventId":"e","Code":"instance-retirement","State":"active","NotBefore":"tomorrow"},{"EventId":"e","Code":"instance-retirement","State":"active","NotBefore":"tomorrow"}]`,
			[]event.Event{ev(event.ScheduledChange, "instance-retirement", time.Time{}, time.Time{}, "e", "instance-retirement", "tomorrow")}, nil},
		{"maintenance weekday tolerated", PathScheduled, `[{"EventId":"e","Code":"system-reboot","State":"active","NotBefore":"Tue, 1 Jan 2030 00:00:00 GMT"}]`,
			[]event.Event{ev(event.ScheduledChange, "system-reboot", ts("2030-01-01T00:00:00Z"), time.Time{}, "e", "system-reboot", "2030-01-01T00:00:00Z")}, nil},
		{"target state lower case is not Terminated", PathTargetState, `terminated`, nil, nil},
		{"target state Warmed:Terminated is not Terminated", PathTargetState, `Warmed:Terminated`, nil, nil},
		{"unknown path", "spot/termination-time", `2015-01-05T18:02:00Z`, nil, ErrUnknownPath},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.path, testInstance, []byte(tt.body))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Parse error = %v, want %v", err, tt.wantErr)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("Parse (-want +got):\n%s", d)
			}
		})
	}
}
