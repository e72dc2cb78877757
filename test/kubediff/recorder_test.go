package kubediff

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"lifeboat.dev/lifeboat/internal/clocktest"
	"lifeboat.dev/lifeboat/internal/kube"
)

// recorderSide is one way lifeboat could record Events.
type recorderSide string

const (
	// imdsRecorder is IMDS mode's: kube.Recorder writing through
	// kube.EventSink.
	imdsRecorder recorderSide = "ours"
	// queueRecorder is queue mode's: client-go's broadcaster writing
	// through kube.EventSink, naming objects with kube.Scheme.
	queueRecorder recorderSide = "queu"
	// clientGoRecorder is client-go's broadcaster with its own sink and
	// scheme: what both replace.
	clientGoRecorder recorderSide = "libr"
)

// event is an Event as compared.
type event struct {
	Object              string // the kind of the object it is about
	Type, Reason        string
	Message             string
	Count               int32
	Annotations         map[string]string
	Source              corev1.EventSource
	ReportingController string
	ReportingInstance   string
}

// TestRecordersAgree records the same sequence of Events, on a node and a
// pod, through IMDS mode's recorder, queue mode's (client-go's broadcaster
// over lifeboat's EventSink) and client-go's own, and compares the Events
// the API server ends up with. Queue mode's must equal client-go's
// exactly. IMDS mode's recorder leaves out what only a cluster-wide
// recorder needs, and the expectations below spell out each resulting
// difference:
//   - aggregation: client-go turns the 10th Event of one reason with
//     distinct messages within 10 minutes into "(combined from similar
//     events): …"; ours writes it as it is;
//   - spam filter: client-go writes at most 25 Events per object and type
//     (then one per 5 minutes), so 30 Warnings on the pod leave the last
//     repeated one at count 15; ours counts all 20;
//   - annotations: client-go counts Events that differ only in their
//     annotations as one (keeping the first's annotations); ours keeps
//     them apart;
//   - an Event deleted by the API server (its TTL) and recorded again:
//     client-go recreates it under its old name with the count going on
//     (3); ours creates a new one at count 1.
func TestRecordersAgree(t *testing.T) {
	ns := env.Namespace(t)
	sfx := strings.TrimPrefix(must(names("x")), "x-ours-")
	source := corev1.EventSource{Component: "lifeboat"} // what cmd/lifeboat records as
	got := map[recorderSide][]event{}
	for _, side := range []recorderSide{imdsRecorder, queueRecorder, clientGoRecorder} {
		p := newPair(t, config(env.Config, contentProtobuf))
		ctx, cancel := context.WithCancel(context.Background())
		var rec kube.EventRecorder
		clk := clocktest.AtEpoch()
		switch side {
		case imdsRecorder:
			r := kube.NewRecorder(p.oursREST.EventSink(), source, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
			go r.Run(ctx)
			rec = r
		case queueRecorder, clientGoRecorder:
			b := record.NewBroadcaster(record.WithContext(ctx), record.WithCorrelatorOptions(record.CorrelatorOptions{Clock: clk}))
			defer b.Shutdown()
			if side == queueRecorder {
				b.StartRecordingToSink(p.oursREST.EventSink())
				rec = b.NewRecorder(kube.Scheme, source)
			} else {
				b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: p.libCS.CoreV1().Events("")})
				rec = b.NewRecorder(scheme.Scheme, source)
			}
		}
		n := node(t, fmt.Sprintf("ev-%s-%s", side, sfx), t.Name())
		po := pod(t, ns, fmt.Sprintf("ev-%s-%s", side, sfx), n.Name, nil)
		got[side] = recordSequence(t, rec, n, po)
		cancel()
	}
	if d := cmp.Diff(got[clientGoRecorder], got[queueRecorder]); d != "" {
		t.Errorf("queue mode's recorder (client-go's broadcaster over kube.EventSink) wrote other Events than client-go's own (-client-go +queue mode):\n%s", d)
	}
	if d := cmp.Diff(expectedEvents(clientGoRecorder), got[clientGoRecorder]); d != "" {
		t.Errorf("client-go's recorder wrote other Events than expected (-want +got):\n%s", d)
	}
	if d := cmp.Diff(expectedEvents(imdsRecorder), got[imdsRecorder]); d != "" {
		t.Errorf("IMDS mode's recorder wrote other Events than expected (-want +got):\n%s", d)
	}
}

func must(s, _ string) string { return s }

// recordSequence records the test's Events on n and po, waits until the
// API server holds them all, and returns them.
func recordSequence(t *testing.T, rec kube.EventRecorder, n *corev1.Node, po *corev1.Pod) []event {
	t.Helper()
	for range 3 {
		rec.Event(n, corev1.EventTypeNormal, "Cordoned", "cordoned for a Spot interruption")
	}
	rec.Eventf(n, corev1.EventTypeNormal, "Cordoned", "cordoned for %s", "a rebalance recommendation")
	rec.AnnotatedEventf(n, map[string]string{"lifeboat.io/id": "1"}, corev1.EventTypeNormal, "Notice", "notice received")
	rec.AnnotatedEventf(n, map[string]string{"lifeboat.io/id": "2"}, corev1.EventTypeNormal, "Notice", "notice received")
	for i := 1; i <= 10; i++ {
		rec.Eventf(po, corev1.EventTypeWarning, "EvictionBlocked", "eviction blocked, attempt %d", i)
	}
	for range 20 {
		rec.Event(po, corev1.EventTypeWarning, "Stuck", "pod stuck terminating")
	}
	rec.Event(n, corev1.EventTypeNormal, "Drained", "node drained")
	rec.Event(n, corev1.EventTypeNormal, "Drained", "node drained")
	// Each recorder writes in order: once the sentinel is there, so is
	// everything before it.
	rec.Event(n, corev1.EventTypeNormal, "Done", "sentinel 1")
	waitEvent(t, n.Name, "sentinel 1")

	// The API server drops an Event an hour after its last update; the
	// next equal one comes after that.
	ctx, cancel := contextTimeout(opTimeout)
	defer cancel()
	if err := env.Client.CoreV1().Events(metav1.NamespaceDefault).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{FieldSelector: "involvedObject.name=" + n.Name + ",reason=Drained"}); err != nil {
		t.Fatal(err)
	}
	rec.Event(n, corev1.EventTypeNormal, "Drained", "node drained")
	rec.Event(n, corev1.EventTypeNormal, "Done", "sentinel 2")
	waitEvent(t, n.Name, "sentinel 2")

	var out []event
	for _, o := range []struct {
		ns, name string
	}{{metav1.NamespaceDefault, n.Name}, {po.Namespace, po.Name}} {
		l, err := env.Client.CoreV1().Events(o.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + o.name})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range l.Items {
			if !strings.HasPrefix(e.Name, o.name+".") {
				t.Errorf("Event %s is not named after its object %s", e.Name, o.name)
			}
			if e.LastTimestamp.Before(&e.FirstTimestamp) || e.FirstTimestamp.IsZero() {
				t.Errorf("Event %s: first seen %v, last %v", e.Name, e.FirstTimestamp, e.LastTimestamp)
			}
			if e.InvolvedObject.UID == "" || e.InvolvedObject.APIVersion != "v1" {
				t.Errorf("Event %s: involved object %+v, want its UID and apiVersion v1", e.Name, e.InvolvedObject)
			}
			out = append(out, event{
				Object: e.InvolvedObject.Kind, // one node and one pod per side
				Type:   e.Type, Reason: e.Reason, Message: e.Message, Count: e.Count, Annotations: e.Annotations,
				Source: e.Source, ReportingController: e.ReportingController, ReportingInstance: e.ReportingInstance,
			})
		}
	}
	return sorted(out)
}

func sorted(l []event) []event {
	sort.Slice(l, func(i, j int) bool {
		a, b := l[i], l[j]
		return fmt.Sprint(a.Object, a.Reason, a.Message, a.Annotations) < fmt.Sprint(b.Object, b.Reason, b.Message, b.Annotations)
	})
	return l
}

// waitEvent waits until an Event with message is recorded about object.
func waitEvent(t *testing.T, object, message string) {
	t.Helper()
	ctx, cancel := contextTimeout(opTimeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		l, err := env.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + object})
		if err != nil {
			return false, err
		}
		for _, e := range l.Items {
			if e.Message == message {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no Event %q about %s: %v", message, object, err)
	}
}

// expectedEvents is what a recorder leaves in the API server after
// recordSequence; the differences between the sides are the documented
// ones (TestRecordersAgree).
func expectedEvents(side recorderSide) []event {
	clientGo := side != imdsRecorder
	src := corev1.EventSource{Component: "lifeboat"}
	ev := func(object, typ, reason, message string, count int32) event {
		return event{Object: object, Type: typ, Reason: reason, Message: message, Count: count,
			Source: src, ReportingController: "lifeboat"}
	}
	node, pod := "Node", "Pod"
	var out []event
	add := func(e event) { out = append(out, e) }
	add(ev(node, "Normal", "Cordoned", "cordoned for a Spot interruption", 3))
	add(ev(node, "Normal", "Cordoned", "cordoned for a rebalance recommendation", 1))
	add(ev(node, "Normal", "Done", "sentinel 1", 1))
	add(ev(node, "Normal", "Done", "sentinel 2", 1))
	if clientGo {
		add(ev(node, "Normal", "Drained", "node drained", 3)) // recreated, the count going on
		e := ev(node, "Normal", "Notice", "notice received", 2)
		e.Annotations = map[string]string{"lifeboat.io/id": "1"}
		add(e)
	} else {
		add(ev(node, "Normal", "Drained", "node drained", 1)) // a new Event
		for _, id := range []string{"1", "2"} {
			e := ev(node, "Normal", "Notice", "notice received", 1)
			e.Annotations = map[string]string{"lifeboat.io/id": id}
			add(e)
		}
	}
	for i := 1; i <= 10; i++ {
		e := ev(pod, "Warning", "EvictionBlocked", fmt.Sprintf("eviction blocked, attempt %d", i), 1)
		if clientGo && i == 10 {
			e.Message = "(combined from similar events): " + e.Message
			e.ReportingController = "" // client-go's aggregate Event has none
		}
		add(e)
	}
	if clientGo {
		add(ev(pod, "Warning", "Stuck", "pod stuck terminating", 15)) // 25 per object and type, 10 went before
	} else {
		add(ev(pod, "Warning", "Stuck", "pod stuck terminating", 20))
	}
	return sorted(out)
}
