package message

import (
	"encoding/json"
	"strings"
	"testing"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/route"
)

// withoutSample are the ignored detail-types AWS documents but publishes no
// sample of; every other entry of the route table needs a real payload.
var withoutSample = map[string]string{
	"AWS Health Abuse Event": "named in the AWS Health event schema; AWS publishes no sample",
}

// eventBridgeFixtures returns the real EventBridge payloads of testdata/
// (the copies of the shared fixtures' eventbridge/) by detail-type.
func eventBridgeFixtures(t *testing.T) map[string][]fixture {
	t.Helper()
	by := map[string][]fixture{}
	for _, f := range loadFixtures(t) {
		if !strings.HasPrefix(f.name, "eventbridge/") {
			continue
		}
		var env struct {
			Source     string `json:"source"`
			DetailType string `json:"detail-type"`
		}
		if err := json.Unmarshal(f.body, &env); err != nil || env.DetailType == "" {
			continue // Capacity Block events use non-standard keys; TestFixtures covers them
		}
		by[env.Source+"\x00"+env.DetailType] = append(by[env.Source+"\x00"+env.DetailType], f)
	}
	return by
}

// Every route of the table has a real AWS payload, and parsing the real
// payloads of a route gives events of the route's kind: a detail-type
// misspelt in the table (seed failure F3) fails here.
func TestEveryRouteParses(t *testing.T) {
	fixtures := eventBridgeFixtures(t)
	for _, r := range route.Routes {
		t.Run(r.DetailType, func(t *testing.T) {
			fs := fixtures[r.Source+"\x00"+r.DetailType]
			if len(fs) == 0 {
				t.Fatalf("no real payload with source %q and detail-type %q in testdata/eventbridge", r.Source, r.DetailType)
			}
			acted, placeholders := 0, 0
			for _, f := range fs {
				res, err := Parse(f.body)
				if res.Ignored == IgnoredUnhandledDetailType {
					t.Errorf("%s: ignored as an unhandled detail-type", f.name)
				}
				if reason := Reason(err); reason == MalformedInvalidInstanceID || reason == MalformedMissingInstanceID {
					placeholders++ // AWS's page prints a placeholder instead of an instance ID
					continue
				} else if err != nil {
					t.Errorf("%s: %v", f.name, err)
					continue
				}
				for _, e := range res.Events {
					if e.Kind != r.Kind && (r.Kind != event.ScheduledChange || e.Kind != event.ScheduledChangeCanceled) {
						t.Errorf("%s: event of kind %s, want %s", f.name, e.Kind, r.Kind)
					}
				}
				if len(res.Events) > 0 {
					acted++
				}
			}
			// The only sample of the HTML spelling of the Capacity Reservation
			// warning holds placeholders; TestCapacityReservationAltDetailType
			// parses it with a real instance ID.
			if acted == 0 && placeholders < len(fs) {
				t.Errorf("no real payload of %q becomes a %s event", r.DetailType, r.Kind)
			}
		})
	}
}

// The real events lifeboat knows and ignores are ignored, each has a real
// payload (or is named in withoutSample), and every real EventBridge
// payload is in the table.
func TestIgnoredRoutes(t *testing.T) {
	fixtures := eventBridgeFixtures(t)
	for _, r := range route.Ignored {
		fs := fixtures[r.Source+"\x00"+r.DetailType]
		if len(fs) == 0 && withoutSample[r.DetailType] == "" {
			t.Errorf("ignored %q: no real payload in testdata/eventbridge", r.DetailType)
		}
		for _, f := range fs {
			if res, err := Parse(f.body); err != nil || res.Ignored != IgnoredUnhandledDetailType {
				t.Errorf("%s: Parse = %+v, %v; want ignored as %s", f.name, res, err, IgnoredUnhandledDetailType)
			}
		}
	}
	for key, fs := range fixtures {
		source, dt, _ := strings.Cut(key, "\x00")
		r, acted := route.Lookup(dt)
		if (!acted || r.Source != source) && !route.IsIgnored(dt) {
			t.Errorf("%s: source %q, detail-type %q is not in the route table", fs[0].name, source, dt)
		}
	}
}
