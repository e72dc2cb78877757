package replace

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/test/testenv"
)

// TestReplacementFirstPDBAllowingZero: two replicas, one on the draining
// node, under a PodDisruptionBudget that allows no disruption. Without
// replacement first the eviction is refused until the blocked pod is
// deleted before the deadline (the Deployment drops to one ready pod);
// with it, a new pod is Ready first, the budget then lets the pod go, and
// at no moment are fewer than two pods Ready.
func TestReplacementFirstPDBAllowingZero(t *testing.T) {
	for _, first := range []bool{false, true} {
		t.Run(map[bool]string{false: "without", true: "with"}[first], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			ns := env.Namespace(t)
			pool := testenv.UniqueName("pool")
			spec := testenv.NodeSpec{Labels: map[string]string{"replace.lifeboat.test/pool": pool}}
			old := env.Node(t, spec).Name
			oneReplica(t, ctx, ns, pool, func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](2)
			})
			second := env.Node(t, spec).Name
			if _, err := env.Client.AppsV1().Deployments(ns).Patch(ctx, "web", "application/merge-patch+json", []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			budget := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
				Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)),
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
			if _, err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, budget, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				b, err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
				return err == nil && b.Status.CurrentHealthy == 2 && b.Status.ObservedGeneration == b.Generation, nil
			})
			if err != nil {
				t.Fatalf("the budget never saw two healthy pods: %v", err)
			}
			l, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range l.Items {
				if p.Spec.NodeName == second && ready(&p) {
					continue
				}
				if p.Spec.NodeName != old {
					t.Fatalf("pod %s on %s: want one on each node", p.Name, p.Spec.NodeName)
				}
			}
			low := minReady(t, ctx, ns)

			rec := &recorded{}
			d := newDrainer(t, first, rec)
			if _, err := d.Cordon(ctx, old, nil, "spot-interruption", nil); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			res, err := d.Drain(ctx, old, drain.Deadline{At: start.Add(25 * time.Second), Enforced: true}, nil)
			if err != nil {
				t.Fatalf("drain: %v", err)
			}
			took := time.Since(start).Round(10 * time.Millisecond)
			fewest := low()
			t.Logf("the drain took %v; fewest ready pods %d; deleted blocked %v; events %v", took, fewest, res.DeletedBlocked, rec.reasons)
			if first && fewest < 2 {
				t.Errorf("with replacement first, only %d pods were Ready at one moment", fewest)
			}
			if !first && (fewest > 1 || len(res.DeletedBlocked) != 1) {
				t.Errorf("without: fewest ready %d, deleted blocked %v; want the harm: 1, and the pod deleted before the deadline", fewest, res.DeletedBlocked)
			}
		})
	}
}

// minReady watches the namespace's pods from now; what it returns stops
// the watch and gives the fewest pods Ready (and not deleting) at once.
func minReady(t *testing.T, ctx context.Context, ns string) func() int {
	t.Helper()
	w, err := env.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fewest := -1
	done := make(chan struct{})
	go func() {
		defer close(done)
		state := map[string]bool{}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			state[p.Name] = ready(p) && p.DeletionTimestamp == nil && ev.Type != "DELETED"
			n := 0
			for _, r := range state {
				if r {
					n++
				}
			}
			if len(state) >= 2 && (fewest < 0 || n < fewest) {
				fewest = n
			}
		}
	}()
	return func() int {
		w.Stop()
		<-done
		return fewest
	}
}
