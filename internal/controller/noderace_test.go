package controller

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/kube/clientset"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/plan"
)

// Issue 22 defect 8: the rebalance expiry decided on the cache, then
// removed every lifeboat taint in its own update: a Spot cordon landing in
// between (injected here as the node is read for the write) was undone and
// the dying node became schedulable. The decision is now made on the
// object written.
func TestRebalanceExpiryKeepsACordonThatLandsBeforeItsWrite(t *testing.T) {
	n := node("node-a", instA)
	n.Spec.Unschedulable = true
	n.Spec.Taints = []corev1.Taint{{Key: rebalanceTaint, Value: "rebalance-recommendation", Effect: corev1.TaintEffectNoSchedule}}
	n.Annotations = map[string]string{drain.AnnotationCordoned: "true",
		AnnotationRebalanceExpires: testClock.Now().Add(time.Second).UTC().Format(time.RFC3339)}
	client := fake.NewClientset(n)
	spotTaint := plan.TaintPrefix + string(event.SpotInterruption)
	var once sync.Once
	client.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		// The Spot notice's cordon lands between the expiry's decision
		// (on the cache, which has not seen it) and its write.
		once.Do(func() {
			cur, err := client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("nodes"), "", "node-a")
			if err != nil {
				t.Error(err)
				return
			}
			spot := cur.(*corev1.Node).DeepCopy()
			spot.Spec.Taints = append(spot.Spec.Taints, corev1.Taint{Key: spotTaint, Value: "spot-interruption", Effect: corev1.TaintEffectNoSchedule})
			if err := client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("nodes"), spot, ""); err != nil {
				t.Error(err)
			}
		})
		return false, nil, nil
	})
	d := drain.New(clientset.New(client), testClock, slog.New(slog.NewTextHandler(io.Discard, nil)), drain.Options{})
	run(t, client, nodes.Options{}, Deps{Drainer: d}, Options{Policy: plan.Policy{DrainKinds: []event.Kind{event.SpotInterruption}},
		RebalanceCordonExpiry: time.Hour, RetryBackoff: 100 * time.Millisecond})
	waitFor(t, "the appointment to go", func() bool { return trackedNode(t, client).Annotations[AnnotationRebalanceExpires] == "" })
	got := trackedNode(t, client)
	if !got.Spec.Unschedulable || !hasTaint(got, spotTaint) {
		t.Errorf("after the expiry: unschedulable %v, taints %v; want the Spot cordon that landed meanwhile kept", got.Spec.Unschedulable, got.Spec.Taints)
	}
}

// trackedNode reads node-a from the fake's store, past its reactors.
func trackedNode(t *testing.T, client *fake.Clientset) *corev1.Node {
	t.Helper()
	o, err := client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("nodes"), "", "node-a")
	if err != nil {
		t.Fatal(err)
	}
	return o.(*corev1.Node)
}

// interceptor runs before once, before the first write that clears the
// node's events annotation (finish's), then writes through the Drainer.
type interceptor struct {
	*drain.Drainer
	once   sync.Once
	before func()
}

func clears(ann map[string]string) bool {
	v, ok := ann[drain.AnnotationEvents]
	return ok && v == ""
}

func (i *interceptor) SetAnnotations(ctx context.Context, node string, ann map[string]string) error {
	if clears(ann) {
		i.once.Do(i.before)
	}
	return i.Drainer.SetAnnotations(ctx, node, ann)
}

func (i *interceptor) UpdateAnnotations(ctx context.Context, node string, update func(map[string]string) map[string]string) error {
	if clears(update(map[string]string{})) {
		i.once.Do(i.before)
	}
	return i.Drainer.UpdateAnnotations(ctx, node, update)
}

// Issue 22 defect 8: finish retired the node's work, then cleared its
// events annotation outside the lock: work started in between (here a
// scheduled change, recorded on the node while it waits) lost its record,
// so a restart would not resume it.
func TestFinishKeepsTheRecordOfWorkStartedMeanwhile(t *testing.T) {
	client := fake.NewClientset(node("node-a", instA))
	i := &interceptor{Drainer: drain.New(clientset.New(client), testClock, slog.New(slog.NewTextHandler(io.Discard, nil)), drain.Options{})}
	c := run(t, client, nodes.Options{}, Deps{Drainer: i}, Options{Policy: plan.Policy{DrainKinds: []event.Kind{event.SpotInterruption}}, RetryBackoff: 100 * time.Millisecond})
	later := event.Event{ID: "reboot", Kind: event.ScheduledChange, Source: event.SourceSQS, InstanceID: instA, Action: "system-reboot",
		Deadline: testClock.Now().Add(48 * time.Hour)}
	i.before = func() {
		c.Submit("node-a", instA, time.Time{}, []event.Event{later}, 2)
		// Give the new work the time to record itself (it cannot while
		// the node's goroutine is the one writing here).
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) && !strings.Contains(trackedNode(t, client).Annotations[drain.AnnotationEvents], later.ID) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	c.Submit("node-a", instA, time.Time{}, rebalanceEvent(instA), 1)
	waitFor(t, "the recommendation done and the scheduled change recorded", func() bool {
		ann := trackedNode(t, client).Annotations
		return strings.Contains(ann[AnnotationDoneEvents], "rb-"+instA) && strings.Contains(ann[drain.AnnotationEvents], later.ID)
	})
	time.Sleep(200 * time.Millisecond) // a late clear would land now
	if got := trackedNode(t, client).Annotations[drain.AnnotationEvents]; !strings.Contains(got, later.ID) {
		t.Errorf("events annotation %q; want the waiting scheduled change recorded", got)
	}
}

// Issue 22 defect 8: the done-events list was rebuilt from the cache, so
// two close writes lost IDs (the cache had not seen the first). Here the
// cache never sees lifeboat's writes (it watches another store).
func TestDoneEventsKeptWhenTheCacheLags(t *testing.T) {
	client := fake.NewClientset(node("node-a", instA))
	cache := fake.NewClientset(node("node-a", instA))
	d := drain.New(clientset.New(client), testClock, slog.New(slog.NewTextHandler(io.Discard, nil)), drain.Options{})
	c := run(t, cache, nodes.Options{}, Deps{Drainer: d}, Options{Policy: plan.Policy{DrainKinds: []event.Kind{event.SpotInterruption}}, RetryBackoff: 100 * time.Millisecond})
	for i, id := range []string{"rb-1", "rb-2"} {
		c.Submit("node-a", instA, time.Time{}, []event.Event{{ID: id, Kind: event.RebalanceRecommendation, Source: event.SourceSQS, InstanceID: instA, Time: testClock.Now()}}, Ticket(i+1))
		if s := settled(t, c); s.Outcome != Done {
			t.Fatalf("%s settled %v", id, s.Outcome)
		}
	}
	got := trackedNode(t, client).Annotations[AnnotationDoneEvents]
	if !strings.Contains(got, "rb-1") || !strings.Contains(got, "rb-2") {
		t.Errorf("done-events %q; want both rb-1 and rb-2", got)
	}
}
