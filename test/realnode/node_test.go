package realnode

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/test/testenv"
)

// TestTwoNodesPowerOffAndTeardown: two real nodes run side by side, each
// with a pod. Powering one off kills its pod's process at once, without
// SIGTERM (its record stops at "ready"), and leaves the other node's pod
// untouched. Teardown leaves no process, mount, cgroup, bridge or
// directory of either behind.
func TestTwoNodesPowerOffAndTeardown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := testenv.StartRealNode(t, suite.Kube, testenv.RealNodeOptions{Images: suite.Images})
	b := testenv.StartRealNode(t, suite.Kube, testenv.RealNodeOptions{Images: suite.Images})
	if a.PodCIDR == b.PodCIDR || a.Socket == b.Socket || a.Dir == b.Dir {
		t.Fatalf("the two nodes share a subnet, socket or directory: %+v / %+v", a, b)
	}
	ns := suite.Kube.Namespace(t)
	records := t.TempDir()
	onA := testenv.WorkloadSpec{Namespace: ns, Name: "on-a", Node: a.Name, RecordDir: records, PreStop: time.Second, Shutdown: time.Second, Grace: 10 * time.Second}
	onB := testenv.WorkloadSpec{Namespace: ns, Name: "on-b", Node: b.Name, RecordDir: records, PreStop: time.Second, Shutdown: time.Second, Grace: 10 * time.Second}
	startWorkloads(ctx, t, onA, onB)
	procsB := b.Processes()
	if len(a.Processes()) == 0 || len(procsB) == 0 {
		t.Fatalf("no process in the nodes' cgroup subtrees (%d, %d)", len(a.Processes()), len(procsB))
	}

	a.PowerOff()
	if rec := readRecord(t, onA); rec.Count(testenv.WorkloadSIGTERM) != 0 || rec.Count(testenv.WorkloadPreStopBegin) != 0 {
		t.Errorf("pod on-a got a shutdown from a power-off: %s", rec)
	}
	if n := len(a.Processes()); n != 0 {
		t.Errorf("node %s: %d processes left in its cgroup subtree after the power-off", a.Name, n)
	}
	for _, pid := range procsB {
		if !alive(pid) {
			t.Errorf("process %d of node %s died with the power-off of the other node", pid, b.Name)
		}
	}
	if rec := readRecord(t, onB); rec.Count(testenv.WorkloadSIGTERM) != 0 {
		t.Errorf("pod on-b got SIGTERM from the power-off of the other node: %s", rec)
	}

	a.Close()
	b.Close()
	for _, n := range []*testenv.RealNode{a, b} {
		if left := n.Traces(); len(left) > 0 {
			t.Errorf("node %s left behind: %q", n.Name, left)
		}
	}
	for _, pid := range procsB {
		if alive(pid) {
			t.Errorf("process %d of node %s survived its teardown", pid, b.Name)
		}
	}
}

// alive reports whether a process exists and is not a zombie (a killed
// process whose parent, init for orphaned container processes, has not
// reaped it yet).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	return ok && !strings.HasPrefix(rest, "Z")
}
