package replace

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/internal/kube/clientset"
)

// apps is an in-memory Client: one ReplicaSet and one Deployment; each
// patch is kept, and answered with the next of patchErrs.
type apps struct {
	mu        sync.Mutex
	rs        *appsv1.ReplicaSet
	rsErr     error
	dep       *appsv1.Deployment
	patches   []string
	patchErrs []error
}

func (a *apps) ReplicaSet(context.Context, string, string) (*appsv1.ReplicaSet, error) {
	return a.rs, a.rsErr
}

func (a *apps) Deployment(context.Context, string, string) (*appsv1.Deployment, error) {
	return a.dep.DeepCopy(), nil
}

func (a *apps) PatchDeployment(_ context.Context, _, _ string, data []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.patches = append(a.patches, string(data))
	if len(a.patchErrs) > 0 {
		err := a.patchErrs[0]
		a.patchErrs = a.patchErrs[1:]
		return err
	}
	return nil
}

func (a *apps) patched() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.patches)
}

type counts struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counts) add(r string) { c.mu.Lock(); c.m[r]++; c.mu.Unlock() }
func (c *counts) get(r string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[r]
}

// stepWorld is one Deployment with its one pod on node, the replacer on
// a fake clock and client-go's fake clientset.
type stepWorld struct {
	apps  *apps
	cs    *fake.Clientset
	clk   *clocktesting.FakeClock
	count *counts
	r     *Replacer
	old   corev1.Pod
}

func newStepWorld(t *testing.T) *stepWorld {
	t.Helper()
	old := pod("web-a", node, true)
	w := &stepWorld{
		apps:  &apps{rs: replicaSet(), dep: deployment(1)},
		cs:    fake.NewClientset(&old),
		clk:   clocktesting.NewFakeClock(now),
		count: &counts{m: map[string]int{}},
		old:   old,
	}
	w.r = New(w.apps, clientset.New(w.cs), w.clk, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{Count: w.count.add})
	return w
}

// run calls the drain's hook for the old pod, with evictBy at, and
// returns a channel closed when it returns.
func (w *stepWorld) run(at time.Time) <-chan struct{} {
	before := w.r.ForNode(node, []corev1.Pod{w.old}, func(*corev1.Pod) time.Time { return at })
	done := make(chan struct{})
	go func() {
		defer close(done)
		before(context.Background(), &w.old)
	}()
	return done
}

// addReplacement creates a Ready pod of a new template on another node.
func (w *stepWorld) addReplacement(t *testing.T) {
	t.Helper()
	w.addReplacementNamed(t, "web-n")
}

// addReplacementNamed creates a Ready pod of a new template named name
// on another node.
func (w *stepWorld) addReplacementNamed(t *testing.T, name string) {
	t.Helper()
	p := pod(name, "ip-10-0-0-2.ec2.internal", true)
	p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "new"
	if _, err := w.cs.CoreV1().Pods("ns").Create(context.Background(), &p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waiting returns once the hook has decided and listed the Deployment's
// pods while waiting (its second list of pods).
func (w *stepWorld) waiting(t *testing.T) {
	t.Helper()
	for range 500 {
		lists := 0
		for _, a := range w.cs.Actions() {
			if a.GetVerb() == "list" && a.GetResource().Resource == "pods" {
				lists++
			}
		}
		if lists >= 2 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the hook never waited")
}

func waitDone(t *testing.T, done <-chan struct{}, clk *clocktesting.FakeClock) {
	t.Helper()
	for range 200 {
		select {
		case <-done:
			return
		case <-time.After(10 * time.Millisecond):
			clk.Step(time.Second) // the poll's tick
		}
	}
	t.Fatal("the hook did not return")
}

func TestStepRestartsAndWaits(t *testing.T) {
	w := newStepWorld(t)
	done := w.run(now.Add(time.Minute))
	w.waiting(t)
	select {
	case <-done:
		t.Fatal("returned before any replacement was Ready")
	default:
	}
	if w.apps.patched() != 1 {
		t.Fatalf("%d patches, want the one restart", w.apps.patched())
	}
	w.addReplacement(t)
	waitDone(t, done, w.clk)
	if w.count.get("ready") != 1 {
		t.Errorf("counts %v, want one ready", w.count.m)
	}
}

func TestStepRolloutUnderWayIsNotRestarted(t *testing.T) {
	w := newStepWorld(t)
	w.apps.dep.Spec.Template.Annotations = map[string]string{RestartedAt: "earlier"}
	done := w.run(now.Add(time.Minute))
	w.waiting(t) // a replacement already there would make the pod not last
	w.addReplacement(t)
	waitDone(t, done, w.clk)
	if w.apps.patched() != 0 {
		t.Errorf("%d patches of a Deployment already rolling out, want none", w.apps.patched())
	}
	if w.count.get("ready") != 1 {
		t.Errorf("counts %v, want one ready", w.count.m)
	}
}

func TestStepConflictReadsAgain(t *testing.T) {
	w := newStepWorld(t)
	w.apps.patchErrs = []error{apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("changed"))}
	done := w.run(now.Add(time.Minute))
	w.waiting(t)
	w.addReplacement(t)
	waitDone(t, done, w.clk)
	if w.apps.patched() != 2 {
		t.Errorf("%d patches, want the conflicting one and one after reading again", w.apps.patched())
	}
}

func TestStepTimesOut(t *testing.T) {
	w := newStepWorld(t)
	done := w.run(now.Add(time.Minute))
	waitDone(t, done, w.clk)
	if got := w.clk.Now(); got.Before(now.Add(time.Minute)) {
		t.Errorf("returned at %v, before evictBy %v", got, now.Add(time.Minute))
	}
	if w.count.get("timeout") != 1 {
		t.Errorf("counts %v, want one timeout", w.count.m)
	}
}

func TestStepFailedReadEvictsAsToday(t *testing.T) {
	w := newStepWorld(t)
	w.apps.rsErr = errors.New("boom")
	select {
	case <-w.run(now.Add(time.Minute)):
	case <-time.After(5 * time.Second):
		t.Fatal("the hook waited after a failed read")
	}
	if w.apps.patched() != 0 || w.count.get("failed") != 1 {
		t.Errorf("%d patches, counts %v: want none and one failed", w.apps.patched(), w.count.m)
	}
}

// TestStepPDBWaitsForAsManyAsWereReady: two Ready replicas, one on the
// node, under a budget allowing no disruption. When the first new pod is
// Ready the rollout deletes the old pod on the other node; evicting the
// one here then would leave one Ready pod. The hook returns only once
// two new pods are Ready.
func TestStepPDBWaitsForAsManyAsWereReady(t *testing.T) {
	w := newStepWorld(t)
	w.apps.dep = deployment(2)
	there := pod("web-b", "ip-10-0-0-2.ec2.internal", true)
	budget := pdb(0)
	ctx := context.Background()
	if _, err := w.cs.CoreV1().Pods("ns").Create(ctx, &there, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.cs.PolicyV1().PodDisruptionBudgets("ns").Create(ctx, &budget, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	done := w.run(now.Add(3 * time.Minute))
	w.waiting(t)
	w.addReplacementNamed(t, "web-n1")
	if err := w.cs.CoreV1().Pods("ns").Delete(ctx, there.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		w.clk.Step(time.Second)
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-done:
		t.Fatal("returned with one new pod Ready: evicting now leaves one Ready pod")
	default:
	}
	w.addReplacementNamed(t, "web-n2")
	waitDone(t, done, w.clk)
	if w.apps.patched() != 1 || w.count.get("ready") != 1 {
		t.Errorf("%d patches, counts %v: want one restart and one ready", w.apps.patched(), w.count.m)
	}
}
