package controller

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/kube/clientset"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/plan"
)

// startExpiry runs a controller with --rebalance-cordon-expiry=expiry and
// a real Drainer over a fake clientset holding n, so that cordons, taints
// and annotations are really written and read back through the cache.
func startExpiry(t *testing.T, expiry time.Duration, n *corev1.Node) (*Controller, *fake.Clientset, *record.FakeRecorder) {
	t.Helper()
	client := fake.NewClientset(n)
	d := drain.New(clientset.New(client), testClock, slog.New(slog.NewTextHandler(io.Discard, nil)), drain.Options{})
	rec := record.NewFakeRecorder(100)
	c := run(t, client, nodes.Options{}, Deps{Drainer: d, Recorder: rec},
		Options{Policy: plan.Policy{DrainKinds: []event.Kind{event.SpotInterruption}}, RebalanceCordonExpiry: expiry, RetryBackoff: 100 * time.Millisecond})
	return c, client, rec
}

func rebalanceEvent(inst string) []event.Event {
	return []event.Event{{ID: "rb-" + inst, Kind: event.RebalanceRecommendation, Source: event.SourceSQS, InstanceID: inst, Time: testClock.Now()}}
}

func getNode(t *testing.T, client *fake.Clientset, name string) *corev1.Node {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

func sawEvent(rec *record.FakeRecorder, prefix string) bool {
	for {
		select {
		case e := <-rec.Events:
			if strings.HasPrefix(e, prefix) {
				return true
			}
		default:
			return false
		}
	}
}

// A rebalance recommendation's cordon expires: the node is uncordoned and
// lifeboat's taint and the appointment removed; without expiry it stays.
func TestRebalanceCordonExpires(t *testing.T) {
	c, client, rec := startExpiry(t, time.Second, node("node-a", instA))
	c.Submit("node-a", instA, time.Time{}, rebalanceEvent(instA), 1)
	settled(t, c)
	n := getNode(t, client, "node-a")
	if !n.Spec.Unschedulable || !hasTaint(n, rebalanceTaint) || n.Annotations[AnnotationRebalanceExpires] == "" {
		t.Fatalf("after the recommendation: unschedulable %v, taints %v, annotations %v; want cordoned, tainted, expiry recorded", n.Spec.Unschedulable, n.Spec.Taints, n.Annotations)
	}
	waitFor(t, "the cordon to expire", func() bool { n := getNode(t, client, "node-a"); return !n.Spec.Unschedulable })
	n = getNode(t, client, "node-a")
	if hasTaint(n, rebalanceTaint) || n.Annotations[AnnotationRebalanceExpires] != "" || n.Annotations[drain.AnnotationCordoned] != "" {
		t.Errorf("after expiry: taints %v, annotations %v; want lifeboat's taint and annotations gone", n.Spec.Taints, n.Annotations)
	}
	// The Event is reported after the write the test saw.
	waitFor(t, "a RebalanceCordonExpired Event", func() bool { return sawEvent(rec, "Normal RebalanceCordonExpired") })
}

// An interruption after the recommendation keeps the cordon: only the
// appointment goes.
func TestRebalanceCordonKeptWhenInterruptionFollows(t *testing.T) {
	c, client, _ := startExpiry(t, 1500*time.Millisecond, node("node-a", instA))
	c.Submit("node-a", instA, time.Time{}, rebalanceEvent(instA), 1)
	settled(t, c)
	c.Submit("node-a", instA, time.Time{}, events(t, spot(instA)), 2)
	settled(t, c)
	waitFor(t, "the appointment to go", func() bool {
		return getNode(t, client, "node-a").Annotations[AnnotationRebalanceExpires] == ""
	})
	n := getNode(t, client, "node-a")
	if !n.Spec.Unschedulable || !hasTaint(n, plan.TaintPrefix+string(event.SpotInterruption)) {
		t.Errorf("after the expiry time: unschedulable %v, taints %v; want the Spot interruption's cordon kept", n.Spec.Unschedulable, n.Spec.Taints)
	}
}

// The appointment is on the node: a restarted lifeboat keeps it.
func TestRebalanceCordonExpiresAfterRestart(t *testing.T) {
	n := node("node-a", instA)
	n.Spec.Unschedulable = true
	n.Spec.Taints = []corev1.Taint{{Key: rebalanceTaint, Value: "rebalance-recommendation", Effect: corev1.TaintEffectNoSchedule}}
	n.Annotations = map[string]string{drain.AnnotationCordoned: "true",
		AnnotationRebalanceExpires: testClock.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)}
	_, client, _ := startExpiry(t, time.Hour, n)
	if got := getNode(t, client, "node-a"); !got.Spec.Unschedulable {
		t.Fatal("uncordoned before the recorded time")
	}
	waitFor(t, "the recorded cordon to expire", func() bool { return !getNode(t, client, "node-a").Spec.Unschedulable })
	if got := getNode(t, client, "node-a"); hasTaint(got, rebalanceTaint) {
		t.Errorf("taints %v after expiry", got.Spec.Taints)
	}
}

// Without --rebalance-cordon-expiry nothing is recorded.
func TestNoRebalanceCordonExpiry(t *testing.T) {
	c, client, _ := startExpiry(t, 0, node("node-a", instA))
	c.Submit("node-a", instA, time.Time{}, rebalanceEvent(instA), 1)
	settled(t, c)
	if n := getNode(t, client, "node-a"); !n.Spec.Unschedulable || n.Annotations[AnnotationRebalanceExpires] != "" {
		t.Errorf("unschedulable %v, annotations %v; want cordoned, no expiry", n.Spec.Unschedulable, n.Annotations)
	}
}
