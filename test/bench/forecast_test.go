package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/forecast"
	"lifeboat.dev/lifeboat/internal/kube/clientset"
	"lifeboat.dev/lifeboat/test/testenv"
)

// The forecast benchmark's drains: each scene's node is drained to a
// deadline fcDeadline after the start, less fcMargin (--deadline-margin).
const (
	fcDeadline = 24 * time.Second
	fcMargin   = 2 * time.Second
)

// fcPod is a pod of a forecast scene. kwok runs no process: shutdown is
// how long the pod really takes to stop once asked (0: it lives until
// its grace ends), and a preStop hook is only read by the forecast (its
// sleep is counted in shutdown).
type fcPod struct {
	name     string
	grace    time.Duration
	shutdown time.Duration
	preStop  *corev1.LifecycleHandler
	critical bool // system-cluster-critical: drained after the others
	guarded  bool // covered by the scene's budget
}

// fcBudget is a scene's PodDisruptionBudget, minAvailable 1 over its
// guarded pods. With parked, one more pod it covers exists on a node no
// kubelet runs (Pending, not healthy: the budget waits for it);
// readyAfter, if positive, makes that pod Ready this long after the drain
// started (a replacement that comes), else it never is.
type fcBudget struct {
	parked     bool
	readyAfter time.Duration
}

type fcScene struct {
	name   string
	pods   []fcPod
	budget *fcBudget
}

func sleepHook(s int64) *corev1.LifecycleHandler {
	return &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: s}}
}

// execHook is a preStop exec hook: its length is unknown to the forecast.
var execHook = &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/drain-connections"}}}

// fcScenes are the benchmark's nodes: grace periods that fit the time
// left or not, shutdowns shorter than the grace (the usual case) or as
// long, preStop sleep and exec hooks, the drain order, and budgets closed
// for good or waiting for a replacement that comes or not.
var fcScenes = []fcScene{
	{name: "short-grace", pods: []fcPod{
		{name: "quick", grace: 5 * time.Second, shutdown: time.Second},
		{name: "own-grace", grace: 10 * time.Second}, // killed when its own grace ends, well before the deadline
	}},
	{name: "long-grace-quick-stop", pods: []fcPod{
		{name: "quick", grace: 120 * time.Second, shutdown: 2 * time.Second},
		{name: "exec-hook", grace: 120 * time.Second, shutdown: 5 * time.Second, preStop: execHook},
		{name: "short-sleep", grace: 60 * time.Second, shutdown: 8 * time.Second, preStop: sleepHook(8)},
	}},
	{name: "long-grace-slow-stop", pods: []fcPod{
		{name: "slow", grace: 120 * time.Second},
		{name: "long-sleep", grace: 120 * time.Second, shutdown: 40 * time.Second, preStop: sleepHook(40)},
		{name: "slow-exec", grace: 60 * time.Second, shutdown: 30 * time.Second, preStop: execHook},
	}},
	{name: "closed-budget", budget: &fcBudget{}, pods: []fcPod{
		{name: "guarded", grace: 30 * time.Second, shutdown: time.Second, guarded: true},
		{name: "critical", grace: 5 * time.Second, shutdown: time.Second, critical: true},
	}},
	{name: "budget-replacement-comes", budget: &fcBudget{parked: true, readyAfter: 5 * time.Second}, pods: []fcPod{
		{name: "guarded", grace: 30 * time.Second, shutdown: time.Second, guarded: true},
	}},
	{name: "budget-replacement-never", budget: &fcBudget{parked: true}, pods: []fcPod{
		{name: "guarded", grace: 30 * time.Second, shutdown: time.Second, guarded: true},
	}},
	{name: "critical-after-worst-case", pods: []fcPod{
		{name: "ordinary", grace: 30 * time.Second, shutdown: time.Second},
		{name: "critical", grace: 20 * time.Second, shutdown: time.Second, critical: true},
	}},
}

// fcSeen is what the benchmark saw of a pod: when its deletion started
// and ended by the API server's clock (deletionTimestamp, grace), and
// when it was gone.
type fcSeen struct {
	deletion *metav1.Time
	grace    int64 // deletionGracePeriodSeconds
	specSecs int64 // terminationGracePeriodSeconds
	goneAt   time.Time
}

// fcResult is one pod's forecast and what happened to it.
type fcResult struct {
	scene, pod string
	class      forecast.Class // of the pod: certain-miss, possible-miss or clear
	reason     forecast.Reason
	missed     bool
	how        string
}

// BenchmarkForecastPrecision runs the drain forecast (internal/forecast,
// fed as the controller feeds it: drain.ForecastSource) and the real drain
// (internal/drain, in this process) on the testbed's API server, kwok
// nodes and disruption controller, for the nodes of fcScenes at once, and
// compares each pod's forecast with what happened to it:
//
//   - missed: still on the node when the drain ended at its deadline, or
//     gone only when the grace period the drain had cut ran out (killed
//     mid-shutdown);
//   - made: gone on its own before that (or at its own, uncut grace).
//
// It reports the precision and recall of the certain misses (what warns
// now) and of every miss (the worst case, what warned before issue 23),
// per pod and per node. The figures describe these scenes, not a
// cluster's mix of pods: docs/benchmarks.md says what they show. Run with
//
//	flock /tmp/lifeboat-testbed.lock go test -run '^$' -bench ForecastPrecision -benchtime 1x ./test/bench/
func BenchmarkForecastPrecision(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := testenv.Start(b, testenv.Options{NoScheduler: true})
	client := clientset.New(env.Client)
	d := drain.New(client, clock.RealClock{}, slog.New(slog.NewTextHandler(io.Discard, nil)), drain.Options{Margin: fcMargin, Backoff: time.Second})
	src := drain.ForecastSource{Client: client}
	for i := 0; i < b.N; i++ {
		ns := env.Namespace(b)
		nodes, parked := fcSetUp(ctx, b, env, ns)
		seen := fcWatch(ctx, b, env, ns)

		start := time.Now()
		deadline := start.Add(fcDeadline)
		forecasts := make([]forecast.Forecast, len(fcScenes))
		drained := make([]drain.Result, len(fcScenes))
		errs := make([]error, len(fcScenes))
		var wg sync.WaitGroup
		for si, sc := range fcScenes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pods, pdbs, err := src.ForecastInputs(ctx, nodes[si])
				if err != nil {
					errs[si] = err
					return
				}
				forecasts[si] = forecast.For(forecast.Input{Now: time.Now(), Deadline: deadline, Margin: fcMargin, Pods: pods, PDBs: pdbs})
				drained[si], errs[si] = d.Drain(ctx, nodes[si], drain.Deadline{At: deadline}, nil)
			}()
			if p := parked[si]; p != "" && sc.budget.readyAfter > 0 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					time.Sleep(sc.budget.readyAfter)
					if err := fcMakeReady(ctx, env, ns, p); err != nil {
						b.Error(err)
					}
				}()
			}
		}
		wg.Wait()
		time.Sleep(2 * time.Second) // the informer's last deletions
		b.StopTimer()

		var results []fcResult
		for si, sc := range fcScenes {
			if errs[si] != nil && !errors.Is(errs[si], drain.ErrDeadline) {
				b.Fatalf("scene %s: %v", sc.name, errs[si])
			}
			b.Logf("scene %-26s forecast %-13s drain: evicted %d, grace cut %d, left %d, err %v", sc.name, forecasts[si].Class(),
				drained[si].Evicted, drained[si].GraceCapped, drained[si].Remaining, errs[si])
			for _, m := range forecasts[si].Misses {
				b.Logf("    forecast: %s", m)
			}
			for _, p := range sc.pods {
				results = append(results, fcOutcome(sc.name, p.name, forecasts[si], seen.get(p.name+"-"+sc.name)))
			}
		}
		for _, r := range results {
			b.Logf("%-26s %-12s %-13s %-21s missed=%-5v %s", r.scene, r.pod, r.class, r.reason, r.missed, r.how)
		}
		s := fcScore(results)
		b.Logf("pods: %d; missed %d; certain %d (right %d); worst case %d (right %d); clear but missed %d",
			s.pods, s.missed, s.certain, s.certainRight, s.worst, s.worstRight, s.clearMissed)
		b.Logf("nodes: %d; missed %d; certain %d (right %d); worst case %d (right %d)",
			s.nodes, s.nodesMissed, s.nodesCertain, s.nodesCertainRight, s.nodesWorst, s.nodesWorstRight)
		b.ReportMetric(ratio(s.certainRight, s.certain), "certain-precision")
		b.ReportMetric(ratio(s.certainRight, s.missed), "certain-recall")
		b.ReportMetric(ratio(s.worstRight, s.worst), "worstcase-precision")
		b.ReportMetric(ratio(s.worstRight, s.missed), "worstcase-recall")
		b.ReportMetric(ratio(s.nodesCertainRight, s.nodesCertain), "node-certain-precision")
		b.ReportMetric(ratio(s.nodesWorstRight, s.nodesWorst), "node-worstcase-precision")
		b.StartTimer()
	}
}

// fcSetUp creates a kwok node per scene with its pods and budget, and
// for budgets with a parked pod one node no kubelet runs. It returns the
// scenes' nodes and parked pods (by scene; "" for none).
func fcSetUp(ctx context.Context, b *testing.B, env *testenv.Env, ns string) (nodes, parked []string) {
	b.Helper()
	nodes, parked = make([]string, len(fcScenes)), make([]string, len(fcScenes))
	for si := range fcScenes {
		nodes[si] = env.Node(b, testenv.NodeSpec{}).Name
	}
	// The parking node: a Node object without kwok's annotation, so that
	// its pods stay Pending until the benchmark says they are Ready.
	parking, err := env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testenv.UniqueName("parking")}}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = env.Client.CoreV1().Nodes().Delete(context.Background(), parking.Name, metav1.DeleteOptions{})
	})
	g, gctx := errgroup.WithContext(ctx)
	for si, sc := range fcScenes {
		for _, p := range sc.pods {
			spec := testenv.PodSpec{Namespace: ns, Name: p.name + "-" + sc.name, Node: nodes[si], Grace: p.grace, ShutdownAfter: p.shutdown,
				PreStop: p.preStop, Labels: map[string]string{"scene": sc.name}}
			if p.critical {
				spec.PriorityClass = "system-cluster-critical"
			}
			if p.guarded {
				spec.Labels["guarded"] = sc.name
			}
			g.Go(func() error { _, err := env.CreatePod(gctx, spec); return err })
		}
		if sc.budget != nil && sc.budget.parked {
			parked[si] = "parked-" + sc.name
			g.Go(func() error {
				_, err := env.Client.CoreV1().Pods(ns).Create(gctx, &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: parked[si], Namespace: ns, Labels: map[string]string{"guarded": sc.name}},
					Spec:       corev1.PodSpec{NodeName: parking.Name, Containers: []corev1.Container{{Name: "app", Image: testenv.PauseImage}}},
				}, metav1.CreateOptions{})
				return err
			})
		}
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	one := intstr.FromInt32(1)
	for _, sc := range fcScenes {
		if sc.budget == nil {
			continue
		}
		if _, err := env.CreatePDB(ctx, testenv.PDBSpec{Namespace: ns, Name: sc.name, Selector: map[string]string{"guarded": sc.name}, MinAvailable: &one}); err != nil {
			b.Fatal(err)
		}
	}
	return nodes, parked
}

// fcMakeReady makes a parked pod Running and Ready, as a kubelet would.
func fcMakeReady(ctx context.Context, env *testenv.Env, ns, name string) error {
	p, err := env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	_, err = env.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}

// fcPods is what the benchmark saw of its pods, by name.
type fcPods struct {
	mu   sync.Mutex
	pods map[string]*fcSeen
}

func (s *fcPods) get(name string) *fcSeen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pods[name]
}

// fcWatch records the namespace's pods' deletions until ctx ends.
func fcWatch(ctx context.Context, b *testing.B, env *testenv.Env, ns string) *fcPods {
	b.Helper()
	s := &fcPods{pods: map[string]*fcSeen{}}
	record := func(obj any, gone bool) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			if t, tomb := obj.(cache.DeletedFinalStateUnknown); tomb {
				p, ok = t.Obj.(*corev1.Pod)
			}
			if !ok {
				return
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		e := s.pods[p.Name]
		if e == nil {
			e = &fcSeen{}
			s.pods[p.Name] = e
		}
		if p.Spec.TerminationGracePeriodSeconds != nil {
			e.specSecs = *p.Spec.TerminationGracePeriodSeconds
		}
		if p.DeletionTimestamp != nil && e.deletion == nil {
			e.deletion = p.DeletionTimestamp
			if p.DeletionGracePeriodSeconds != nil {
				e.grace = *p.DeletionGracePeriodSeconds
			}
		}
		if gone && e.goneAt.IsZero() {
			e.goneAt = time.Now()
		}
	}
	f := informers.NewSharedInformerFactoryWithOptions(env.Client, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { record(o, false) },
		UpdateFunc: func(_, o any) { record(o, false) },
		DeleteFunc: func(o any) { record(o, true) },
	}); err != nil {
		b.Fatal(err)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		b.Fatal("pod informer did not sync")
	}
	return s
}

// fcOutcome is a pod's forecast and what happened to it.
func fcOutcome(scene, pod string, f forecast.Forecast, seen *fcSeen) fcResult {
	r := fcResult{scene: scene, pod: pod, class: forecast.Clear}
	for _, m := range f.Misses {
		if m.Name == pod+"-"+scene {
			r.reason, r.class = m.Reason, forecast.PossibleMiss
			if m.Certain {
				r.class = forecast.CertainMiss
			}
		}
	}
	switch {
	case seen == nil || seen.goneAt.IsZero():
		r.missed, r.how = true, "on the node at the deadline"
	case seen.deletion == nil:
		r.how = "gone without a deletion seen"
	case seen.grace < seen.specSecs && !seen.goneAt.Before(seen.deletion.Add(-500*time.Millisecond)):
		r.missed, r.how = true, fmt.Sprintf("killed when its grace, cut from %ds to %ds, ran out", seen.specSecs, seen.grace)
	default:
		left := seen.deletion.Sub(seen.goneAt).Round(100 * time.Millisecond)
		r.how = fmt.Sprintf("gone %s before its deletion deadline (grace %ds of %ds)", left, seen.grace, seen.specSecs)
	}
	return r
}

// fcScores counts forecasts against outcomes, per pod and per node.
type fcScores struct {
	pods, missed, certain, certainRight, worst, worstRight, clearMissed              int
	nodes, nodesMissed, nodesCertain, nodesCertainRight, nodesWorst, nodesWorstRight int
}

// fcScore scores results: a node missed when one of its pods did, and
// was forecast as its gravest pod.
func fcScore(results []fcResult) fcScores {
	var s fcScores
	type node struct {
		class  forecast.Class
		missed bool
	}
	nodes := map[string]*node{}
	var order []string
	rank := map[forecast.Class]int{forecast.Clear: 0, forecast.PossibleMiss: 1, forecast.CertainMiss: 2}
	for _, r := range results {
		s.pods++
		n := nodes[r.scene]
		if n == nil {
			n = &node{class: forecast.Clear}
			nodes[r.scene] = n
			order = append(order, r.scene)
		}
		if rank[r.class] > rank[n.class] {
			n.class = r.class
		}
		n.missed = n.missed || r.missed
		if r.missed {
			s.missed++
		}
		switch r.class {
		case forecast.CertainMiss:
			s.certain++
			s.worst++
			if r.missed {
				s.certainRight++
				s.worstRight++
			}
		case forecast.PossibleMiss:
			s.worst++
			if r.missed {
				s.worstRight++
			}
		default:
			if r.missed {
				s.clearMissed++
			}
		}
	}
	for _, name := range order {
		n := nodes[name]
		s.nodes++
		if n.missed {
			s.nodesMissed++
		}
		if n.class != forecast.Clear {
			s.nodesWorst++
			if n.missed {
				s.nodesWorstRight++
			}
		}
		if n.class == forecast.CertainMiss {
			s.nodesCertain++
			if n.missed {
				s.nodesCertainRight++
			}
		}
	}
	return s
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// fcOutcome tells a pod killed when the grace the drain cut ran out from
// one that stopped on its own, or at its own grace.
func TestFcOutcome(t *testing.T) {
	at := time.Date(2026, 11, 25, 6, 0, 20, 0, time.UTC)
	del := metav1.NewTime(at)
	f := forecast.Forecast{Misses: []forecast.Miss{{Name: "a-s", Reason: forecast.PDBBlocks, Certain: true}, {Name: "b-s", Reason: forecast.GraceExceedsTimeLeft}}}
	tests := []struct {
		pod        string
		seen       *fcSeen
		wantClass  forecast.Class
		wantMissed bool
	}{
		{pod: "a", wantClass: forecast.CertainMiss, wantMissed: true}, // never gone
		{pod: "b", seen: &fcSeen{deletion: &del, grace: 18, specSecs: 60, goneAt: at.Add(-300 * time.Millisecond)}, wantClass: forecast.PossibleMiss, wantMissed: true},
		{pod: "b", seen: &fcSeen{deletion: &del, grace: 18, specSecs: 60, goneAt: at.Add(-15 * time.Second)}, wantClass: forecast.PossibleMiss},
		{pod: "c", seen: &fcSeen{deletion: &del, grace: 10, specSecs: 10, goneAt: at}, wantClass: forecast.Clear}, // its own grace
	}
	for _, tt := range tests {
		r := fcOutcome("s", tt.pod, f, tt.seen)
		if r.class != tt.wantClass || r.missed != tt.wantMissed {
			t.Errorf("%s %+v: class %s missed %v (%s), want %s missed %v", tt.pod, tt.seen, r.class, r.missed, r.how, tt.wantClass, tt.wantMissed)
		}
	}
	s := fcScore([]fcResult{{scene: "x", class: forecast.CertainMiss, missed: true}, {scene: "x", class: forecast.PossibleMiss},
		{scene: "y", class: forecast.PossibleMiss}, {scene: "z", class: forecast.Clear, missed: true}})
	want := fcScores{pods: 4, missed: 2, certain: 1, certainRight: 1, worst: 3, worstRight: 1, clearMissed: 1,
		nodes: 3, nodesMissed: 2, nodesCertain: 1, nodesCertainRight: 1, nodesWorst: 2, nodesWorstRight: 1}
	if s != want {
		t.Errorf("scores %+v, want %+v", s, want)
	}
}
