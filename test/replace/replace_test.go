// Package replace tests replacement first (internal/replace) with the
// drain (internal/drain) against the testbed's real kube-apiserver,
// kube-controller-manager (the Deployment and ReplicaSet controllers) and
// kube-scheduler, with kwok nodes: pods on kwok nodes are Ready as soon as
// they are scheduled, so what this shows is the order of the API
// server's writes, not a real process's start (test/realnode does that).
package replace

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/replace"
	"lifeboat.dev/lifeboat/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	var err error
	env, err = testenv.New(ctx, testenv.Options{}) // with kube-scheduler: the replacement must be placed
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the test environment:", err)
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

// recorded keeps the Event reasons recorded.
type recorded struct {
	mu      sync.Mutex
	reasons []string
}

func (r *recorded) add(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reasons = append(r.reasons, reason)
}
func (r *recorded) Event(_ runtime.Object, _, reason, _ string)            { r.add(reason) }
func (r *recorded) Eventf(_ runtime.Object, _, reason, _ string, _ ...any) { r.add(reason) }
func (r *recorded) AnnotatedEventf(_ runtime.Object, _ map[string]string, _, reason, _ string, _ ...any) {
	r.add(reason)
}

// step is one write to a pod of the namespace, in the order of the API
// server's watch stream.
type step struct {
	pod  string
	what string // "ready" (first seen Ready) or "deleting" (deletionTimestamp first seen)
}

// timeline watches the namespace's pods from now and records, in the
// stream's order (the order of the API server's writes), when each pod
// is first seen Ready and first seen deleting.
func timeline(t *testing.T, ctx context.Context, ns string) func() []step {
	t.Helper()
	w, err := env.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var steps []step
	seen := map[step]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Error {
				continue
			}
			var add []step
			if ready(p) && p.DeletionTimestamp == nil {
				add = append(add, step{p.Name, "ready"})
			}
			if p.DeletionTimestamp != nil || ev.Type == watch.Deleted {
				add = append(add, step{p.Name, "deleting"})
			}
			mu.Lock()
			for _, s := range add {
				if !seen[s] {
					seen[s] = true
					steps = append(steps, s)
				}
			}
			mu.Unlock()
		}
	}()
	return func() []step {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return steps
	}
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// oneReplica creates a one-replica Deployment (the API's default
// strategy) whose pods go to nodes labelled pool, and waits for its pod
// Ready; it returns the Deployment as stored and the pod.
func oneReplica(t *testing.T, ctx context.Context, ns, pool string, mut ...func(*appsv1.Deployment)) (*appsv1.Deployment, corev1.Pod) {
	t.Helper()
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{testenv.ShutdownAnnotation: "1"}},
				Spec: corev1.PodSpec{NodeSelector: map[string]string{"replace.lifeboat.test/pool": pool},
					Containers: []corev1.Container{{Name: "web", Image: "web:1"}}},
			}},
	}
	for _, m := range mut {
		m(d)
	}
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got corev1.Pod
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		l, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil || len(l.Items) != 1 || !ready(&l.Items[0]) {
			return false, nil
		}
		got = l.Items[0]
		return true, nil
	})
	if err != nil {
		t.Fatalf("waiting for the Deployment's pod Ready: %v", err)
	}
	stored, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return stored, got
}

// TestReplacementFirst drains the node of a one-replica Deployment with
// capacity on another node, before a Spot-like deadline two minutes
// away: without replacement first (the harm) the old pod is deleting
// before any new pod is Ready; with it, the new pod is Ready on the other
// node first, and the Deployment's spec differs from before only by the
// restartedAt annotation `kubectl rollout restart` sets.
func TestReplacementFirst(t *testing.T) {
	for _, tt := range []struct {
		name  string
		first bool
	}{
		{"without, the harm", false},
		{"with", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			ns := env.Namespace(t)
			pool := testenv.UniqueName("pool")
			spec := testenv.NodeSpec{Labels: map[string]string{"replace.lifeboat.test/pool": pool}}
			old := env.Node(t, spec).Name
			before, oldPod := oneReplica(t, ctx, ns, pool)
			if oldPod.Spec.NodeName != old {
				t.Fatalf("the pod runs on %s, not on %s", oldPod.Spec.NodeName, old)
			}
			other := env.Node(t, spec).Name // the capacity elsewhere
			steps := timeline(t, ctx, ns)

			rec := &recorded{}
			d := newDrainer(t, tt.first, rec)
			if _, err := d.Cordon(ctx, old, nil, "spot-interruption", nil); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			dl := drain.Deadline{At: start.Add(2 * time.Minute), Enforced: true}
			if _, err := d.Drain(ctx, old, dl, nil); err != nil {
				t.Fatalf("drain: %v", err)
			}
			t.Logf("the drain took %v", time.Since(start).Round(10*time.Millisecond))
			// The replacement, if any, Ready before the drain's end or after.
			var replacement corev1.Pod
			err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				l, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
				if err != nil {
					return false, nil
				}
				for _, p := range l.Items {
					if p.Name != oldPod.Name && ready(&p) {
						replacement = p
						return true, nil
					}
				}
				return false, nil
			})
			if err != nil {
				t.Fatalf("no replacement Ready: %v", err)
			}
			if replacement.Spec.NodeName != other {
				t.Errorf("the replacement runs on %s, want %s", replacement.Spec.NodeName, other)
			}
			got := steps()
			t.Logf("timeline: %v", got)
			readyAt, deletingAt := index(got, step{replacement.Name, "ready"}), index(got, step{oldPod.Name, "deleting"})
			if readyAt < 0 || deletingAt < 0 {
				t.Fatalf("timeline %v lacks the replacement's Ready or the old pod's deletion", got)
			}
			if tt.first != (readyAt < deletingAt) {
				t.Errorf("replacement first %v: the replacement Ready at step %d, the old pod deleting at step %d (%v)", tt.first, readyAt, deletingAt, got)
			}

			after, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			restarted, ok := after.Spec.Template.Annotations[replace.RestartedAt]
			if tt.first != ok {
				t.Errorf("replacement first %v: %s set %v (%q)", tt.first, replace.RestartedAt, ok, restarted)
			}
			delete(after.Spec.Template.Annotations, replace.RestartedAt)
			if diff := cmp.Diff(before.Spec, after.Spec); diff != "" {
				t.Errorf("the Deployment's spec differs by more than %s (-before +after):\n%s", replace.RestartedAt, diff)
			}
			wantEvents := []string(nil)
			if tt.first {
				wantEvents = []string{replace.ReasonReplacementStarted, replace.ReasonReplacementStarted, replace.ReasonReplacementReady, replace.ReasonReplacementReady}
			}
			if diff := cmp.Diff(wantEvents, rec.reasons); diff != "" {
				t.Errorf("Events (-want +got):\n%s", diff)
			}
		})
	}
}

// newDrainer is a drain as lifeboat makes it (--deadline-margin 5s,
// --delete-blocked-pods-before-deadline on), with
// replacement first when first, recording its Events in rec.
func newDrainer(t *testing.T, first bool, rec *recorded) *drain.Drainer {
	t.Helper()
	client, err := kube.NewREST(rest.CopyConfig(env.Config))
	if err != nil {
		t.Fatal(err)
	}
	o := drain.Options{Backoff: 200 * time.Millisecond, Margin: 5 * time.Second, DeleteBlocked: true, Recorder: rec}
	if first {
		o.Replacer = replace.New(replace.NewApps(env.Client.AppsV1()), client, clock.RealClock{}, quiet, replace.Options{Poll: 100 * time.Millisecond, Recorder: rec})
	}
	return drain.New(client, clock.RealClock{}, quiet, o)
}

func index(steps []step, s step) int {
	for i, x := range steps {
		if x == s {
			return i
		}
	}
	return -1
}
