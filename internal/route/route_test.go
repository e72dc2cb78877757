package route

import (
	"encoding/json"
	"testing"

	"lifeboat.dev/lifeboat/internal/event"
)

// The table is consistent: a detail-type routes to one kind, is never both
// acted on and ignored, every kind a queue delivers has a route, and every
// rule pattern is JSON naming the kind's routes. (internal/message's
// TestEveryRouteParses parses a real AWS payload of every route.)
func TestTable(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range append(append([]Route{}, Routes...), Ignored...) {
		if seen[r.DetailType] {
			t.Errorf("%q is in the table twice", r.DetailType)
		}
		seen[r.DetailType] = true
		if r.Source != SourceEC2 && r.Source != SourceHealth && r.Source != SourceAutoScaling {
			t.Errorf("%q: unknown source %q", r.DetailType, r.Source)
		}
	}
	for _, r := range Routes {
		if got, ok := Lookup(r.DetailType); !ok || got != r {
			t.Errorf("Lookup(%q) = %v, %v", r.DetailType, got, ok)
		}
		if IsIgnored(r.DetailType) {
			t.Errorf("%q is both acted on and ignored", r.DetailType)
		}
	}
	for _, k := range event.Kinds {
		p := Pattern(k)
		if k == event.ScheduledChangeCanceled {
			if p != "" {
				t.Errorf("Pattern(%s) = %s, want none (a closed Health event is a %s route)", k, p, event.ScheduledChange)
			}
			continue
		}
		var parsed struct {
			Source     []string `json:"source"`
			DetailType []string `json:"detail-type"`
		}
		if err := json.Unmarshal([]byte(p), &parsed); err != nil {
			t.Errorf("Pattern(%s) = %q: %v", k, p, err)
			continue
		}
		if len(parsed.DetailType) != len(Of(k)) || len(parsed.Source) != 1 {
			t.Errorf("Pattern(%s) = %s: want the %d detail-types of its routes and one source", k, p, len(Of(k)))
		}
	}
	if want := `{"source":["aws.ec2"],"detail-type":["EC2 Instance State-change Notification"],"detail":{"state":["stopping","stopped","shutting-down","terminated"]}}`; Pattern(event.StateChange) != want {
		t.Errorf("Pattern(state-change) = %s, want %s", Pattern(event.StateChange), want)
	}
}
