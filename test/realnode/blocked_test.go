package realnode

import (
	"testing"
	"time"

	"lifeboat.dev/lifeboat/test/testenv"
)

// Issue 25 item 2 on a real node: a pod a PodDisruptionBudget allowing no
// disruption blocks, with a 20 s preStop hook and a 2 s SIGTERM handler
// (grace 30 s), on an instance whose Spot notice leaves 45 s. By default
// lifeboat deletes it at the deadline less its grace period less
// --deadline-margin, and its own record shows the hook and the handler
// both finished before the power-off at the deadline. With
// --delete-blocked-pods-before-deadline=false (lifeboat before the
// feature) its shutdown never starts: the power-off kills it.
func TestBlockedPodShutsDownBeforePowerOff(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		on    bool
	}{
		{name: "default: deleted in time for its shutdown", on: true},
		{name: "off: killed by the power-off (the harm)", flags: []string{"--delete-blocked-pods-before-deadline=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, worldOptions{lifeboat: true, flags: tc.flags})
			id := w.CreateGroup(testenv.UniqueName("blocked"), 1)[0]
			pod := w.workload("guarded", id, 20*time.Second, 2*time.Second, 30*time.Second)
			pod.Labels = map[string]string{"app": "guarded"}
			startWorkloads(w.Ctx, t, pod)
			if err := suite.Kube.GuardPod(w.Ctx, w.ns, "guarded"); err != nil {
				t.Fatal(err)
			}

			deadline := time.Now().Add(45 * time.Second)
			w.PutEvent("aws.ec2", "EC2 Spot Instance Interruption Warning", deadline.Add(-2*time.Minute), map[string]string{"instance-id": id, "instance-action": "terminate"})
			time.Sleep(time.Until(deadline))
			w.terminate(id)
			off, _ := w.machines.PoweredOff(id)
			rec := readRecord(t, pod)
			t.Logf("record: %s", rec)
			if !tc.on {
				if rec.Count(testenv.WorkloadPreStopBegin) != 0 || rec.Count(testenv.WorkloadSIGTERM) != 0 {
					t.Errorf("want no shutdown before the power-off with the option off (the budget holds the eviction); record: %s", rec)
				}
				return
			}
			begin, _ := rec.At(testenv.WorkloadPreStopBegin)
			t.Logf("preStop began %v before the power-off (deadline - grace 30 s - margin 5 s: 35 s)", off.Sub(begin).Round(time.Second))
			if rec.Count(testenv.WorkloadPreStopBegin) != 1 || rec.Count(testenv.WorkloadPreStopEnd) != 1 {
				t.Errorf("want the 20 s preStop hook begun and ended once; record: %s", rec)
			}
			if rec.Count(testenv.WorkloadSIGTERM) != 1 || !rec.Finished() {
				t.Errorf("want SIGTERM and the handler finished; record: %s", rec)
			}
			if exit, ok := rec.At(testenv.WorkloadExit); !ok || !exit.Before(off) {
				t.Errorf("the process exited at %v (recorded: %v), not before the power-off at %v", exit, ok, off)
			}
			if n := w.Lifeboat.CountLogs(`"msg":"BlockedPodDeleted"`, "disruption budget guard"); n != 1 {
				t.Errorf("lifeboat logged %d BlockedPodDeleted naming the budget, want 1", n)
			}
		})
	}
}
