package realnode

import (
	"strings"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/test/testenv"
)

// spotDeadline is the scaled Spot notice: AWS gives two minutes, the test
// powers the instance off this long after the notice.
const spotDeadline = 12 * time.Second

// TestSpotInterruptionEventBridge is seed 002 (F3) on real pods. A Spot
// interruption warning reaches the queue through EventBridge; the instance
// is powered off spotDeadline later. The pod's preStop takes 3 s and its
// SIGTERM handler 3 s.
//
//   - without lifeboat: nothing drains; the process is cut off at the
//     power-off, its preStop never ran.
//   - with the field report's detail-type typo in the rule: lifeboat runs
//     but never hears of the interruption; the same harm; `lifeboat check`
//     names the typo.
//   - with lifeboat: preStop runs to its end, then SIGTERM, the handler
//     finishes, all before the power-off.
func TestSpotInterruptionEventBridge(t *testing.T) {
	for _, c := range []struct {
		name     string
		lifeboat bool
		typo     bool
	}{
		{name: "without lifeboat"},
		{name: "detail-type typo", lifeboat: true, typo: true},
		{name: "with lifeboat", lifeboat: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, worldOptions{lifeboat: c.lifeboat})
			if c.typo {
				w.breakSpotRule()
			}
			id := w.CreateGroup("spot", 1)[0]
			pod := w.workload("spot-job", id, 3*time.Second, 3*time.Second, 30*time.Second)
			startWorkloads(w.Ctx, t, pod)

			sent := time.Now()
			w.PutEvent("aws.ec2", "EC2 Spot Instance Interruption Warning", sent, map[string]string{"instance-id": id, "instance-action": "terminate"})
			time.Sleep(time.Until(sent.Add(spotDeadline)))
			w.terminate(id)
			off, _ := w.machines.PoweredOff(id)
			rec := readRecord(t, pod)
			t.Logf("record: %s; powered off %.2fs after the notice", rec, off.Sub(sent).Seconds())

			if !c.lifeboat || c.typo {
				assertCutOff(t, rec, pod)
			}
			if c.typo {
				out := w.check()
				if !strings.Contains(out, `"EC2 Spot Interruption Warning"`) || !strings.Contains(out, `did you mean "EC2 Spot Instance Interruption Warning"`) {
					t.Errorf("lifeboat check does not name the typo; output:\n%s", out)
				}
			}
			if c.lifeboat && !c.typo {
				assertGracefulShutdown(t, rec, pod)
				if exit, ok := rec.At(testenv.WorkloadExit); ok && !exit.Before(off) {
					t.Errorf("the process exited at %v, not before the power-off at %v", exit, off)
				}
			}
		})
	}
}
