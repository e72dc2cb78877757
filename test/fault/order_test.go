package fault

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/route"
	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

// webhookSink records the bodies lifeboat posts to its webhook.
type webhookSink struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newWebhookSink(t *testing.T) *webhookSink {
	s := &webhookSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, string(b))
		s.mu.Unlock()
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// count returns the notifications that mention all of substrs.
func (s *webhookSink) count(substrs ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, b := range s.bodies {
		ok := true
		for _, sub := range substrs {
			ok = ok && strings.Contains(b, sub)
		}
		if ok {
			n++
		}
	}
	return n
}

// TestDuplicatesAndOrder: the same message delivered five times, a
// terminate lifecycle action followed by a Spot notice for the same
// instance, an AWS Health event's page 2 before its page 1, and a lifecycle
// action whose instance is no longer a node. Each node is drained once and
// notified once per phase; every action ends as it should.
func TestDuplicatesAndOrder(t *testing.T) {
	hook := newWebhookSink(t)
	w := newWorld(t, worldOptions{flags: []string{"--unknown-instance", "delete", "--webhook-url", hook.srv.URL, "--webhook-template", "json"}})
	group := "order-" + testenv.UniqueName("g")
	ids := w.CreateGroup(group, 8)
	w.PutHook(group, "drain", terminating, 20, "ABANDON")
	ns := kube.Namespace(t)
	for _, id := range ids {
		if _, err := kube.CreatePod(w.ctx, testenv.PodSpec{Namespace: ns, Node: w.NodeName(id), ShutdownAfter: 2 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	dup, both, gone := ids[0], ids[1], ids[2]
	health := ids[3:7]
	bystander := ids[7]

	// 1. One Spot notice, delivered five times at once.
	body := fmt.Sprintf(`{"version":"0","id":"dup-%s","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"123456789012","time":%q,"region":"us-east-1","resources":[],"detail":{"instance-id":%q,"instance-action":"terminate"}}`,
		dup, time.Now().UTC().Format(time.RFC3339), dup)
	for range 5 {
		w.send(body)
	}
	// 2. Scale-in of an instance, then a Spot notice for it.
	w.terminate(both)
	w.Eventually(20*time.Second, "the scale-in's drain to start", func() bool {
		n, _ := w.LookupNode(w.NodeName(both))
		return n != nil && n.Spec.Unschedulable
	})
	w.spot(both, time.Now())
	// 3. An AWS Health event in two pages, page 2 first.
	arn := "arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/" + testenv.UniqueName("e")
	start := time.Now().Add(3 * time.Minute).UTC().Format(time.RFC1123)
	for _, page := range []int{2, 1} {
		var entities []map[string]string
		for _, id := range health[2*(page-1) : 2*page] {
			entities = append(entities, map[string]string{"entityValue": id, "status": "PENDING"})
		}
		w.PutEvent(route.SourceHealth, route.Health, time.Now(), map[string]any{
			"eventArn": arn, "service": "EC2", "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
			"eventTypeCategory": "scheduledChange", "startTime": start, "statusCode": "upcoming",
			"page": fmt.Sprint(page), "totalPages": "2", "affectedEntities": entities,
		})
	}
	// 4. A lifecycle action for an instance whose node is already gone.
	goneNode := w.NodeName(gone)
	if err := kube.DeleteNode(w.ctx, goneNode); err != nil {
		t.Fatal(err)
	}
	w.terminate(gone)

	drainedOnce := append([]string{dup, both}, health...)
	for _, id := range drainedOnce {
		name := w.NodeName(id)
		w.Eventually(90*time.Second, "node "+name+" drained", func() bool {
			if id == both {
				a, ok := w.ActionFor(both, terminating)
				return ok && !a.Active()
			}
			n, ok := w.LookupNode(name)
			return ok && n.Annotations["lifeboat.io/drained"] != ""
		})
	}
	w.Eventually(60*time.Second, "the queue to be empty", w.QueueEmpty)
	w.Eventually(30*time.Second, "the finished notifications", func() bool {
		for _, id := range drainedOnce {
			if hook.count(w.NodeName(id), `"finished"`) == 0 {
				return false
			}
		}
		return true
	})
	for _, id := range drainedOnce {
		name := w.NodeName(id)
		if id != both { // the scaled-in node is deleted with its Events' object
			for _, reason := range []string{"Cordoned", "Drained", "InterruptionReceived"} {
				if got := w.NodeEvents(name, reason); got != 1 {
					t.Errorf("node %s (%s): %d %s events, want 1", name, id, got, reason)
				}
			}
		}
		for _, phase := range []string{`"received"`, `"finished"`} {
			if got := hook.count(name, phase); got != 1 {
				t.Errorf("node %s (%s): %d %s notifications, want 1", name, id, got, phase)
			}
		}
	}
	a, _ := w.ActionFor(both, terminating)
	if a.CompletedBy != awssim.CompletedByAPI || a.Result != "CONTINUE" || a.Completions != 1 {
		t.Errorf("scale-in then Spot: action ended by %s with %q after %d completions; want one by the API", a.CompletedBy, a.Result, a.Completions)
	}
	if n := lifeboatDrains(w, w.NodeName(both)); n != 1 {
		t.Errorf("scale-in then Spot: %d drains reported, want 1", n)
	}
	// The action of the instance that is no longer a node: its message is
	// deleted (--unknown-instance=delete) and no node is touched.
	if got := w.Metric("lifeboat_unknown_instance_events_total", nil); got < 1 {
		t.Errorf("the lifecycle action of a gone instance was not counted as unknown (%v)", got)
	}
	if n, ok := w.LookupNode(w.NodeName(bystander)); !ok || len(lifeboatMarks(n)) > 0 {
		t.Errorf("bystander node: present=%v marks=%v", ok, lifeboatMarks(n))
	}
	raw, _ := json.Marshal(hook.bodies)
	t.Logf("%d notifications; figures: 5 copies -> 1 drain; scale-in+Spot -> action %s/%s; health pages 2,1 -> %d nodes drained once (%d bytes of webhook bodies)",
		len(hook.bodies), a.CompletedBy, a.Result, len(health), len(raw))
}

// lifeboatDrains counts the Drained reports lifeboat logged for a node.
func lifeboatDrains(w *world, node string) int {
	return w.lb.CountLogs(`"msg":"Drained"`, `"node":"`+node+`"`)
}
