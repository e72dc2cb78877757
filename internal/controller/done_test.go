package controller

import (
	"encoding/json"
	"testing"

	"lifeboat.dev/lifeboat/internal/event"
)

func TestDoneEventsBounded(t *testing.T) {
	var evs []event.Event
	for i := range 2 * maxDoneEvents {
		evs = append(evs, event.Event{ID: "spot-interruption-" + string(rune('a'+i%26)) + string(rune('a'+i/26))})
	}
	var ids []string
	if err := json.Unmarshal([]byte(doneList(nil, evs)), &ids); err != nil {
		t.Fatal(err)
	}
	if len(ids) != maxDoneEvents || ids[len(ids)-1] != evs[len(evs)-1].ID {
		t.Errorf("done events = %d ending %q, want the last %d ending %q", len(ids), ids[len(ids)-1], maxDoneEvents, evs[len(evs)-1].ID)
	}
}
