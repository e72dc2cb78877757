package drain_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/kube/clientset"
	"lifeboat.dev/lifeboat/internal/podnotice"
)

// Issue 25 item 3: before the drain's first eviction, each pod it evicts
// that can read them carries AWS's deadline and the reason, and the node
// the condition lifeboat.io/Terminating when asked for; a refused write
// never holds the eviction up, a dry run writes nothing.
func TestDeadlineHandedToTheWorkload(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "x", errors.New("cannot patch pods"))
	tests := []struct {
		name     string
		annotate bool
		dryRun   bool
		noDL     bool  // no deadline known
		refuse   error // every pod patch's answer
		// wantSeen is what each pod carried when its eviction came
		// (lifeboat.io/deadline, lifeboat.io/reason).
		wantDeadline, wantReason string
		wantCondition            bool
		wantEvictions            int
		// wantLead: the first eviction waits podnotice.Lead (annotations
		// were written); else it comes at once.
		wantLead bool
		// told: the pods carry the notice already (a restarted drain).
		told bool
		// condition: Options.TerminatingCondition (off by default).
		condition bool
		// blind: the pods mount no downward-API volume of their
		// annotations (podnotice.Readers): they are not written.
		blind bool
	}{
		{name: "deadline and reason before the first eviction", annotate: true, condition: true,
			wantDeadline: "2030-01-01T00:02:00Z", wantReason: "spot-interruption", wantCondition: true, wantEvictions: 2, wantLead: true},
		{name: "no deadline known: reason only", annotate: true, condition: true, noDL: true,
			wantReason: "spot-interruption", wantCondition: true, wantEvictions: 2, wantLead: true},
		{name: "already told (a restarted drain): no write, no wait", annotate: true, condition: true, told: true,
			wantDeadline: "2030-01-01T00:02:00Z", wantReason: "spot-interruption", wantCondition: true, wantEvictions: 2},
		{name: "pods patch forbidden: evicted all the same, at once", annotate: true, condition: true, refuse: forbidden,
			wantCondition: true, wantEvictions: 2},
		{name: "option off: no annotation, the condition still", condition: true, wantCondition: true, wantEvictions: 2},
		{name: "the defaults: annotations, no condition", annotate: true,
			wantDeadline: "2030-01-01T00:02:00Z", wantReason: "spot-interruption", wantEvictions: 2, wantLead: true},
		{name: "pods that cannot read their annotations: no write, no wait", annotate: true, blind: true, wantEvictions: 2},
		{name: "dry run: nothing written", annotate: true, condition: true, dryRun: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := fakePod("a", 30), fakePod("b", 30)
			if !tt.blind {
				for _, p := range []*corev1.Pod{a, b} {
					p.Spec.Volumes = []corev1.Volume{{Name: "notice", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
						Items: []corev1.DownwardAPIVolumeFile{{Path: "annotations", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations"}}}}}}}
				}
			}
			if tt.told {
				for _, p := range []*corev1.Pod{a, b} {
					p.Annotations = map[string]string{podnotice.AnnotationDeadline: "2030-01-01T00:02:00Z", podnotice.AnnotationReason: "spot-interruption"}
				}
			}
			c := newFakeCluster(t, a, b)
			if err := c.client.Tracker().Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fakeNode},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}); err != nil {
				t.Fatal(err)
			}
			c.client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				if tt.refuse != nil {
					return true, nil, tt.refuse
				}
				return false, nil, nil
			})
			var mu sync.Mutex
			seen := map[string][2]string{}
			c.answer = func(pod *corev1.Pod, _ int) error {
				mu.Lock()
				seen[pod.Name] = [2]string{pod.Annotations[podnotice.AnnotationDeadline], pod.Annotations[podnotice.AnnotationReason]}
				mu.Unlock()
				return nil
			}
			start := c.clock.Now()
			deadline := start.Add(2 * time.Minute)
			dl := drain.Deadline{At: deadline.Add(-5 * time.Second), Enforced: true, Announced: deadline, Reason: "spot-interruption"}
			if tt.noDL {
				dl = drain.Deadline{Reason: "spot-interruption"}
			}
			if _, err := c.drainTo(drain.Options{AnnotatePods: tt.annotate, TerminatingCondition: tt.condition, DryRun: tt.dryRun}, dl); err != nil {
				t.Fatalf("Drain: %v", err)
			}
			evictions := len(c.evictionsOf("a")) + len(c.evictionsOf("b"))
			if evictions != tt.wantEvictions {
				t.Errorf("%d evictions, want %d", evictions, tt.wantEvictions)
			}
			want := start
			if tt.wantLead {
				want = start.Add(podnotice.Lead)
			}
			for _, p := range []string{"a", "b"} {
				if e := c.evictionsOf(p); len(e) > 0 && !e[0].at.Equal(want) {
					t.Errorf("pod %s evicted %v after the drain began, want %v", p, e[0].at.Sub(start), want.Sub(start))
				}
				if tt.wantEvictions > 0 && seen[p] != [2]string{tt.wantDeadline, tt.wantReason} {
					t.Errorf("pod %s carried %q at its eviction, want [%q %q]", p, seen[p], tt.wantDeadline, tt.wantReason)
				}
			}
			for _, act := range c.client.Actions() {
				if act.GetVerb() == "patch" && act.GetResource().Resource == "pods" && (tt.dryRun || tt.told || !tt.annotate || tt.blind) {
					t.Errorf("pod %s patched; want no pod write", act.(k8stesting.PatchAction).GetName())
				}
				if act.GetVerb() == "patch" && tt.dryRun {
					t.Errorf("dry run wrote %s %s", act.GetResource().Resource, act.GetSubresource())
				}
			}
			n, err := c.client.CoreV1().Nodes().Get(context.Background(), fakeNode, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cond := condition(n, drain.ConditionTerminating)
			if !tt.wantCondition {
				if cond != nil {
					t.Errorf("condition %+v, want none", cond)
				}
				return
			}
			if cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != "SpotInterruption" || !cond.LastTransitionTime.Time.Equal(start) {
				t.Fatalf("condition %+v, want %s True, reason SpotInterruption, transition at %v", cond, drain.ConditionTerminating, start)
			}
			if want := "2030-01-01T00:02:00Z"; !tt.noDL && !strings.Contains(cond.Message, want) {
				t.Errorf("condition message %q does not name the deadline %s", cond.Message, want)
			}
			if condition(n, corev1.NodeReady) == nil {
				t.Error("the kubelet's Ready condition is gone")
			}
		})
	}
}

// The condition goes False when lifeboat uncordons the node (its events
// were canceled), once: a node that never had it gets no status write.
func TestUncordonClearsTheCondition(t *testing.T) {
	for _, had := range []bool{true, false} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fakeNode, Annotations: map[string]string{drain.AnnotationCordoned: "true"}},
			Spec: corev1.NodeSpec{Unschedulable: true}}
		if had {
			node.Status.Conditions = []corev1.NodeCondition{{Type: drain.ConditionTerminating, Status: corev1.ConditionTrue, Reason: "ScheduledChange"}}
		}
		c := newFakeCluster(t)
		if err := c.client.Tracker().Add(node); err != nil {
			t.Fatal(err)
		}
		c.clock.Step(time.Hour)
		d := drain.New(clientset.New(c.client), c.clock, quiet, drain.Options{})
		for range 2 {
			if _, err := d.Uncordon(context.Background(), fakeNode, "lifeboat.io/", nil); err != nil {
				t.Fatal(err)
			}
		}
		statusWrites := 0
		for _, act := range c.client.Actions() {
			if act.GetVerb() == "patch" && act.GetSubresource() == "status" {
				statusWrites++
			}
		}
		n, _ := c.client.CoreV1().Nodes().Get(context.Background(), fakeNode, metav1.GetOptions{})
		cond := condition(n, drain.ConditionTerminating)
		switch {
		case had && (statusWrites != 1 || cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != drain.ReasonUncordoned || !cond.LastTransitionTime.Time.Equal(c.clock.Now())):
			t.Errorf("had the condition: %d status writes, condition %+v; want one write, False, Uncordoned, at %v", statusWrites, cond, c.clock.Now())
		case !had && (statusWrites != 0 || cond != nil):
			t.Errorf("never had the condition: %d status writes, condition %+v; want none", statusWrites, cond)
		}
	}
}

func condition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}
