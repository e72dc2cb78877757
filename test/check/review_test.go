package check

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestCheckClusterReview: on the real API server, a PodDisruptionBudget
// that allows no disruption fails the check (exit 1) and names the pod it
// would stall a drain on; a pod whose grace period exceeds the Spot notice
// warns, and so does one exceeding the terminate hook's heartbeat timeout
// when lifeboat does not heartbeat. Pods the budget does not cover, with
// grace periods that fit, are not named.
func TestCheckClusterReview(t *testing.T) {
	w := newWorld(t, worldOptions{})
	ns := kube.Namespace(t)
	mk := func(name string, labels map[string]string, grace int64, preStop bool) {
		t.Helper()
		c := corev1.Container{Name: "app", Image: "registry.example/app:1"}
		if preStop {
			c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 60}}}
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: corev1.PodSpec{NodeName: "review-node", TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{c}}}
		if _, err := kube.Client.CoreV1().Pods(ns).Create(w.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// No kubelet runs review-node: delete at once, before the
		// namespace goes, so that no other test sees the pod.
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = kube.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		})
	}
	mk("db-0", map[string]string{"app": "db"}, 30, false)
	mk("web-0", map[string]string{"app": "web"}, 30, false)
	mk("batch-0", map[string]string{"app": "batch"}, 240, true)
	mk("report-0", map[string]string{"app": "report"}, 600, false)
	one := intstr.FromInt32(1)
	if _, err := kube.Client.PolicyV1().PodDisruptionBudgets(ns).Create(w.ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	r, code := w.check()
	w.logReport(r)
	if code != 1 {
		t.Errorf("exit code %d, want 1 (a budget that blocks every drain fails)", code)
	}
	status, found, fix, ok := r.row("pdb " + ns + "/db")
	if !ok || status != "fail" || !strings.Contains(found, "allows 0 disruptions now") || !strings.Contains(found, ns+"/db-0") || fix == "" {
		t.Errorf("pdb row: %v %s %q fix %q", ok, status, found, fix)
	}
	if strings.Contains(found, "web-0") {
		t.Errorf("the pdb row names a pod it does not cover: %s", found)
	}
	status, found, _, ok = r.row("pods grace > 2m0s")
	if !ok || status != "warn" || !strings.Contains(found, "2 pods") || !strings.Contains(found, ns+"/batch-0 (4m0s)") ||
		!strings.Contains(found, ns+"/report-0 (10m0s)") || !strings.Contains(found, "1 of them with a preStop hook") {
		t.Errorf("Spot grace row: %v %s %q", ok, status, found)
	}
	if _, _, _, ok := r.row("pods grace > 5m0s"); ok {
		t.Error("a hook row while lifeboat heartbeats (the drain has up to the global timeout)")
	}
	if slices.Contains(r.withStatus("ok"), "cluster review") {
		t.Error("the cluster review says ok despite its findings")
	}

	// Without heartbeats the terminate hook's 300 s timeout is the drain's
	// time: only the 600 s pod exceeds it.
	r, _ = w.check("--complete-lifecycle=false")
	w.logReport(r)
	status, found, _, ok = r.row("pods grace > 5m0s")
	if !ok || status != "warn" || !strings.Contains(found, "hook nodes-a/lifeboat-terminate") || !strings.Contains(found, "1 pods") ||
		!strings.Contains(found, ns+"/report-0") || strings.Contains(found, "batch-0") {
		t.Errorf("hook grace row: %v %s %q", ok, status, found)
	}
	out, _, code := lifeboat(t, w.ctx, append([]string{"check"}, w.flags()...)...)
	if code != 1 {
		t.Errorf("table output exit %d, want 1", code)
	}
	saveOutput(t, "cluster-review.txt", out)
	checkDocSample(t, "docs/forecast.md", out, "## The cluster review (`lifeboat check`)", "### From a run")
}
