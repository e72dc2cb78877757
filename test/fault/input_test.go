package fault

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/test/testenv"
)

// TestBadInput sends malformed, hostile and irrelevant messages to the
// queue, next to a valid but very large one: lifeboat stays up, deletes
// and counts each rejected message by reason
// (lifeboat_messages_rejected_total{reason}), counts the ignored ones, acts
// only on the valid message, and leaves the message about another cluster's
// instance in the queue for its owner.
func TestBadInput(t *testing.T) {
	w := newWorld(t, worldOptions{})
	ids := w.CreateGroup("input-"+testenv.UniqueName("g"), 2)
	node, other := w.NodeName(ids[0]), w.NodeName(ids[1])
	spot := func(detail string) string {
		return `{"version":"0","id":"` + testenv.UniqueName("e") + `","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"123456789012","time":"` +
			time.Now().UTC().Format(time.RFC3339) + `","region":"us-east-1","resources":[],"detail":` + detail + `}`
	}
	rejected := []struct {
		name, body, reason string
	}{
		{"not JSON", `{not json`, "invalid-json"},
		{"a JSON array", `[1,2,3]`, "invalid-json"},
		{"nested 20,000 deep", strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000), "invalid-json"},
		{"nested arrays in the detail", spot(strings.Repeat("[", 15000) + strings.Repeat("]", 15000)), "invalid-json"},
		{"detail of the wrong type", spot(`"i-0123456789abcdef0"`), "missing-instance-id"},
		{"instance ID of the wrong type", spot(`{"instance-id":{"id":"i-0123456789abcdef0"}}`), "invalid-instance-id"},
		{"instance ID with a shell injection", spot(`{"instance-id":"i-0123456789abcdef0; rm -rf /"}`), "invalid-instance-id"},
		{"instance ID with a path", spot(`{"instance-id":"../../i-0123456789abcdef0"}`), "invalid-instance-id"},
		{"instance ID with a template", spot(`{"instance-id":"{{.Env}}"}`), "invalid-instance-id"},
		{"node name as instance ID", spot(`{"instance-id":"` + other + `"}`), "invalid-instance-id"},
	}
	want := map[string]float64{}
	for _, r := range rejected {
		w.send(r.body)
		want[r.reason]++
	}
	// Irrelevant: an unknown detail-type (the F3 typo) and an unknown format.
	w.send(`{"version":"0","id":"x","detail-type":"EC2 Spot Instance Interruption Warnings","source":"aws.ec2","detail":{"instance-id":"` + ids[1] + `"}}`)
	w.send(`{"hello":"world"}`)
	// Another cluster's instance: left for its owner.
	w.send(spot(`{"instance-id":"` + testenv.RandomInstanceID() + `","instance-action":"terminate"}`))
	// Valid and large: 200 KiB of padding around a real notice.
	w.send(spot(fmt.Sprintf(`{"instance-id":%q,"instance-action":"terminate","padding":%q}`, ids[0], strings.Repeat("x", 200<<10))))

	w.Eventually(30*time.Second, "the large valid message to drain its node", func() bool {
		n, ok := w.LookupNode(node)
		return ok && n.Annotations["lifeboat.io/drained"] != ""
	})
	w.Eventually(30*time.Second, "every rejected message counted", func() bool {
		for reason, n := range want {
			if w.Metric("lifeboat_messages_rejected_total", map[string]string{"reason": reason}) != n {
				return false
			}
		}
		return true
	})
	for reason, n := range want {
		t.Logf("rejected %v messages as %s", n, reason)
	}
	if got := w.Metric("lifeboat_messages_ignored_total", map[string]string{"reason": "unhandled-detail-type"}); got < 1 {
		t.Errorf("the misspelt detail-type was not counted as ignored (%v)", got)
	}
	if got := w.Metric("lifeboat_messages_ignored_total", map[string]string{"reason": "unknown-format"}); got < 1 {
		t.Errorf("the unknown format was not counted as ignored (%v)", got)
	}
	w.Eventually(30*time.Second, "only the other cluster's message left", func() bool {
		v, f := w.QueueCounts()
		return v+f == 1 && w.Metric("lifeboat_unknown_instance_events_total", nil) >= 1
	})
	if n, ok := w.LookupNode(other); !ok || len(lifeboatMarks(n)) > 0 {
		t.Errorf("node %s named only by rejected messages: present=%v marks=%v", other, ok, lifeboatMarks(n))
	}
	if exited, err := w.lb.Exited(); exited {
		t.Fatalf("lifeboat exited: %v", err)
	}
}
