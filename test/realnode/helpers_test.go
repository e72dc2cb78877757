package realnode

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/test/testenv"
)

// startWorkloads creates the workload pods and waits until each is Running
// and has recorded that it is ready.
func startWorkloads(ctx context.Context, t *testing.T, specs ...testenv.WorkloadSpec) {
	t.Helper()
	for _, s := range specs {
		if _, err := suite.Kube.Client.CoreV1().Pods(s.Namespace).Create(ctx, testenv.WorkloadPod(s), metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating pod %s: %v", s.Name, err)
		}
	}
	for _, s := range specs {
		eventually(ctx, t, 60*time.Second, "pod "+s.Name+" running and recorded ready", func() bool {
			p, err := suite.Kube.Client.CoreV1().Pods(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
			if err != nil || p.Status.Phase != corev1.PodRunning {
				return false
			}
			r, err := testenv.ReadWorkloadRecord(s.RecordDir, s.Namespace, s.Name)
			return err == nil && r.Count(testenv.WorkloadReady) > 0
		})
	}
}

// readRecord reads a workload's record; it fails the test on error.
func readRecord(t *testing.T, s testenv.WorkloadSpec) testenv.WorkloadRecord {
	t.Helper()
	r, err := testenv.ReadWorkloadRecord(s.RecordDir, s.Namespace, s.Name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// assertGracefulShutdown checks, from the workload's own record, that its
// preStop hook (when it has one) ran once and to its end, that SIGTERM came
// after it, and that the SIGTERM handler finished its work and the process
// exited by itself.
func assertGracefulShutdown(t *testing.T, rec testenv.WorkloadRecord, s testenv.WorkloadSpec) {
	t.Helper()
	assertShutdown(t, rec, s, true)
}

// assertShutdown is assertGracefulShutdown; with preStopOnce false the
// preStop hook may have run more than once (Kubernetes delivers hooks at
// least once: a kubelet or containerd restart during the hook runs it
// again), as long as one run ended before SIGTERM.
func assertShutdown(t *testing.T, rec testenv.WorkloadRecord, s testenv.WorkloadSpec, preStopOnce bool) {
	t.Helper()
	if s.PreStop > 0 {
		if n := rec.Count(testenv.WorkloadPreStopBegin); n == 0 || (preStopOnce && n != 1) {
			t.Errorf("%s: preStop began %d times, want once (record: %s)", s.Name, n, rec)
		}
		end, ok := rec.At(testenv.WorkloadPreStopEnd)
		if !ok {
			t.Fatalf("%s: preStop did not run to its end (record: %s)", s.Name, rec)
		}
		if term, ok := rec.At(testenv.WorkloadSIGTERM); ok && term.Before(end) {
			t.Errorf("%s: SIGTERM at %v came before preStop ended at %v (record: %s)", s.Name, term, end, rec)
		}
	}
	if n := rec.Count(testenv.WorkloadSIGTERM); n != 1 {
		t.Errorf("%s: SIGTERM recorded %d times, want once (record: %s)", s.Name, n, rec)
	}
	if !rec.Finished() {
		t.Errorf("%s: the SIGTERM handler was cut off before it finished its work (record: %s)", s.Name, rec)
	}
}

// eventually polls cond every 100 ms until it holds; it fails the test
// after d.
func eventually(ctx context.Context, t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
