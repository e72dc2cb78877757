package e2e

// NTH's end-to-end scenarios (aws-node-termination-handler's test/e2e, see
// docs/testing.md) in queue mode, configured the way an NTH user would:
// with NTH's environment variables. Each test names the NTH scenario it
// ports. The IMDS-mode ones are in test/imds.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/route"
	"lifeboat.dev/lifeboat/test/testenv"
)

// nthQueueEnv is what an NTH user has set for queue mode (queue processor).
// The harness's flags name the testbed's queue and endpoints, and win.
var nthQueueEnv = []string{"ENABLE_SQS_TERMINATION_DRAINING=true"}

// nthNode is a kwok node with one pod (stops 0.5 s after its eviction).
func nthNode(t *testing.T, h *harness) (node, id, ns, pod string) {
	t.Helper()
	id = testenv.RandomInstanceID()
	n := kube.Node(t, testenv.NodeSpec{InstanceID: id})
	ns = kube.Namespace(t)
	p, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: n.Name, ShutdownAfter: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return n.Name, id, ns, p.Name
}

// NTH ec2-state-change-sqs-test: an EC2 state change to stopping, stopped,
// shutting-down or terminated cordons and drains the node, and the message
// is deleted. The instance is already going: its deadline is the event's
// time, so the drain ends with DeadlinePassed (pods evicted, one still
// shutting down at that moment) or Drained.
func TestNTHEC2StateChange(t *testing.T) {
	for _, state := range route.TerminalStates {
		t.Run(state, func(t *testing.T) {
			h := newHarness(t, harnessOptions{env: nthQueueEnv})
			node, id, ns, pod := nthNode(t, h)
			h.PutEvent(route.SourceEC2, route.StateChange, time.Now(), map[string]string{"instance-id": id, "state": state})
			h.Eventually(15*time.Second, "the node cordoned, tainted and its pod evicted", func() bool {
				n := h.Node(node)
				return n.Spec.Unschedulable && testenv.HasTaint(n, "lifeboat.io/state-change") && !h.podExists(ns, pod)
			})
			h.Eventually(10*time.Second, "the drain's end reported", func() bool {
				return h.NodeEvents(node, "Drained")+h.NodeEvents(node, "DeadlinePassed") >= 1
			})
			h.Eventually(10*time.Second, "the message deleted", h.QueueEmpty)
		})
	}
}

// NTH cordon-only-test (CORDON_ONLY=true): a Spot interruption cordons and
// taints the node, evicts nothing, and the message is deleted.
func TestNTHCordonOnly(t *testing.T) {
	h := newHarness(t, harnessOptions{env: append([]string{"CORDON_ONLY=true"}, nthQueueEnv...)})
	node, id, ns, pod := nthNode(t, h)
	h.PutEvent(route.SourceEC2, route.SpotInterruption, time.Now(), map[string]string{"instance-id": id, "instance-action": "terminate"})
	h.Eventually(15*time.Second, "the node cordoned and tainted", func() bool {
		n := h.Node(node)
		return n.Spec.Unschedulable && testenv.HasTaint(n, "lifeboat.io/spot-interruption")
	})
	h.Eventually(10*time.Second, "the message deleted", h.QueueEmpty)
	time.Sleep(2 * time.Second) // a drain would have evicted the 0.5 s pod by now
	if !h.podExists(ns, pod) {
		t.Error("CORDON_ONLY=true evicted the pod")
	}
	if got := h.Metric("lifeboat_evictions_total", map[string]string{"result": "evicted"}); got != 0 {
		t.Errorf("evictions = %v, want 0", got)
	}
	if got := h.NodeEvents(node, "Drained"); got != 0 {
		t.Errorf("Drained events = %d, want 0", got)
	}
}

// NTH rebalance-recommendation-sqs-node-not-found-test: a message about an
// instance that is no node is handled and never retried hot. With NTH's
// DELETE_SQS_MSG_IF_NODE_NOT_FOUND=true it is deleted; with NTH's default
// (false) it is left for its owner, and comes back a bounded number of
// times (at once, then every 1 s, then every 10 s).
func TestNTHNodeNotFound(t *testing.T) {
	for _, tc := range []struct {
		deleteMsg bool
	}{{true}, {false}} {
		t.Run(fmt.Sprintf("DELETE_SQS_MSG_IF_NODE_NOT_FOUND=%v", tc.deleteMsg), func(t *testing.T) {
			env := append([]string{fmt.Sprintf("DELETE_SQS_MSG_IF_NODE_NOT_FOUND=%v", tc.deleteMsg)}, nthQueueEnv...)
			h := newHarness(t, harnessOptions{env: env})
			node, _, _, _ := nthNode(t, h) // a node of the cluster, which must stay untouched
			h.PutEvent(route.SourceEC2, route.RebalanceRecommendation, time.Now(), map[string]string{"instance-id": testenv.RandomInstanceID()})
			h.Eventually(10*time.Second, "the event counted as an unknown instance", func() bool {
				return h.Metric("lifeboat_unknown_instance_events_total", nil) >= 1
			})
			if tc.deleteMsg {
				h.Eventually(10*time.Second, "the message deleted", h.QueueEmpty)
			} else {
				time.Sleep(12 * time.Second)
				if h.QueueEmpty() {
					t.Error("the message was deleted with DELETE_SQS_MSG_IF_NODE_NOT_FOUND=false")
				}
				// In 12 s: at once, then every 1 s: at most ~13 receives; a hot
				// loop would make hundreds.
				if got := h.Metric("lifeboat_unknown_instance_events_total", nil); got > 15 {
					t.Errorf("the message was received %v times in 12 s; want ≤ 15 (no hot loop)", got)
				}
			}
			if h.Node(node).Spec.Unschedulable {
				t.Error("a node of the cluster was cordoned for an unknown instance")
			}
		})
	}
}

// NTH prometheus-metrics-sqs-test (ENABLE_PROMETHEUS_SERVER=true): /metrics
// is scraped, and the action counters move with a Spot interruption.
func TestNTHPrometheusMetrics(t *testing.T) {
	h := newHarness(t, harnessOptions{env: append([]string{"ENABLE_PROMETHEUS_SERVER=true"}, nthQueueEnv...)})
	node, id, _, _ := nthNode(t, h)
	counters := []struct {
		name   string
		labels map[string]string
	}{
		{"lifeboat_events_received_total", map[string]string{"kind": "spot-interruption"}},
		{"lifeboat_actions_total", map[string]string{"action": "cordon", "result": "ok"}},
		{"lifeboat_actions_total", map[string]string{"action": "drain", "result": "ok"}},
		{"lifeboat_evictions_total", map[string]string{"result": "evicted"}},
	}
	before := make([]float64, len(counters))
	for i, c := range counters {
		before[i] = h.Metric(c.name, c.labels)
	}
	h.PutEvent(route.SourceEC2, route.SpotInterruption, time.Now(), map[string]string{"instance-id": id, "instance-action": "terminate"})
	h.Eventually(15*time.Second, "the Drained event", func() bool { return h.NodeEvents(node, "Drained") >= 1 })
	raw, err := h.Lifeboat.MetricsText(h.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "# TYPE lifeboat_actions_total counter") {
		t.Error("the scrape is not Prometheus text with lifeboat_actions_total")
	}
	for i, c := range counters {
		v, err := testenv.SumMetric(raw, c.name, c.labels)
		if err != nil {
			t.Fatal(err)
		}
		if v-before[i] != 1 {
			t.Errorf("%s%v moved by %v, want 1", c.name, c.labels, v-before[i])
		}
	}
}

// NTH rebalance-recommendation-sqs-test and scheduled-change-event-sqs-test
// with DRY_RUN=true: the notice is received and logged, and nothing is
// changed: no cordon, no eviction, no message deleted.
func TestNTHDryRunRebalanceAndScheduledChange(t *testing.T) {
	for _, tc := range []struct {
		name   string
		detail func(id string) (source, detailType string, detail any)
	}{
		{"rebalance recommendation", func(id string) (string, string, any) {
			return route.SourceEC2, route.RebalanceRecommendation, map[string]string{"instance-id": id}
		}},
		{"scheduled change", func(id string) (string, string, any) {
			start := time.Now().Add(5 * time.Minute).UTC().Format(time.RFC1123) // inside the default 10 m lead
			return route.SourceHealth, route.Health, map[string]any{
				"eventArn": "arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/" + testenv.UniqueName("e"),
				"service":  "EC2", "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", "eventTypeCategory": "scheduledChange",
				"startTime": start, "statusCode": "upcoming", "affectedEntities": []map[string]string{{"entityValue": id, "status": "PENDING"}},
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := append([]string{"DRY_RUN=true", "ENABLE_REBALANCE_DRAINING=true"}, nthQueueEnv...)
			h := newHarness(t, harnessOptions{env: env})
			node, id, ns, pod := nthNode(t, h)
			src, dt, detail := tc.detail(id)
			h.PutEvent(src, dt, time.Now(), detail)
			h.Eventually(15*time.Second, "lifeboat to log what it would do", func() bool {
				tail := h.Lifeboat.Process().Tail(400)
				return strings.Contains(tail, "dry run: would evict pods") && strings.Contains(tail, "dry run: would delete message")
			})
			n := h.Node(node)
			if n.Spec.Unschedulable || len(n.Spec.Taints) > 0 || n.Annotations["lifeboat.io/events"] != "" {
				t.Errorf("dry run changed the node: unschedulable=%v taints=%v annotations=%v", n.Spec.Unschedulable, n.Spec.Taints, n.Annotations)
			}
			if !h.podExists(ns, pod) {
				t.Error("dry run evicted the pod")
			}
			if h.QueueEmpty() {
				t.Error("dry run deleted the message")
			}
		})
	}
}
