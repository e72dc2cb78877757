package realnode

import (
	"context"
	"fmt"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/test/testenv"
)

// TestIMDSTargetTerminatedHeld is seed 001 (F2) on real pods: lifeboat in
// IMDS mode on a real node whose target-lifecycle-state turns Terminated and
// stays so (read at every 100 ms poll). One drain: each pod's preStop ran
// exactly once, each SIGTERM handler finished, and lifeboat counts one
// drain while the state is held.
func TestIMDSTargetTerminatedHeld(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node := testenv.StartRealNode(t, suite.Kube, testenv.RealNodeOptions{Images: suite.Images})
	ns := suite.Kube.Namespace(t)
	records := t.TempDir()
	var pods []testenv.WorkloadSpec
	for i := range 3 {
		pods = append(pods, testenv.WorkloadSpec{Namespace: ns, Name: fmt.Sprintf("worker-%d", i), Node: node.Name, RecordDir: records,
			PreStop: 2 * time.Second, Shutdown: time.Second, Grace: 30 * time.Second})
	}
	startWorkloads(ctx, t, pods...)

	mock := testenv.StartIMDS(t, testenv.IMDSOptions{Scenario: testenv.IMDSASGLifecycle, After: 2 * time.Second, InstanceID: node.InstanceID})
	lb, err := testenv.StartLifeboat(ctx, testenv.LifeboatOptions{Bin: suite.Lifeboat, Dir: t.TempDir(), Args: []string{
		"--mode", "imds", "--node-name", node.Name, "--imds-endpoint", mock.URL, "--imds-poll-interval", "100ms",
		"--kubeconfig", suite.Kube.Kubeconfig, "--pod-namespace", ns, "--eviction-backoff", "500ms", "--log-level", "debug",
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		lb.Stop()
		if t.Failed() {
			t.Logf("---- lifeboat log ----\n%s", lb.Logs())
		}
	})
	for _, p := range pods {
		if _, err := suite.Kube.WaitPodGone(ctx, ns, p.Name); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * time.Second) // the state stays Terminated: 50 more polls
	for _, p := range pods {
		rec := readRecord(t, p)
		t.Logf("%s: %s", p.Name, rec)
		assertGracefulShutdown(t, rec, p)
		if n := rec.Count(testenv.WorkloadStarted); n != 1 {
			t.Errorf("%s started %d times, want once", p.Name, n)
		}
	}
	drains, err := lb.Metric(ctx, "lifeboat_actions_total", map[string]string{"action": "drain", "result": "ok"})
	if err != nil {
		t.Fatal(err)
	}
	if drains != 1 {
		t.Errorf("lifeboat drained %v times, want exactly once while the state is held", drains)
	}
}
