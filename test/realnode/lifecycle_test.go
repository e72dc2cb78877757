package realnode

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"

	"lifeboat.dev/lifeboat/test/awssim"
)

const (
	launching   = "autoscaling:EC2_INSTANCE_LAUNCHING"
	terminating = "autoscaling:EC2_INSTANCE_TERMINATING"
)

// setDesired sets a group's desired capacity.
func (w *world) setDesired(group string, n int32) {
	w.T.Helper()
	if _, err := w.AS.SetDesiredCapacity(w.Ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(n)}); err != nil {
		w.T.Fatal(err)
	}
}

// TestScaleInHookShorterThanShutdown is seed 003 (F4) on real pods: the
// group scales in; its terminate hook times out after 3 s (CONTINUE), and
// the pod's SIGTERM handler needs 8 s to finish its work (grace 60 s).
//
//   - without lifeboat: nobody drains; the hook times out, the instance is
//     powered off and the process is cut off mid-work.
//   - with lifeboat: the pod is evicted (preStop, then SIGTERM), the action
//     is heartbeated past its 3 s timeout, the handler finishes its work,
//     and only then is the action completed with CONTINUE and the instance
//     powered off.
func TestScaleInHookShorterThanShutdown(t *testing.T) {
	for _, c := range []struct {
		name     string
		lifeboat bool
	}{{"without lifeboat", false}, {"with lifeboat", true}} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, worldOptions{lifeboat: c.lifeboat})
			id := w.CreateGroup("scalein", 1)[0]
			w.PutHook("scalein", "drain", terminating, 3, "CONTINUE")
			pod := w.workload("data-job", id, time.Second, 8*time.Second, 60*time.Second)
			startWorkloads(w.Ctx, t, pod)

			start := time.Now()
			w.setDesired("scalein", 0)
			w.Eventually(45*time.Second, "the instance powered off", func() bool {
				_, ok := w.machines.PoweredOff(id)
				return ok
			})
			off, _ := w.machines.PoweredOff(id)
			a, _ := w.ActionFor(id, terminating)
			rec := readRecord(t, pod)
			t.Logf("record: %s; action %s by %s after %.2fs (%d heartbeats); powered off %.2fs after the scale-in",
				rec, a.Result, a.CompletedBy, a.Completed.Sub(start).Seconds(), a.Heartbeats, off.Sub(start).Seconds())

			if !c.lifeboat {
				if a.CompletedBy != awssim.CompletedByHeartbeatTimeout {
					t.Errorf("terminate action ended by %s, want the hook timeout", a.CompletedBy)
				}
				assertCutOff(t, rec, pod)
				return
			}
			assertGracefulShutdown(t, rec, pod)
			if a.CompletedBy != awssim.CompletedByAPI || a.Result != "CONTINUE" || a.Completions != 1 {
				t.Fatalf("terminate action: %+v; want completed once with CONTINUE by lifeboat", a)
			}
			if a.Heartbeats < 1 {
				t.Errorf("no heartbeat: the 8 s shutdown outlasts the 3 s hook timeout only with heartbeats")
			}
			if exit, _ := rec.At("exit"); a.Completed.Before(exit) {
				t.Errorf("action completed at %v, before the SIGTERM handler finished at %v", a.Completed, exit)
			}
			if off.Before(a.Completed) {
				t.Errorf("powered off at %v, before the action was completed at %v", off, a.Completed)
			}
		})
	}
}

// TestWarmPoolLaunchCompletedOnceReady is seed 000 (F1) on a real kubelet.
// An instance waits, stopped, in the warm pool; the launch hook (3 s
// timeout, ABANDON) is added after it got there, as in the field report.
// The group scales out: the instance leaves the pool and boots a real
// kubelet, which takes 4 s before it starts (longer than the hook's
// timeout).
//
//   - without lifeboat: nobody completes the launch action; it times out
//     with ABANDON and the instance is terminated.
//   - with lifeboat: the action is heartbeated while the node boots and
//     completed with CONTINUE once the node is Ready, never before.
func TestWarmPoolLaunchCompletedOnceReady(t *testing.T) {
	for _, c := range []struct {
		name     string
		lifeboat bool
	}{{"without lifeboat", false}, {"with lifeboat", true}} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, worldOptions{lifeboat: c.lifeboat, bootDelay: 4 * time.Second})
			const group = "warm"
			w.CreateGroup(group, 0)
			if _, err := w.AS.PutWarmPool(w.Ctx, &autoscaling.PutWarmPoolInput{AutoScalingGroupName: aws.String(group), MinSize: aws.Int32(0),
				MaxGroupPreparedCapacity: aws.Int32(1), PoolState: astypes.WarmPoolStateStopped}); err != nil {
				t.Fatal(err)
			}
			var id string
			w.Eventually(20*time.Second, "an instance Warmed:Stopped", func() bool {
				for _, in := range w.Sim.Instances() {
					if in.GroupName == group && in.LifecycleState == astypes.LifecycleStateWarmedStopped {
						id = in.ID
						return true
					}
				}
				return false
			})
			w.PutHook(group, "launch", launching, 3, "ABANDON")

			start := time.Now()
			w.setDesired(group, 1)
			w.Eventually(45*time.Second, "the launch action ended", func() bool {
				a, ok := w.ActionFor(id, launching)
				return ok && !a.Active()
			})
			a, _ := w.ActionFor(id, launching)
			in, _ := w.Sim.Instance(id)
			t.Logf("action %s -> %s: %s by %s after %.2fs (%d heartbeats); instance %s",
				a.Origin, a.Destination, a.Result, a.CompletedBy, a.Completed.Sub(start).Seconds(), a.Heartbeats, in.LifecycleState)
			if a.Origin != "WarmPool" || a.Destination != "AutoScalingGroup" {
				t.Fatalf("action %s -> %s, want WarmPool -> AutoScalingGroup", a.Origin, a.Destination)
			}
			if !c.lifeboat {
				if a.CompletedBy != awssim.CompletedByHeartbeatTimeout || a.Result != "ABANDON" {
					t.Errorf("launch action ended %s by %s, want ABANDON by the hook timeout", a.Result, a.CompletedBy)
				}
				w.Eventually(10*time.Second, "the abandoned instance terminated", func() bool {
					in, _ := w.Sim.Instance(id)
					return in.EC2State == "terminated"
				})
				w.setDesired(group, 0) // no replacement boots meanwhile
				return
			}
			if a.CompletedBy != awssim.CompletedByAPI || a.Result != "CONTINUE" || a.Completions != 1 {
				t.Fatalf("launch action: %+v; want completed once with CONTINUE by lifeboat", a)
			}
			// lifeboat sees the node Ready through its watch, possibly
			// before the machine's boot returns here and records when the
			// kubelet reported Ready (from the condition): wait for that.
			w.Eventually(10*time.Second, "the boot of "+id+" recorded", func() bool {
				return !w.ReadyAt(id).IsZero() && w.machines.Node(id) != nil
			})
			ready := w.ReadyAt(id)
			t.Logf("node Ready at +%.2fs (the condition's time, whole seconds)", ready.Sub(start).Seconds())
			if a.Completed.Before(ready) {
				t.Errorf("launch completed at %v, node Ready at %v: completed before the node was Ready", a.Completed, ready)
			}
			if a.Heartbeats < 1 {
				t.Errorf("no heartbeat: the 4 s boot outlasts the 3 s hook timeout only with heartbeats")
			}
			w.Eventually(10*time.Second, "the instance InService", func() bool {
				in, _ := w.Sim.Instance(id)
				return in.LifecycleState == astypes.LifecycleStateInService
			})
		})
	}
}
