package dsstop

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"lifeboat.dev/lifeboat/internal/clocktest"
	"lifeboat.dev/lifeboat/internal/kube/clientset"
)

var podsResource = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// evictions is a fake API server's eviction subresource: it records each
// eviction (pod name and grace) and answers with then, called with the
// pod's name (nil: the pod is deleted after goneAfter).
type evictions struct {
	mu        sync.Mutex
	cs        *fake.Clientset
	got       []string // "name grace"
	graces    map[string]int64
	goneAfter time.Duration
	then      func(cs *fake.Clientset, name string) error
}

func (e *evictions) install() {
	e.graces = map[string]int64{}
	e.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		e.mu.Lock()
		e.got = append(e.got, ev.Name)
		e.graces[ev.Name] = *ev.DeleteOptions.GracePeriodSeconds
		e.mu.Unlock()
		if e.then != nil {
			return true, nil, e.then(e.cs, ev.Name)
		}
		go func() {
			time.Sleep(e.goneAfter)
			_ = e.cs.Tracker().Delete(podsResource, ev.Namespace, ev.Name)
		}()
		return true, nil, nil
	})
}

func (e *evictions) names() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}

func critical(p corev1.Pod) corev1.Pod {
	p.Spec.PriorityClassName = "system-node-critical"
	return p
}

func withGrace(p corev1.Pod, s int64) corev1.Pod {
	p.Spec.TerminationGracePeriodSeconds = &s
	return p
}

func newStopper(cs *fake.Clientset, rec record.EventRecorder, o Options) *Stopper {
	o.Recorder = rec
	return New(clientset.New(cs), clocktest.AtEpoch(), slog.New(slog.NewTextHandler(io.Discard, nil)), o)
}

func drainEvents(rec *record.FakeRecorder) string {
	var seen []string
	for len(rec.Events) > 0 {
		seen = append(seen, <-rec.Events)
	}
	return strings.Join(seen, "\n")
}

// The opted-in DaemonSet pods are stopped, ordinary ones before the
// system-critical ones (whose eviction waits until the others are gone),
// each with its grace cut to the time left; the others stay.
func TestStopOrderAndGrace(t *testing.T) {
	in := map[string]string{AnnotationStop: "true"}
	shipper := withGrace(pod("shipper", "DaemonSet", in), 10)
	agent := withGrace(critical(pod("agent", "DaemonSet", in)), 600)
	other := pod("other", "DaemonSet", nil)
	cs := fake.NewClientset(&shipper, &agent, &other)
	ev := &evictions{cs: cs, goneAfter: 400 * time.Millisecond}
	ev.install()
	var agentAskedAt, shipperGoneAt time.Time
	var mu sync.Mutex
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "eviction" && a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction).Name == "agent" {
			mu.Lock()
			agentAskedAt = time.Now()
			mu.Unlock()
		}
		return false, nil, nil
	})
	cs.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.DeleteAction).GetName() == "shipper" {
			mu.Lock()
			shipperGoneAt = time.Now()
			mu.Unlock()
		}
		return false, nil, nil
	})
	rec := record.NewFakeRecorder(100)
	s := newStopper(cs, rec, Options{Margin: 5 * time.Second})
	deadline := clocktest.Epoch.Add(65 * time.Second) // 60 s left after the margin
	res, err := s.Stop(context.Background(), "node-a", deadline)
	if err != nil {
		t.Fatal(err)
	}
	if got := ev.names(); strings.Join(got, ",") != "shipper,agent" {
		t.Fatalf("evicted %v, want shipper then agent (other not opted in)", got)
	}
	mu.Lock()
	if !agentAskedAt.After(shipperGoneAt) {
		t.Errorf("agent (system-node-critical) evicted at %v, before shipper was gone at %v", agentAskedAt, shipperGoneAt)
	}
	mu.Unlock()
	if g := ev.graces["shipper"]; g != 10 {
		t.Errorf("shipper grace %d, want its own 10", g)
	}
	if g := ev.graces["agent"]; g < 58 || g > 60 {
		t.Errorf("agent grace %d, want its 600 cut to the ~59 s left", g)
	}
	if len(res.Stopped) != 2 || res.NotOptedIn != 1 || len(res.NotStopped) != 0 || len(res.Recreated) != 0 {
		t.Errorf("result %+v, want 2 stopped, 1 not opted in", res)
	}
	for _, st := range res.Stopped {
		if st.Took < 400*time.Millisecond || st.Took > 2*time.Second {
			t.Errorf("%s took %v, want about 400 ms", st.Name, st.Took)
		}
	}
	events := drainEvents(rec)
	if n := strings.Count(events, "Normal "+ReasonStopped); n != 4 {
		t.Errorf("%d %s Events, want 4 (pod and node, two pods):\n%s", n, ReasonStopped, events)
	}
}

// A DaemonSet that tolerates lifeboat's taint puts a new pod on the node
// at once: it is reported, once, and not stopped again (no loop).
func TestStopRecreatedPodReportedNotStoppedAgain(t *testing.T) {
	shipper := pod("shipper", "DaemonSet", map[string]string{AnnotationStop: "true"})
	cs := fake.NewClientset(&shipper)
	ev := &evictions{cs: cs}
	n := 0
	ev.then = func(cs *fake.Clientset, name string) error {
		_ = cs.Tracker().Delete(podsResource, "ns", name)
		n++
		again := shipper.DeepCopy()
		again.Name = "shipper-again"
		again.UID = types.UID("uid-again")
		return cs.Tracker().Create(podsResource, again, "ns")
	}
	ev.install()
	rec := record.NewFakeRecorder(100)
	res, err := newStopper(cs, rec, Options{}).Stop(context.Background(), "node-a", clocktest.Epoch.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got := ev.names(); len(got) != 1 {
		t.Errorf("evictions %v, want the one pod once", got)
	}
	if len(res.Stopped) != 1 || len(res.Recreated) != 1 || res.Recreated[0] != "ns/shipper-again" {
		t.Errorf("result %+v, want shipper stopped and ns/shipper-again reported recreated", res)
	}
	if events := drainEvents(rec); strings.Count(events, "Warning "+ReasonRecreated) != 2 {
		t.Errorf("want a Warning %s on the pod and the node:\n%s", ReasonRecreated, events)
	}
}

// What cannot be done is reported and ends the step in time: no time left
// (not asked), an eviction refused until the deadline, a shutdown not over
// by it, a refusal for good.
func TestStopNotStopped(t *testing.T) {
	for _, tc := range []struct {
		name      string
		left      time.Duration // before the deadline less the 1 s margin
		then      func(*fake.Clientset, string) error
		evictions int // at least
		want      string
	}{
		{name: "no time left", left: 500 * time.Millisecond, want: "no time left"},
		{name: "refused by a budget until the deadline", left: 1500 * time.Millisecond, evictions: 2, want: "still refused",
			then: func(*fake.Clientset, string) error {
				return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
			}},
		{name: "shutdown not over by the deadline", left: 1500 * time.Millisecond, evictions: 1, want: "still running",
			then: func(*fake.Clientset, string) error { return nil }},
		{name: "refused for good", left: time.Minute, evictions: 1, want: "eviction refused",
			then: func(*fake.Clientset, string) error {
				return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "shipper", nil)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shipper := pod("shipper", "DaemonSet", map[string]string{AnnotationStop: "true"})
			cs := fake.NewClientset(&shipper)
			ev := &evictions{cs: cs, then: tc.then}
			ev.install()
			rec := record.NewFakeRecorder(100)
			s := newStopper(cs, rec, Options{Margin: time.Second, Backoff: 200 * time.Millisecond})
			start := time.Now()
			res, err := s.Stop(context.Background(), "node-a", clocktest.AtEpoch().Now().Add(time.Second+tc.left))
			if err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took > tc.left+time.Second {
				t.Errorf("the step took %v, want it over by the deadline less the margin (%v)", took, tc.left)
			}
			if got := len(ev.names()); got < tc.evictions || tc.evictions == 0 && got != 0 {
				t.Errorf("%d evictions, want at least %d (none when 0)", got, tc.evictions)
			}
			if len(res.Stopped) != 0 || len(res.NotStopped) != 1 || !strings.Contains(res.NotStopped[0].Reason, tc.want) {
				t.Fatalf("result %+v, want shipper not stopped: %q", res, tc.want)
			}
			if events := drainEvents(rec); strings.Count(events, "Warning "+ReasonNotStopped) != 2 {
				t.Errorf("want a Warning %s on the pod and the node:\n%s", ReasonNotStopped, events)
			}
		})
	}
}
