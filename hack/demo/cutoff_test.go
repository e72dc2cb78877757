package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// Issue 23: when lifeboat reports pods cut off (a DeadlinePassed, NodeGone
// or Drained log line with cutOff), the timeline shows each on its own
// row, by name, with why.
func TestTimelineShowsCutOffPodsByName(t *testing.T) {
	tl := newTimeline(io.Discard, false, time.Now())
	tl.begin(sceneSpot, "spot", []string{nsShop + "/checkout-b"})
	tl.mapNamespace(nsShop, sceneSpot)
	d := &demo{tl: tl}
	line := `{"time":"` + time.Now().Format(time.RFC3339Nano) + `","level":"WARN","msg":"DeadlinePassed","node":"ip-10-0-0-1","detail":"AWS's deadline passed with 1 pods still on the node, cut off: …",` +
		`"cutOff":["shop/checkout-b: not-started (eviction refused (429): Cannot evict pod as it would violate the pod's disruption budget.)"]}`
	d.logLine([]byte(line), map[string]bool{})
	var found bool
	for _, f := range tl.snapshot() {
		if f.Step != stepPodCutOff {
			continue
		}
		found = true
		if f.Lane != "pod checkout-b" || f.Scene != sceneSpot || f.Label != "cut off: not-started" ||
			!strings.Contains(f.Text, "checkout-b cut off (DeadlinePassed): not-started (eviction refused (429)") {
			t.Errorf("cut-off fact %+v; want it on checkout-b's row, naming it and why", f)
		}
	}
	if !found {
		t.Errorf("no %s fact in %+v", stepPodCutOff, tl.snapshot())
	}
}
