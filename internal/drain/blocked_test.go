package drain_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"lifeboat.dev/lifeboat/internal/drain"
)

// Issue 25 item 2: the moment a pod still blocked is deleted before a
// deadline AWS enforces, and the grace period it gets.
func TestPlanBlockedDelete(t *testing.T) {
	deadline := time.Date(2030, 1, 1, 12, 2, 0, 0, time.UTC)
	enforced := drain.Deadline{At: deadline, Enforced: true}
	const margin = 5 * time.Second
	tests := []struct {
		name      string
		dl        drain.Deadline
		requested int64
		now       time.Time
		want      drain.BlockedDelete
		wantOK    bool
	}{
		{name: "no deadline", dl: drain.Deadline{Enforced: true}, requested: 30, now: deadline.Add(-time.Minute)},
		{name: "soft deadline (scheduled change, node grace alone)", dl: drain.Deadline{At: deadline}, requested: 30, now: deadline.Add(-time.Minute)},
		{name: "ahead: deadline - grace - margin, its whole grace", dl: enforced, requested: 30, now: deadline.Add(-2 * time.Minute),
			want: drain.BlockedDelete{At: deadline.Add(-35 * time.Second), Grace: 30}, wantOK: true},
		{name: "the moment itself: due, whole grace", dl: enforced, requested: 30, now: deadline.Add(-35 * time.Second),
			want: drain.BlockedDelete{At: deadline.Add(-35 * time.Second), Due: true, Grace: 30}, wantOK: true},
		{name: "a second before it: due, whole grace (a late wake-up must not lose a second)", dl: enforced, requested: 30, now: deadline.Add(-36 * time.Second),
			want: drain.BlockedDelete{At: deadline.Add(-35 * time.Second), Due: true, Grace: 30}, wantOK: true},
		{name: "just over a second before it: not yet", dl: enforced, requested: 30, now: deadline.Add(-36*time.Second - time.Millisecond),
			want: drain.BlockedDelete{At: deadline.Add(-35 * time.Second), Grace: 30}, wantOK: true},
		{name: "a few milliseconds after it: a second lost (why the drain acts at ActAt)", dl: enforced, requested: 30, now: deadline.Add(-35*time.Second + 5*time.Millisecond),
			want: drain.BlockedDelete{At: deadline.Add(-35 * time.Second), Due: true, Grace: 29}, wantOK: true},
		{name: "passed: at once, grace cut to the time left", dl: enforced, requested: 30, now: deadline.Add(-20 * time.Second),
			want: drain.BlockedDelete{At: deadline.Add(-35 * time.Second), Due: true, Grace: 15}, wantOK: true},
		{name: "passed, a fraction of a second is not given", dl: enforced, requested: 30, now: deadline.Add(-15*time.Second - 500*time.Millisecond),
			want: drain.BlockedDelete{At: deadline.Add(-35 * time.Second), Due: true, Grace: 10}, wantOK: true},
		{name: "time out: never grace 0", dl: enforced, requested: 30, now: deadline.Add(-2 * time.Second),
			want: drain.BlockedDelete{At: deadline.Add(-35 * time.Second), Due: true, Grace: 1}, wantOK: true},
		{name: "grace 0 asked: 1 s", dl: enforced, requested: 0, now: deadline.Add(-time.Minute),
			want: drain.BlockedDelete{At: deadline.Add(-6 * time.Second), Grace: 1}, wantOK: true},
		{name: "a long grace on a lifecycle hook's hour", dl: enforced, requested: 600, now: deadline.Add(-time.Hour),
			want: drain.BlockedDelete{At: deadline.Add(-605 * time.Second), Grace: 600}, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := drain.PlanBlockedDelete(tt.dl, tt.requested, margin, tt.now)
			if ok != tt.wantOK || got != tt.want {
				t.Errorf("PlanBlockedDelete = %+v, %v; want %+v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// pdbRefusal is the API server's 429 for an eviction a
// PodDisruptionBudget refuses, naming the budget in its causes.
func pdbRefusal(budget string) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause,
		Message: fmt.Sprintf("The disruption budget %s needs 1 healthy pods and has 1 currently", budget)})
	return err
}

// eventLog records Events with the kind of object they are on.
type eventLog struct {
	mu     sync.Mutex
	events []string // "Kind name type reason: message"
}

func (l *eventLog) Event(obj runtime.Object, typ, reason, msg string) {
	ref, _ := obj.(*corev1.ObjectReference)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf("%s %s %s %s: %s", ref.Kind, ref.Name, typ, reason, msg))
}

func (l *eventLog) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	l.Event(obj, typ, reason, fmt.Sprintf(format, args...))
}

func (l *eventLog) AnnotatedEventf(obj runtime.Object, _ map[string]string, typ, reason, format string, args ...any) {
	l.Eventf(obj, typ, reason, format, args...)
}

// Issue 25 item 2: before a deadline AWS enforces, a pod a
// PodDisruptionBudget or an admission webhook still blocks is deleted at
// the deadline less its grace period less the margin, with its grace
// period and its UID as precondition, and reported (Result.DeletedBlocked,
// a Warning BlockedPodDeleted on the pod and the node naming the
// blocker); before, it stayed until the deadline and died with the
// instance (today's behaviour with the option off, or a soft deadline).
func TestBlockedPodsDeletedBeforeEnforcedDeadline(t *testing.T) {
	const margin = 5 * time.Second
	tests := []struct {
		name     string
		refusal  func(pod string) error
		stuck    bool // the kubelet never finishes the pod's deletion
		left     time.Duration
		enforced bool
		on       bool
		force    bool
		// nodeGrace is Actions.NodeGrace (0: none).
		nodeGrace time.Duration
		// wantAt is when the graceful delete comes, before the deadline
		// (0: none); wantGrace its grace period.
		wantAt    time.Duration
		wantGrace int64
		wantErr   error
		wantForce int
		blocker   string // in the Events
	}{
		{name: "PDB, Spot: deleted at deadline - grace - margin", refusal: func(string) error { return pdbRefusal("web-pdb") },
			left: 2 * time.Minute, enforced: true, on: true, wantAt: 35 * time.Second, wantGrace: 30, blocker: "disruption budget web-pdb"},
		{name: "PDB, the moment passed: at once, grace cut", refusal: func(string) error { return pdbRefusal("web-pdb") },
			left: 20 * time.Second, enforced: true, on: true, wantAt: 20 * time.Second, wantGrace: 15, blocker: "web-pdb"},
		{name: "webhook 403: deleted at its moment", refusal: webhookDenied,
			left: 2 * time.Minute, enforced: true, on: true, wantAt: 35 * time.Second, wantGrace: 30, blocker: `admission webhook "deny.example.com" denied`},
		{name: "option off: left until the deadline (the harm)", refusal: func(string) error { return pdbRefusal("web-pdb") },
			left: 2 * time.Minute, enforced: true, wantErr: drain.ErrDeadline},
		{name: "--node-grace-period ends the drain before the moment: left", refusal: func(string) error { return pdbRefusal("web-pdb") },
			left: 2 * time.Minute, enforced: true, on: true, nodeGrace: 30 * time.Second, wantErr: drain.ErrDeadline},
		{name: "soft deadline: left", refusal: func(string) error { return pdbRefusal("web-pdb") },
			left: 2 * time.Minute, on: true, wantErr: drain.ErrDeadline},
		{name: "still there at the deadline: force-deleted then", refusal: func(string) error { return pdbRefusal("web-pdb") }, stuck: true,
			left: 2 * time.Minute, enforced: true, on: true, force: true, wantAt: 35 * time.Second, wantGrace: 30, wantForce: 1, blocker: "web-pdb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var labels []string
			if tt.stuck {
				labels = append(labels, labelStuck)
			}
			blocked := fakePod("blocked", 30, labels...)
			other := fakePod("other", 30)
			critical := fakePod("critical", 30, labelCritical)
			c := newFakeCluster(t, blocked, other, critical)
			c.answer = func(pod *corev1.Pod, _ int) error {
				if pod.Name == "blocked" {
					return tt.refusal(pod.Name)
				}
				return nil
			}
			deadline := c.clock.Now().Add(tt.left)
			rec := &eventLog{}
			res, err := c.drainTo(drain.Options{Margin: margin, DeleteBlocked: tt.on, ForceDeleteAtDeadline: tt.force, Recorder: rec,
				Actions: drain.Actions{NodeGrace: tt.nodeGrace}},
				drain.Deadline{At: deadline, Enforced: tt.enforced})
			if (tt.wantErr == nil) != (err == nil) || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Drain error = %v, want %v", err, tt.wantErr)
			}
			if c.exists(other) {
				t.Error("the other pod is still there")
			}
			deletes := c.deletesOf("blocked")
			if tt.wantAt == 0 {
				for _, d := range deletes {
					if d.at.Before(deadline) {
						t.Errorf("blocked pod deleted at %v, %v before the deadline; want none before it", d.at, deadline.Sub(d.at))
					}
				}
				if !c.exists(blocked) && !tt.force {
					t.Error("blocked pod gone; want it left until the deadline")
				}
				if len(res.DeletedBlocked) != 0 || len(rec.events) != 0 {
					t.Errorf("DeletedBlocked %+v, Events %q; want none", res.DeletedBlocked, rec.events)
				}
				return
			}
			if len(deletes) != 1+tt.wantForce {
				t.Fatalf("blocked pod deleted %d times (%+v), want %d", len(deletes), deletes, 1+tt.wantForce)
			}
			d := deletes[0]
			// Up to a second early (blockedSlack); the fake clock moves a
			// second at a time.
			if before := deadline.Sub(d.at); before > tt.wantAt+time.Second || before < tt.wantAt-time.Second {
				t.Errorf("blocked pod deleted %v before the deadline, want %v", before, tt.wantAt)
			}
			if d.grace == nil || *d.grace != tt.wantGrace || d.uid != blocked.UID {
				t.Errorf("delete with grace %s, UID precondition %q; want %d s and %q", fmtGrace(d.grace), d.uid, tt.wantGrace, blocked.UID)
			}
			if tt.wantForce > 0 {
				if f := deletes[1]; f.grace == nil || *f.grace != 0 || f.at.Before(deadline) {
					t.Errorf("second delete %+v, want the force deletion (grace 0) at the deadline %v", f, deadline)
				}
				if res.ForceDeleted != 1 {
					t.Errorf("ForceDeleted = %d, want 1", res.ForceDeleted)
				}
			} else if c.exists(blocked) {
				t.Error("blocked pod still there")
			}
			if len(res.DeletedBlocked) != 1 || res.DeletedBlocked[0].Name != "blocked" || !strings.Contains(res.DeletedBlocked[0].Reason, tt.blocker) {
				t.Errorf("DeletedBlocked = %+v, want the pod naming %q", res.DeletedBlocked, tt.blocker)
			}
			if slices.Contains(res.Pods, "ns/blocked") {
				t.Errorf("Pods = %v: the blocked pod was deleted, not evicted", res.Pods)
			}
			if len(rec.events) != 2 || !strings.HasPrefix(rec.events[0], "Pod blocked Warning BlockedPodDeleted: ") ||
				!strings.HasPrefix(rec.events[1], "Node "+fakeNode+" Warning BlockedPodDeleted: ns/blocked: ") {
				t.Fatalf("Events %q, want BlockedPodDeleted on the pod and on the node", rec.events)
			}
			if !strings.Contains(rec.events[0], tt.blocker) || !strings.Contains(rec.events[0], fmt.Sprintf("grace period of %d s", tt.wantGrace)) {
				t.Errorf("Event %q does not name the blocker %q and the grace %d s", rec.events[0], tt.blocker, tt.wantGrace)
			}
		})
	}
}
