package forecast

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var now = time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)

type podOpt func(*corev1.Pod)

func pod(name string, opts ...podOpt) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func grace(s int64) podOpt { return func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = &s } }
func app(a string) podOpt  { return func(p *corev1.Pod) { p.Labels = map[string]string{"app": a} } }
func critical() podOpt {
	return func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" }
}
func inNamespace(ns string) podOpt { return func(p *corev1.Pod) { p.Namespace = ns } }
func preStop() podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 20}}}
	}
}
func terminatingUntil(d time.Duration) podOpt {
	return func(p *corev1.Pod) { t := metav1.NewTime(now.Add(d)); p.DeletionTimestamp = &t }
}

func pdb(name, app string, allowed int32) policyv1.PodDisruptionBudget {
	return policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
		Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed}}
}

// missed is a Miss without its detail, for comparison.
type missed struct {
	Name   string
	Reason Reason
}

func TestFor(t *testing.T) {
	spot := now.Add(2 * time.Minute)
	tests := []struct {
		name        string
		deadline    time.Time
		margin      time.Duration
		pods        []corev1.Pod
		pdbs        []policyv1.PodDisruptionBudget
		want        []missed
		wantEmpty   time.Duration
		wantBounded bool
		// deleteBlocked: blocked pods are deleted before the (enforced)
		// deadline (issue 25 item 2).
		deleteBlocked bool
		nodeGrace     time.Duration
	}{
		{name: "nothing to drain", deadline: spot, wantBounded: true},
		{name: "default grace fits the Spot notice", deadline: spot, pods: []corev1.Pod{pod("web"), pod("api", grace(60))},
			wantEmpty: 60 * time.Second, wantBounded: true},
		{name: "grace longer than the notice", deadline: spot, pods: []corev1.Pod{pod("web"), pod("batch", grace(600), preStop())},
			want: []missed{{"batch", GraceExceedsTimeLeft}}, wantEmpty: 2 * time.Minute, wantBounded: true}, // cut to the deadline
		{name: "the margin counts", deadline: spot, margin: 5 * time.Second, pods: []corev1.Pod{pod("web", grace(118))},
			want: []missed{{"web", GraceExceedsTimeLeft}}, wantEmpty: 115 * time.Second, wantBounded: true},
		{name: "PDB allowing nothing blocks its pod and the critical group after it", deadline: spot,
			pods: []corev1.Pod{pod("db"), pod("web"), pod("dns", critical())}, pdbs: []policyv1.PodDisruptionBudget{pdb("db", "db", 0)},
			want: []missed{{"db", PDBBlocks}, {"dns", OrderedTooLate}}},
		{name: "blocked pods deleted before the deadline: the PDB's pod leaves by it, its grace whole; the critical group after it is late",
			deadline: spot, margin: 5 * time.Second, deleteBlocked: true,
			pods: []corev1.Pod{pod("db"), pod("web"), pod("dns", critical())}, pdbs: []policyv1.PodDisruptionBudget{pdb("db", "db", 0)},
			want: []missed{{"dns", OrderedTooLate}}, wantEmpty: 116 * time.Second, wantBounded: true},
		{name: "blocked pods deleted, the grace longer than the time left: cut", deadline: spot, deleteBlocked: true,
			pods: []corev1.Pod{pod("db", grace(600), preStop())}, pdbs: []policyv1.PodDisruptionBudget{pdb("db", "db", 0)},
			want: []missed{{"db", GraceExceedsTimeLeft}}, wantEmpty: 2 * time.Minute, wantBounded: true},
		{name: "blocked pods deleted only while the drain runs: --node-grace-period ends it first", deadline: spot, margin: 5 * time.Second, deleteBlocked: true,
			nodeGrace: 30 * time.Second, pods: []corev1.Pod{pod("db")}, pdbs: []policyv1.PodDisruptionBudget{pdb("db", "db", 0)},
			want: []missed{{"db", PDBBlocks}}},
		{name: "PDB allowing one lets the first pod go and blocks the second", deadline: spot,
			pods: []corev1.Pod{pod("db-0", app("db")), pod("db-1", app("db"))}, pdbs: []policyv1.PodDisruptionBudget{pdb("db", "db", 1)},
			want: []missed{{"db-1", PDBBlocks}}},
		{name: "PDB allowing two is enough", deadline: spot,
			pods: []corev1.Pod{pod("db-0", app("db")), pod("db-1", app("db"))}, pdbs: []policyv1.PodDisruptionBudget{pdb("db", "db", 2)},
			wantEmpty: 30 * time.Second, wantBounded: true},
		{name: "PDB of another namespace does not cover", deadline: spot,
			pods: []corev1.Pod{pod("db", inNamespace("other"))}, pdbs: []policyv1.PodDisruptionBudget{pdb("db", "db", 0)},
			wantEmpty: 30 * time.Second, wantBounded: true},
		{name: "critical pod ordered after a long grace", deadline: spot,
			pods: []corev1.Pod{pod("worker", grace(90)), pod("dns", critical(), grace(60))},
			want: []missed{{"dns", OrderedTooLate}}, wantEmpty: 120 * time.Second, wantBounded: true},
		{name: "critical pod fits after the others", deadline: spot,
			pods: []corev1.Pod{pod("worker", grace(60)), pod("dns", critical(), grace(30))}, wantEmpty: 90 * time.Second, wantBounded: true},
		{name: "terminating pod counts until its deletion timestamp", deadline: spot,
			pods: []corev1.Pod{pod("web", terminatingUntil(20*time.Second)), pod("db", terminatingUntil(3*time.Minute))},
			pdbs: []policyv1.PodDisruptionBudget{pdb("db", "db", 0)},
			want: []missed{{"db", GraceExceedsTimeLeft}}, wantEmpty: 3 * time.Minute, wantBounded: true},
		{name: "deadline already passed", deadline: now.Add(-time.Second), pods: []corev1.Pod{pod("web", grace(1))},
			want: []missed{{"web", GraceExceedsTimeLeft}}, wantEmpty: time.Second, wantBounded: true},
		{name: "no deadline: grace periods are not cut", pods: []corev1.Pod{pod("batch", grace(3600))},
			wantEmpty: time.Hour, wantBounded: true},
		{name: "no deadline: nothing misses, a PDB still unbounds", pods: []corev1.Pod{pod("db"), pod("batch", grace(3600))},
			pdbs: []policyv1.PodDisruptionBudget{pdb("db", "db", 0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := For(Input{Now: now, Deadline: tt.deadline, Margin: tt.margin, Pods: tt.pods, PDBs: tt.pdbs, DeleteBlocked: tt.deleteBlocked, NodeGrace: tt.nodeGrace})
			var got []missed
			for _, m := range f.Misses {
				if m.Namespace == "" || m.Detail == "" {
					t.Errorf("miss without namespace or detail: %+v", m)
				}
				got = append(got, missed{m.Name, m.Reason})
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("misses (-want +got):\n%s", d)
			}
			if f.Missed() != (len(tt.want) > 0) {
				t.Errorf("Missed() = %v", f.Missed())
			}
			if f.Bounded != tt.wantBounded || f.ToEmpty != tt.wantEmpty {
				t.Errorf("to empty = %v bounded %v, want %v bounded %v", f.ToEmpty, f.Bounded, tt.wantEmpty, tt.wantBounded)
			}
			if f.Pods != len(tt.pods) {
				t.Errorf("pods = %d, want %d", f.Pods, len(tt.pods))
			}
		})
	}
}

// The budgets given are not changed: the forecast counts disruptions on a copy.
func TestForKeepsInput(t *testing.T) {
	pdbs := []policyv1.PodDisruptionBudget{pdb("db", "db", 1)}
	For(Input{Now: now, Deadline: now.Add(time.Minute), Pods: []corev1.Pod{pod("db")}, PDBs: pdbs})
	if pdbs[0].Status.DisruptionsAllowed != 1 {
		t.Fatalf("DisruptionsAllowed changed to %d", pdbs[0].Status.DisruptionsAllowed)
	}
}

func TestPDBDetail(t *testing.T) {
	pdbs := []policyv1.PodDisruptionBudget{pdb("db", "db", 1), pdb("all-db", "db", 0)}
	f := For(Input{Now: now, Deadline: now.Add(2 * time.Minute), Pods: []corev1.Pod{pod("db-0", app("db"))}, PDBs: pdbs[:1]})
	if len(f.Misses) != 0 {
		t.Fatalf("misses %v, want none", f.Misses)
	}
	f = For(Input{Now: now, Deadline: now.Add(2 * time.Minute), Pods: []corev1.Pod{pod("db-0", app("db")), pod("db-1", app("db"))}, PDBs: pdbs})
	want := "shop/db-0 (PDBBlocks: PodDisruptionBudget all-db allows no disruption)"
	want1 := "shop/db-1 (PDBBlocks: PodDisruptionBudget all-db allows no disruption)"
	if len(f.Misses) != 2 || f.Misses[0].String() != want || f.Misses[1].String() != want1 {
		t.Fatalf("misses = %v", f.Misses)
	}
	f = For(Input{Now: now, Deadline: now.Add(2 * time.Minute), Pods: []corev1.Pod{pod("db-0", app("db")), pod("db-1", app("db"))}, PDBs: pdbs[:1]})
	want = "shop/db-1 (PDBBlocks: PodDisruptionBudget db allows 1 disruptions now for 2 of its pods on this node: 1 of them (whichever are evicted last) wait for replacements to become ready)"
	if len(f.Misses) != 1 || f.Misses[0].String() != want {
		t.Fatalf("misses = %v, want [%s]", f.Misses, want)
	}
}

func TestMissDetail(t *testing.T) {
	f := For(Input{Now: now, Deadline: now.Add(2 * time.Minute), Pods: []corev1.Pod{pod("batch", grace(300), preStop())}})
	want := "shop/batch (GraceExceedsTimeLeft: grace period 5m0s, 2m0s left before the deadline: its preStop hook is cut short)"
	if len(f.Misses) != 1 || f.Misses[0].String() != want {
		t.Fatalf("misses = %v, want [%s]", f.Misses, want)
	}
}

// Issue 22, defect 10: the forecast works with the grace the drain gives:
// --pod-grace-period replaces each pod's own (never below 1 s, as the
// drain's evictions), and --node-grace-period caps the drain's deadline at
// that long after the drain started. Before the fix both were ignored: a
// pod whose own grace exceeds the notice was reported although the drain
// asks for less (a false warning), and pods the drain cuts to fit the
// pod or node grace were not reported (missing warnings).
func TestForUsesTheDrainsGrace(t *testing.T) {
	spot := now.Add(2 * time.Minute)
	tests := []struct {
		name       string
		deadline   time.Time
		margin     time.Duration
		podGrace   time.Duration
		nodeGrace  time.Duration
		started    time.Duration // before now
		pods       []corev1.Pod
		want       []missed
		wantEmpty  time.Duration
		wantDetail string // in the first miss's detail
	}{
		{name: "--pod-grace-period shorter than a pod's own: it fits", deadline: spot, podGrace: 30 * time.Second,
			pods: []corev1.Pod{pod("batch", grace(600), preStop())}, wantEmpty: 30 * time.Second},
		{name: "--pod-grace-period below a second: 1 s, as the drain asks", deadline: spot, podGrace: 500 * time.Millisecond,
			pods: []corev1.Pod{pod("batch", grace(600))}, wantEmpty: time.Second},
		{name: "--pod-grace-period longer than the notice", deadline: spot, podGrace: 5 * time.Minute,
			pods: []corev1.Pod{pod("web", grace(30))}, want: []missed{{"web", GraceExceedsTimeLeft}}, wantEmpty: 2 * time.Minute,
			wantDetail: "grace period 5m0s (--pod-grace-period)"},
		{name: "--pod-grace-period orders the critical pod too late", deadline: spot, podGrace: 90 * time.Second,
			pods: []corev1.Pod{pod("worker", grace(10)), pod("dns", critical(), grace(10))}, want: []missed{{"dns", OrderedTooLate}}, wantEmpty: 2 * time.Minute},
		{name: "--node-grace-period before AWS's deadline cuts a pod that fits the notice", deadline: spot, nodeGrace: time.Minute,
			pods: []corev1.Pod{pod("web", grace(90))}, want: []missed{{"web", GraceExceedsTimeLeft}}, wantEmpty: time.Minute,
			wantDetail: "--node-grace-period"},
		{name: "--node-grace-period counts from the drain's start", deadline: spot, nodeGrace: time.Minute, started: 30 * time.Second,
			pods: []corev1.Pod{pod("web", grace(45))}, want: []missed{{"web", GraceExceedsTimeLeft}}, wantEmpty: 30 * time.Second},
		{name: "--node-grace-period less the margin", deadline: spot, margin: 5 * time.Second, nodeGrace: time.Minute,
			pods: []corev1.Pod{pod("web", grace(58))}, want: []missed{{"web", GraceExceedsTimeLeft}}, wantEmpty: 55 * time.Second},
		{name: "--node-grace-period after AWS's deadline changes nothing", deadline: spot, nodeGrace: 10 * time.Minute,
			pods: []corev1.Pod{pod("web", grace(60))}, wantEmpty: time.Minute},
		{name: "--node-grace-period without an AWS deadline is the drain's deadline", nodeGrace: time.Minute,
			pods: []corev1.Pod{pod("batch", grace(120))}, want: []missed{{"batch", GraceExceedsTimeLeft}}, wantEmpty: time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := For(Input{Now: now, Deadline: tt.deadline, Margin: tt.margin, Pods: tt.pods,
				PodGrace: tt.podGrace, NodeGrace: tt.nodeGrace, Started: now.Add(-tt.started)})
			var got []missed
			for _, m := range f.Misses {
				got = append(got, missed{m.Name, m.Reason})
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("misses (-want +got):\n%s", d)
			}
			if !f.Bounded || f.ToEmpty != tt.wantEmpty {
				t.Errorf("to empty = %v bounded %v, want %v bounded", f.ToEmpty, f.Bounded, tt.wantEmpty)
			}
			if tt.wantDetail != "" && (len(f.Misses) == 0 || !strings.Contains(f.Misses[0].Detail, tt.wantDetail)) {
				t.Errorf("misses %v, want the first one's detail to contain %q", f.Misses, tt.wantDetail)
			}
		})
	}
}

func ready() podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
}
func sleepFor(s int64) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: s}}}
	}
}
func execPreStop() podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "600"}}}}
	}
}

// healthy sets a budget's status: healthy of expected pods are healthy.
func healthy(b policyv1.PodDisruptionBudget, healthy, expected int32) policyv1.PodDisruptionBudget {
	b.Status.CurrentHealthy, b.Status.ExpectedPods = healthy, expected
	return b
}

// Issue 23 item 6: the worst case names every pod that may miss; a miss is
// certain only when the pod cannot be gone before the deadline whatever
// it does.
func TestForCertainty(t *testing.T) {
	spot := now.Add(2 * time.Minute)
	type certain struct {
		Name    string
		Reason  Reason
		Certain bool
	}
	stale := healthy(pdb("db", "db", 0), 1, 1)
	stale.Generation = 2
	stale.Status.ObservedGeneration = 1
	tests := []struct {
		name      string
		podGrace  time.Duration
		pods      []corev1.Pod
		pdbs      []policyv1.PodDisruptionBudget
		want      []certain
		wantClass Class
	}{
		{name: "nothing misses", pods: []corev1.Pod{pod("web", ready())}, wantClass: Clear},
		{name: "budget closed, every expected pod healthy: certain", pods: []corev1.Pod{pod("db", ready())},
			pdbs: []policyv1.PodDisruptionBudget{healthy(pdb("db", "db", 0), 1, 1)}, want: []certain{{"db", PDBBlocks, true}}, wantClass: CertainMiss},
		{name: "budget closed, a replacement on its way: possible", pods: []corev1.Pod{pod("db", ready())},
			pdbs: []policyv1.PodDisruptionBudget{healthy(pdb("db", "db", 0), 1, 2)}, want: []certain{{"db", PDBBlocks, false}}, wantClass: PossibleMiss},
		{name: "budget closed, pod not Ready (may be evicted as unhealthy): possible", pods: []corev1.Pod{pod("db")},
			pdbs: []policyv1.PodDisruptionBudget{healthy(pdb("db", "db", 0), 1, 1)}, want: []certain{{"db", PDBBlocks, false}}, wantClass: PossibleMiss},
		{name: "budget status not yet observed: possible", pods: []corev1.Pod{pod("db", ready())},
			pdbs: []policyv1.PodDisruptionBudget{stale}, want: []certain{{"db", PDBBlocks, false}}, wantClass: PossibleMiss},
		{name: "budget allowing one for two pods: the replacement of the first may free one: possible",
			pods: []corev1.Pod{pod("db-0", app("db"), ready()), pod("db-1", app("db"), ready())},
			pdbs: []policyv1.PodDisruptionBudget{healthy(pdb("db", "db", 1), 2, 2)}, want: []certain{{"db-1", PDBBlocks, false}}, wantClass: PossibleMiss},
		{name: "two budgets, one closed for good: certain", pods: []corev1.Pod{pod("db", ready())},
			pdbs: []policyv1.PodDisruptionBudget{healthy(pdb("db", "db", 0), 1, 2), healthy(pdb("all", "db", 0), 3, 3)},
			want: []certain{{"db", PDBBlocks, true}}, wantClass: CertainMiss},
		{name: "grace longer than the notice, no hook: possible (it may stop sooner)", pods: []corev1.Pod{pod("batch", grace(600))},
			want: []certain{{"batch", GraceExceedsTimeLeft, false}}, wantClass: PossibleMiss},
		{name: "preStop sleep longer than the time left: certain", pods: []corev1.Pod{pod("batch", grace(600), sleepFor(300))},
			want: []certain{{"batch", GraceExceedsTimeLeft, true}}, wantClass: CertainMiss},
		{name: "preStop sleep that fits: possible", pods: []corev1.Pod{pod("batch", grace(600), sleepFor(60))},
			want: []certain{{"batch", GraceExceedsTimeLeft, false}}, wantClass: PossibleMiss},
		{name: "preStop exec of unknown length: possible", pods: []corev1.Pod{pod("batch", grace(600), execPreStop())},
			want: []certain{{"batch", GraceExceedsTimeLeft, false}}, wantClass: PossibleMiss},
		{name: "preStop sleep longer than the time left, cut by its own grace that fits: clear",
			pods: []corev1.Pod{pod("batch", grace(60), sleepFor(300))}, wantClass: Clear},
		{name: "--pod-grace-period longer than the notice and a long preStop sleep: certain", podGrace: 5 * time.Minute,
			pods: []corev1.Pod{pod("web", sleepFor(150))}, want: []certain{{"web", GraceExceedsTimeLeft, true}}, wantClass: CertainMiss},
		{name: "--pod-grace-period that fits: the long preStop sleep is cut by it, not by the deadline", podGrace: time.Minute,
			pods: []corev1.Pod{pod("web", grace(600), sleepFor(150))}, wantClass: Clear},
		{name: "ordered too late behind a worst case: possible",
			pods: []corev1.Pod{pod("worker", grace(90)), pod("dns", critical(), grace(60))},
			want: []certain{{"dns", OrderedTooLate, false}}, wantClass: PossibleMiss},
		{name: "ordered too late behind a pod whose preStop sleep cannot be shorter: certain",
			pods: []corev1.Pod{pod("worker", grace(90), sleepFor(90)), pod("dns", critical(), grace(60), sleepFor(60))},
			want: []certain{{"dns", OrderedTooLate, true}}, wantClass: CertainMiss},
		{name: "ordered behind a certain block: certain",
			pods: []corev1.Pod{pod("db", ready()), pod("dns", critical())}, pdbs: []policyv1.PodDisruptionBudget{healthy(pdb("db", "db", 0), 1, 1)},
			want: []certain{{"db", PDBBlocks, true}, {"dns", OrderedTooLate, true}}, wantClass: CertainMiss},
		{name: "ordered behind a possible block: possible",
			pods: []corev1.Pod{pod("db", ready()), pod("dns", critical())}, pdbs: []policyv1.PodDisruptionBudget{healthy(pdb("db", "db", 0), 1, 2)},
			want: []certain{{"db", PDBBlocks, false}, {"dns", OrderedTooLate, false}}, wantClass: PossibleMiss},
		{name: "already terminating past the deadline, preStop sleep or not: possible",
			pods: []corev1.Pod{pod("web", terminatingUntil(5*time.Minute), sleepFor(300))},
			want: []certain{{"web", GraceExceedsTimeLeft, false}}, wantClass: PossibleMiss},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := For(Input{Now: now, Deadline: spot, Pods: tt.pods, PDBs: tt.pdbs, PodGrace: tt.podGrace})
			var got []certain
			for _, m := range f.Misses {
				got = append(got, certain{m.Name, m.Reason, m.Certain})
				if m.Certain != strings.Contains(m.Detail, "; certain: ") {
					t.Errorf("detail %q of a miss certain=%v", m.Detail, m.Certain)
				}
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("misses (-want +got):\n%s", d)
			}
			if c := f.Class(); c != tt.wantClass {
				t.Errorf("class = %s, want %s", c, tt.wantClass)
			}
			n := 0
			for _, w := range tt.want {
				if w.Certain {
					n++
				}
			}
			if len(f.CertainMisses()) != n {
				t.Errorf("certain misses = %v, want %d", f.CertainMisses(), n)
			}
		})
	}
}

func TestCertainDetail(t *testing.T) {
	f := For(Input{Now: now, Deadline: now.Add(2 * time.Minute), Pods: []corev1.Pod{pod("db", ready())},
		PDBs: []policyv1.PodDisruptionBudget{healthy(pdb("db", "db", 0), 1, 1)}})
	want := "shop/db (PDBBlocks: PodDisruptionBudget db allows no disruption; certain: PodDisruptionBudget db allows no disruption and 1 of the 1 pods it expects are healthy: no replacement can free one)"
	if len(f.Misses) != 1 || f.Misses[0].String() != want {
		t.Fatalf("misses = %v, want [%s]", f.Misses, want)
	}
	f = For(Input{Now: now, Deadline: now.Add(2 * time.Minute), Pods: []corev1.Pod{pod("batch", grace(600), sleepFor(300))}})
	want = "shop/batch (GraceExceedsTimeLeft: grace period 10m0s, 2m0s left before the deadline: its preStop hook is cut short; certain: its preStop hook sleeps 5m0s, longer than the 2m0s it can have)"
	if len(f.Misses) != 1 || f.Misses[0].String() != want {
		t.Fatalf("misses = %v, want [%s]", f.Misses, want)
	}
}
