package realnode

import (
	"testing"
	"time"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

// TestFaultsMidDrain: a scale-in (terminate hook, 3 s timeout) drains two
// real pods whose preStop takes 3 s and whose SIGTERM handler takes 2 s;
// while both are in preStop, one component is killed with SIGKILL and
// started again. Whatever restarts, each pod's handler finished, nothing
// restarted a container, and the lifecycle action was completed once, with
// CONTINUE, after both pods had exited. A lifeboat restart runs no preStop
// a second time. A kubelet or containerd restart does: Kubernetes delivers
// hooks at least once, and the restarted kubelet runs the hook again (the
// kubelet's kill cancels the hook's exec; containerd's leaves the kubelet
// without an answer) — measured here, not lifeboat's to prevent.
func TestFaultsMidDrain(t *testing.T) {
	for _, c := range []struct {
		name        string
		fault       func(w *world, node *testenv.RealNode) error
		preStopOnce bool
	}{
		{"lifeboat killed", func(w *world, _ *testenv.RealNode) error { return w.Lifeboat.Restart(w.Ctx) }, true},
		{"kubelet killed", func(_ *world, n *testenv.RealNode) error { return n.RestartKubelet() }, false},
		{"containerd killed", func(w *world, n *testenv.RealNode) error { return n.RestartContainerd(w.Ctx) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, worldOptions{lifeboat: true})
			id := w.CreateGroup("fault", 1)[0]
			w.PutHook("fault", "drain", terminating, 3, "CONTINUE")
			pods := []testenv.WorkloadSpec{
				w.workload("job-a", id, 3*time.Second, 2*time.Second, 30*time.Second),
				w.workload("job-b", id, 3*time.Second, 2*time.Second, 30*time.Second),
			}
			startWorkloads(w.Ctx, t, pods...)
			node := w.machines.Node(id)

			w.setDesired("fault", 0)
			w.Eventually(20*time.Second, "both pods in preStop", func() bool {
				for _, p := range pods {
					if readRecord(t, p).Count(testenv.WorkloadPreStopBegin) == 0 {
						return false
					}
				}
				return true
			})
			if err := c.fault(w, node); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			w.Eventually(60*time.Second, "the instance powered off", func() bool {
				_, ok := w.machines.PoweredOff(id)
				return ok
			})
			a, _ := w.ActionFor(id, terminating)
			t.Logf("action %s by %s, %d completions, %d rejected, %d heartbeats", a.Result, a.CompletedBy, a.Completions, a.Rejected, a.Heartbeats)
			for _, p := range pods {
				rec := readRecord(t, p)
				t.Logf("%s: %s", p.Name, rec)
				assertShutdown(t, rec, p, c.preStopOnce)
				if n := rec.Count(testenv.WorkloadStarted); n != 1 {
					t.Errorf("%s started %d times, want once (a restarted container would run preStop again)", p.Name, n)
				}
				if exit, ok := rec.At(testenv.WorkloadExit); ok && a.Completed.Before(exit) {
					t.Errorf("action completed at %v, before %s exited at %v", a.Completed, p.Name, exit)
				}
			}
			if a.CompletedBy != awssim.CompletedByAPI || a.Result != "CONTINUE" || a.Completions != 1 {
				t.Errorf("terminate action: %s by %s with %d completions; want completed once with CONTINUE by lifeboat", a.Result, a.CompletedBy, a.Completions)
			}
		})
	}
}

// TestSpotDeadlineDuringPreStop: the instance goes while a pod would still
// be in its preStop hook. A Spot notice whose two minutes are nearly over
// (its time 112 s ago: 8 s left) reaches lifeboat; the pod's preStop takes
// 20 s, its SIGTERM handler 1 s, its grace period is 60 s. lifeboat evicts
// it with the grace period cut to AWS's deadline, so the kubelet ends the
// hook early and sends SIGTERM in time: the hook is cut short (measured:
// the kubelet's budget for preStop is the grace period), but the handler
// finishes before the power-off, and lifeboat's Drained report says the
// grace was cut.
func TestSpotDeadlineDuringPreStop(t *testing.T) {
	w := newWorld(t, worldOptions{lifeboat: true})
	id := w.CreateGroup("late", 1)[0]
	pod := w.workload("slow-hook", id, 20*time.Second, time.Second, 60*time.Second)
	startWorkloads(w.Ctx, t, pod)

	deadline := time.Now().Add(8 * time.Second)
	w.PutEvent("aws.ec2", "EC2 Spot Instance Interruption Warning", deadline.Add(-2*time.Minute), map[string]string{"instance-id": id, "instance-action": "terminate"})
	time.Sleep(time.Until(deadline))
	w.terminate(id)
	off, _ := w.machines.PoweredOff(id)
	rec := readRecord(t, pod)
	t.Logf("record: %s", rec)
	if rec.Count(testenv.WorkloadPreStopBegin) != 1 || rec.Count(testenv.WorkloadPreStopEnd) != 0 {
		t.Errorf("want the 20 s preStop hook begun once and cut short by the capped grace period; record: %s", rec)
	}
	if rec.Count(testenv.WorkloadSIGTERM) != 1 || !rec.Finished() {
		t.Errorf("want SIGTERM and the handler finished despite the short notice; record: %s", rec)
	}
	if exit, ok := rec.At(testenv.WorkloadExit); ok && !exit.Before(off) {
		t.Errorf("the process exited at %v, not before the power-off at %v", exit, off)
	}
	if n := w.Lifeboat.CountLogs(`"msg":"Drained"`, "grace cut to AWS's deadline"); n != 1 {
		t.Errorf("lifeboat logged %d Drained reports with the grace cut to the deadline, want 1", n)
	}
}
