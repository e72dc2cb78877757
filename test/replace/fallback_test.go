package replace

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/replace"
	"lifeboat.dev/lifeboat/test/testenv"
)

// TestReplacementTimesOut: no capacity elsewhere, so the new pod stays
// Pending; the wait ends when the eviction must begin (the deadline less
// --deadline-margin less the pod's grace) and the pod is evicted as
// today, in time for its grace.
func TestReplacementTimesOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := env.Namespace(t)
	pool := testenv.UniqueName("pool")
	old := env.Node(t, testenv.NodeSpec{Labels: map[string]string{"replace.lifeboat.test/pool": pool}}).Name
	_, oldPod := oneReplica(t, ctx, ns, pool, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](2)
	})
	rec := &recorded{}
	d := newDrainer(t, true, rec)
	if _, err := d.Cordon(ctx, old, nil, "spot-interruption", nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	dl := drain.Deadline{At: start.Add(20 * time.Second), Enforced: true}
	if _, err := d.Drain(ctx, old, dl, nil); err != nil {
		t.Fatalf("drain: %v", err)
	}
	took := time.Since(start)
	// evictBy = 20 s - 5 s margin - 2 s grace = 13 s; the pod then takes
	// up to its grace (kwok: its shutdown annotation, 1 s).
	if took < 12*time.Second || took > 20*time.Second {
		t.Errorf("the drain took %v, want the wait until 13 s, then the eviction", took)
	}
	if _, err := env.Client.CoreV1().Pods(ns).Get(ctx, oldPod.Name, metav1.GetOptions{}); err == nil {
		t.Errorf("the old pod %s is still there", oldPod.Name)
	}
	want := []string{replace.ReasonReplacementStarted, replace.ReasonReplacementStarted, replace.ReasonReplacementTimedOut, replace.ReasonReplacementTimedOut}
	if diff := cmp.Diff(want, rec.reasons); diff != "" {
		t.Errorf("Events (-want +got):\n%s", diff)
	}
}

// TestReplacementSkipped: when a new pod needs more time than is left
// (lifeboat.io/replacement-seconds), the pod is evicted at once, as
// today, with a ReplacementSkipped Event, and the Deployment is not
// touched.
func TestReplacementSkipped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := env.Namespace(t)
	pool := testenv.UniqueName("pool")
	spec := testenv.NodeSpec{Labels: map[string]string{"replace.lifeboat.test/pool": pool}}
	old := env.Node(t, spec).Name
	before, _ := oneReplica(t, ctx, ns, pool, func(d *appsv1.Deployment) {
		d.Annotations = map[string]string{replace.AnnotationSeconds: "600"}
	})
	env.Node(t, spec)
	rec := &recorded{}
	d := newDrainer(t, true, rec)
	if _, err := d.Cordon(ctx, old, nil, "spot-interruption", nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := d.Drain(ctx, old, drain.Deadline{At: start.Add(2 * time.Minute), Enforced: true}, nil); err != nil {
		t.Fatalf("drain: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the drain took %v: it waited", took)
	}
	after, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before.Spec, after.Spec); diff != "" {
		t.Errorf("the Deployment's spec changed (-before +after):\n%s", diff)
	}
	want := []string{replace.ReasonReplacementSkipped, replace.ReasonReplacementSkipped}
	if diff := cmp.Diff(want, rec.reasons); diff != "" {
		t.Errorf("Events (-want +got):\n%s", diff)
	}
}

// TestStatefulSetAndBarePodAsBefore: a one-replica StatefulSet's pod and a
// bare pod are evicted as without replacement first: at once, with no
// Event and no write but the evictions.
func TestStatefulSetAndBarePodAsBefore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := env.Namespace(t)
	pool := testenv.UniqueName("pool")
	spec := testenv.NodeSpec{Labels: map[string]string{"replace.lifeboat.test/pool": pool}}
	old := env.Node(t, spec).Name
	env.Node(t, spec) // capacity elsewhere: no reason to wait but the kind
	labels := map[string]string{"app": "db"}
	// Pinned to the draining node: the scheduler may not choose.
	podSpec := corev1.PodSpec{NodeSelector: map[string]string{"replace.lifeboat.test/pool": pool, "kubernetes.io/hostname": old},
		Containers: []corev1.Container{{Name: "db", Image: "db:1"}}}
	ss := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels,
				Annotations: map[string]string{testenv.ShutdownAnnotation: "1"}}, Spec: podSpec}}}
	if _, err := env.Client.AppsV1().StatefulSets(ns).Create(ctx, ss, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bare",
		Annotations: map[string]string{testenv.ShutdownAnnotation: "1"}}, Spec: *podSpec.DeepCopy()}
	bare.Spec.NodeName = old
	if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, bare, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		l, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		n := 0
		for _, p := range l.Items {
			if ready(&p) && p.Spec.NodeName == old {
				n++
			}
		}
		return n == 2, nil
	})
	if err != nil {
		t.Fatalf("waiting for the StatefulSet's pod and the bare pod Ready on %s: %v", old, err)
	}
	rec := &recorded{}
	d := newDrainer(t, true, rec)
	if _, err := d.Cordon(ctx, old, nil, "spot-interruption", nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := d.Drain(ctx, old, drain.Deadline{At: start.Add(2 * time.Minute), Enforced: true}, nil)
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the drain took %v: it waited", took)
	}
	slices.Sort(res.Pods)
	if diff := cmp.Diff([]string{ns + "/bare", ns + "/db-0"}, res.Pods); diff != "" {
		t.Errorf("evicted (-want +got):\n%s", diff)
	}
	if len(rec.reasons) != 0 {
		t.Errorf("Events %v, want none", rec.reasons)
	}
}
