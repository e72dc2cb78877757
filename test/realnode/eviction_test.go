package realnode

import (
	"context"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/test/testenv"
)

// TestEvictionRunsPreStopThenSIGTERM: an Eviction of a real pod runs its
// preStop hook to the end, then sends SIGTERM, whose handler finishes its
// work before the process exits and the pod is gone. This is the kubelet
// behaviour every other scenario relies on, asserted from the workload's
// own record.
func TestEvictionRunsPreStopThenSIGTERM(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node := testenv.StartRealNode(t, suite.Kube, testenv.RealNodeOptions{Images: suite.Images})
	ns := suite.Kube.Namespace(t)
	records := t.TempDir()
	spec := testenv.WorkloadSpec{Namespace: ns, Name: "recorder", Node: node.Name, RecordDir: records,
		PreStop: 2 * time.Second, Shutdown: 2 * time.Second, Grace: 10 * time.Second}
	startWorkloads(ctx, t, spec)

	evicted := time.Now()
	err := suite.Kube.Client.CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: spec.Name}})
	if err != nil {
		t.Fatalf("evicting: %v", err)
	}
	gone, err := suite.Kube.WaitPodGone(ctx, ns, spec.Name)
	if err != nil {
		t.Fatal(err)
	}
	rec := readRecord(t, spec)
	t.Logf("record: %s; pod gone %.2fs after the eviction", rec, gone.Sub(evicted).Seconds())
	assertGracefulShutdown(t, rec, spec)
	if exit, _ := rec.At(testenv.WorkloadExit); gone.Before(exit) {
		t.Errorf("pod gone at %v, before the process exited at %v", gone, exit)
	}
}
