package drain_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/test/testenv"
)

// env is one real control plane (etcd, kube-apiserver, controller-manager,
// kwok) shared by this package's tests; each test uses its own nodes and
// namespace.
var env *testenv.Env

// client is the drainer's: lifeboat's own REST client (kube.REST) in
// protobuf, as lifeboat runs it, against the real API server.
var client *kube.REST

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	var err error
	env, err = testenv.New(ctx, testenv.Options{NoScheduler: true})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the test environment:", err)
		os.Exit(1)
	}
	if client, err = kube.NewREST(protobufConfig()); err != nil {
		fmt.Fprintln(os.Stderr, "kubernetes client:", err)
		env.Close()
		os.Exit(1)
	}
	code := m.Run()
	if code != 0 {
		env.DumpLogs(os.Stderr, 30)
	}
	env.Close()
	os.Exit(code)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newDrainer(o drain.Options) *drain.Drainer {
	if o.Backoff == 0 {
		o.Backoff = 200 * time.Millisecond
	}
	return drain.New(client, clock.RealClock{}, quiet, o)
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func newNode(t *testing.T) string {
	t.Helper()
	return env.Node(t, testenv.NodeSpec{}).Name
}

func newPod(t *testing.T, ctx context.Context, spec testenv.PodSpec) *corev1.Pod {
	t.Helper()
	p, err := env.CreatePod(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func podExists(t *testing.T, ctx context.Context, p *corev1.Pod) bool {
	t.Helper()
	got, err := env.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	return got.UID == p.UID
}

func TestDrainEvictsAndWaits(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, 2*time.Minute)
	ns := env.Namespace(t)
	node := newNode(t)
	app := newPod(t, ctx, testenv.PodSpec{Namespace: ns, Node: node, Grace: 30 * time.Second, ShutdownAfter: 2 * time.Second, OwnerKind: testenv.OwnerReplicaSet})
	critical := newPod(t, ctx, testenv.PodSpec{Namespace: ns, Node: node, ShutdownAfter: time.Second, PriorityClass: "system-cluster-critical"})
	ds := newPod(t, ctx, testenv.PodSpec{Namespace: ns, Node: node, OwnerKind: testenv.OwnerDaemonSet})
	self := newPod(t, ctx, testenv.PodSpec{Namespace: ns, Node: node, Name: "lifeboat-self"})

	d := newDrainer(drain.Options{Skip: func(p *corev1.Pod) bool { return p.Name == "lifeboat-self" }})
	// Watch the namespace: when the ordinary pod was gone, and when the
	// critical pod's deletion started.
	w, err := env.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var appGone, criticalDeleting time.Time
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			switch {
			case p.Name == app.Name && ev.Type == watch.Deleted && appGone.IsZero():
				appGone = time.Now()
			case p.Name == critical.Name && p.DeletionTimestamp != nil && criticalDeleting.IsZero():
				criticalDeleting = time.Now()
			}
		}
	}()
	var mu sync.Mutex
	var progress []drain.Progress
	start := time.Now()
	res, err := d.Drain(ctx, node, drain.Deadline{}, func(p drain.Progress) { mu.Lock(); progress = append(progress, p); mu.Unlock() })
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if res.Evicted != 2 || res.Remaining != 0 || res.GraceCapped != 0 {
		t.Errorf("result = %+v, want 2 evicted", res)
	}
	if podExists(t, ctx, app) || podExists(t, ctx, critical) {
		t.Error("evicted pods still exist after Drain returned")
	}
	if !podExists(t, ctx, ds) {
		t.Error("DaemonSet pod was evicted")
	}
	if !podExists(t, ctx, self) {
		t.Error("lifeboat's own pod was evicted")
	}
	// Ordinary pod first, then the critical one: the critical pod's
	// eviction starts only once the ordinary pod is gone. (The drain's
	// length says little: kwok ends each shutdown up to 1 s early, since
	// deletionTimestamp has whole seconds.)
	w.Stop()
	<-watched
	if appGone.IsZero() || criticalDeleting.IsZero() || criticalDeleting.Before(appGone) {
		t.Errorf("ordinary pod gone at %v, critical pod's deletion started at %v (drain took %v); priority groups should run one after the other",
			appGone, criticalDeleting, took)
	}
	mu.Lock()
	first, last := progress[0], progress[len(progress)-1]
	mu.Unlock()
	// Progress is reported as soon as the drain starts (lifeboat's Draining
	// Event), not only when a pod is gone.
	if first.Total != 2 || first.Gone != 0 {
		t.Errorf("first progress = %+v, want 0/2 gone", first)
	}
	// Every report carries the pods the drain listed to evict (the drain
	// forecast starts from them): the two, not the DaemonSet's nor
	// lifeboat's own.
	if len(first.Pods) != 2 || len(last.Pods) != 2 {
		t.Errorf("progress pods: first %d, last %d; want the 2 listed to evict", len(first.Pods), len(last.Pods))
	}
	if last.Total != 2 || last.Gone != 2 {
		t.Errorf("last progress = %+v, want 2/2 gone", last)
	}
}

func TestDrainPDBBacksOff(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, 2*time.Minute)
	ns := env.Namespace(t)
	node := newNode(t)
	p := newPod(t, ctx, testenv.PodSpec{Namespace: ns, Node: node, Labels: map[string]string{"app": "guarded"}, ShutdownAfter: time.Second})
	if _, err := env.CreatePDB(ctx, testenv.PDBSpec{Namespace: ns, Name: "guard", Selector: map[string]string{"app": "guarded"}, MinAvailable: ptr(intstr.FromInt32(1))}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitPDB(ctx, ns, "guard", func(pdb *policyPDB) bool { return pdb.Status.ObservedGeneration >= 1 && pdb.Status.ExpectedPods == 1 }); err != nil {
		t.Fatal(err)
	}
	d := newDrainer(drain.Options{Backoff: 300 * time.Millisecond})
	var blocked int
	var mu sync.Mutex
	done := make(chan error, 1)
	go func() {
		_, err := d.Drain(ctx, node, drain.Deadline{}, func(pr drain.Progress) { mu.Lock(); blocked = pr.Blocked; mu.Unlock() })
		done <- err
	}()
	// The PDB holds: several refusals, spaced by the backoff (no hot loop).
	time.Sleep(2 * time.Second)
	mu.Lock()
	b := blocked
	mu.Unlock()
	if b < 3 || b > 10 {
		t.Errorf("blocked %d times in 2 s with a 300 ms backoff; want 3..10", b)
	}
	if !podExists(t, ctx, p) {
		t.Fatal("pod evicted despite its PDB")
	}
	// Lifting the PDB lets the drain finish.
	if err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, "guard", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Drain: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("drain did not finish after the PDB was removed")
	}
}

func TestDrainDeadline(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		force     bool
		pdb       bool
		wantErr   bool
		wantForce int
	}{
		{name: "grace capped to the deadline", wantErr: false},
		{name: "PDB until the deadline, then left", pdb: true, wantErr: true},
		{name: "PDB until the deadline, then force-deleted", pdb: true, force: true, wantForce: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t, 2*time.Minute)
			ns := env.Namespace(t)
			node := newNode(t)
			// Grace 120 s, no shutdown annotation: the pod lives until its deadline.
			p := newPod(t, ctx, testenv.PodSpec{Namespace: ns, Node: node, Grace: 120 * time.Second, Labels: map[string]string{"app": "slow"}})
			if tt.pdb {
				if _, err := env.CreatePDB(ctx, testenv.PDBSpec{Namespace: ns, Name: "guard", Selector: map[string]string{"app": "slow"}, MinAvailable: ptr(intstr.FromInt32(1))}); err != nil {
					t.Fatal(err)
				}
				if _, err := env.WaitPDB(ctx, ns, "guard", func(pdb *policyPDB) bool { return pdb.Status.ObservedGeneration >= 1 && pdb.Status.ExpectedPods == 1 }); err != nil {
					t.Fatal(err)
				}
			}
			d := newDrainer(drain.Options{Margin: time.Second, ForceDeleteAtDeadline: tt.force, Backoff: 500 * time.Millisecond})
			start := time.Now()
			deadline := start.Add(5 * time.Second)
			res, err := d.Drain(ctx, node, drain.Deadline{At: deadline}, nil)
			took := time.Since(start)
			if tt.wantErr != (err != nil) {
				t.Fatalf("Drain err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, drain.ErrDeadline) {
				t.Fatalf("Drain err = %v, want ErrDeadline", err)
			}
			if took > 15*time.Second {
				t.Errorf("drain took %v with a 5 s deadline", took)
			}
			if res.ForceDeleted != tt.wantForce {
				t.Errorf("force-deleted %d, want %d", res.ForceDeleted, tt.wantForce)
			}
			if !tt.pdb {
				if res.GraceCapped != 1 {
					t.Errorf("grace capped %d, want 1", res.GraceCapped)
				}
				if podExists(t, ctx, p) {
					t.Error("pod still there after a capped-grace drain")
				}
			}
			if tt.pdb && !tt.force && !podExists(t, ctx, p) {
				t.Error("pod guarded by a PDB was removed without force")
			}
		})
	}
}

func TestCordonConcurrentWritersLoseNothing(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, time.Minute)
	node := newNode(t)
	d := newDrainer(drain.Options{})
	keys := []string{"lifeboat.io/a", "lifeboat.io/b", "lifeboat.io/c", "lifeboat.io/d", "lifeboat.io/e"}
	var wg sync.WaitGroup
	errs := make(chan error, len(keys))
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := d.Cordon(ctx, node, []string{k}, "test", map[string]string{fmt.Sprintf("lifeboat.io/w%d", i): "x"})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	n, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == k }) {
			t.Errorf("taint %s lost under concurrent writers", k)
		}
		if n.Annotations[fmt.Sprintf("lifeboat.io/w%d", i)] != "x" {
			t.Errorf("annotation %d lost", i)
		}
	}
	if !n.Spec.Unschedulable || n.Annotations[drain.AnnotationCordoned] != "true" {
		t.Error("node not cordoned by lifeboat")
	}
	changed, err := d.Cordon(ctx, node, keys, "test", nil)
	if err != nil || changed {
		t.Errorf("second Cordon changed=%v err=%v; want an idempotent no-op", changed, err)
	}
}

func TestUncordonOnlyWhatLifeboatCordoned(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, time.Minute)
	d := newDrainer(drain.Options{})
	tests := []struct {
		name              string
		cordonedByAdmin   bool
		wantUnschedulable bool
	}{
		{"cordoned by lifeboat", false, false},
		{"cordoned by an admin first", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := env.Node(t, testenv.NodeSpec{Unschedulable: tt.cordonedByAdmin, Taints: []corev1.Taint{{Key: "other.io/keep", Effect: corev1.TaintEffectNoSchedule}}}).Name
			if _, err := d.Cordon(ctx, node, []string{"lifeboat.io/scheduled-change"}, "scheduled-change", nil); err != nil {
				t.Fatal(err)
			}
			if _, err := d.Uncordon(ctx, node, "lifeboat.io/", nil); err != nil {
				t.Fatal(err)
			}
			n, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if n.Spec.Unschedulable != tt.wantUnschedulable {
				t.Errorf("unschedulable = %v, want %v", n.Spec.Unschedulable, tt.wantUnschedulable)
			}
			var keys []string
			for _, t := range n.Spec.Taints {
				keys = append(keys, t.Key)
			}
			if !slices.Contains(keys, "other.io/keep") || slices.Contains(keys, "lifeboat.io/scheduled-change") {
				t.Errorf("taints after uncordon = %v; want only other.io/keep (and system taints)", keys)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

type policyPDB = policyv1.PodDisruptionBudget

// The first cordon attempt uses the informer's copy; a stale copy answers
// 409 Conflict and the retry reads the node, so nothing is lost.
func TestCordonWithStaleCache(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, time.Minute)
	name := newNode(t)
	stale, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Someone else changes the node after our cache copy was taken.
	if _, err := env.Client.CoreV1().Nodes().Patch(ctx, name, "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"other-writer":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	d := newDrainer(drain.Options{NodeCache: func(n string) (*corev1.Node, bool) { return stale, n == name }})
	if _, err := d.Cordon(ctx, name, []string{"lifeboat.io/spot-interruption"}, "spot-interruption", nil); err != nil {
		t.Fatal(err)
	}
	n, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !n.Spec.Unschedulable || n.Labels["other-writer"] != "yes" {
		t.Errorf("unschedulable=%v labels=%v: the cordon or the other writer's label was lost", n.Spec.Unschedulable, n.Labels)
	}
}

// waitGone watches from the resourceVersion of the list the pods came from
// (no second list); from a version the API server no longer has, it lists
// and watches anew. Either way it sees every deletion, including one that
// happened before it started watching; on a watch of its node's own and on
// queue mode's shared pod watch (internal/podwatch) alike.
func TestWaitGoneFromListVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rv   func(listRV string) string
	}{
		{name: "the list's version", rv: func(listRV string) string { return listRV }},
		{name: "a compacted version", rv: func(string) string { return "1" }},
		{name: "none", rv: func(string) string { return "" }},
	}
	for _, shared := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s shared=%v", tt.name, shared), func(t *testing.T) {
				t.Parallel()
				waitGoneFromListVersion(t, tt.rv, shared)
			})
		}
	}
}

func waitGoneFromListVersion(t *testing.T, rv func(listRV string) string, shared bool) {
	ctx := ctxT(t, time.Minute)
	ns := env.Namespace(t)
	node := newNode(t)
	early := newPod(t, ctx, testenv.PodSpec{Namespace: ns, Node: node})
	late := newPod(t, ctx, testenv.PodSpec{Namespace: ns, Node: node, ShutdownAfter: time.Second})
	list, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// One pod is gone before the watch starts, the other while it runs.
	zero := int64(0)
	if err := env.Client.CoreV1().Pods(ns).Delete(ctx, early.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.CoreV1().Pods(ns).Delete(ctx, late.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	o := drain.Options{}
	var counter *watchCounter
	if shared {
		o.PodReadClient, o.PodWatch, counter = sharedReads(t)
	}
	left, err := newDrainer(o).WaitGone(ctx, node, list.Items, rv(list.ResourceVersion), time.Now().Add(30*time.Second))
	if err != nil || left != 0 {
		t.Fatalf("WaitGone = %d, %v; want 0 left", left, err)
	}
	if podExists(t, ctx, early) || podExists(t, ctx, late) {
		t.Error("WaitGone returned while a pod still exists")
	}
	if counter != nil && counter.whole.Load() == 0 {
		t.Error("no pod watch opened: the wait did not use the shared watch")
	}
}
