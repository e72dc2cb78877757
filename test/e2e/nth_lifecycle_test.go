package e2e

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"k8s.io/apimachinery/pkg/util/intstr"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

// NTH's lifecycle timing, set with NTH's variables, on a scale-in:
// COMPLETE_LIFECYCLE_ACTION_DELAY_SECONDS holds the completion (under
// heartbeats) after the drain; HEARTBEAT_UNTIL stops the heartbeats of a
// drain that outlasts it, and the action then times out with the hook's
// default result.
func TestNTHLifecycleTiming(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     []string
		guarded bool // a PodDisruptionBudget keeps the node's pod: the drain never ends by itself
	}{
		{"complete delay", []string{"COMPLETE_LIFECYCLE_ACTION_DELAY_SECONDS=5"}, false},
		{"heartbeat until", []string{"HEARTBEAT_UNTIL=4"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Time is scaled: the 2 s heartbeat timeout stands for AWS's
			// 30 s minimum, so the 5 s --deadline-margin (kept before the
			// action's timeout, issue 23 item 2) scales to 300 ms.
			flags := []string{"--deadline-margin", "300ms"}
			if tc.guarded {
				// The budget keeps the drain open: its pod is not deleted
				// before the action's end.
				flags = append(flags, "--delete-blocked-pods-before-deadline=false")
			}
			h := newHarness(t, harnessOptions{env: tc.env, flags: flags})
			group := "nthlc-" + testenv.UniqueName("g")
			id := h.CreateGroup(group, 1)[0]
			node := h.NodeName(id)
			// Heartbeat timeout 2 s (simulator-only; time is scaled).
			h.PutHook(group, "drain", terminating, 2, "ABANDON")
			ns := kube.Namespace(t)
			if _, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: node, Labels: map[string]string{"app": "nthlc"}, ShutdownAfter: time.Second}); err != nil {
				t.Fatal(err)
			}
			if tc.guarded {
				one := intstr.FromInt32(1)
				if _, err := kube.CreatePDB(h.Ctx, testenv.PDBSpec{Namespace: ns, Name: "guard", Selector: map[string]string{"app": "nthlc"}, MinAvailable: &one}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := h.AS.SetDesiredCapacity(h.Ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(0)}); err != nil {
				t.Fatal(err)
			}
			var action awssim.Action
			h.Eventually(45*time.Second, "the terminate action to end", func() bool {
				a, ok := h.ActionFor(id, terminating)
				action = a
				return ok && !a.Active()
			})
			took := action.Completed.Sub(action.Started)
			switch tc.name {
			case "complete delay":
				// The pod leaves in ~1 s; the completion follows 5 s later.
				if action.CompletedBy != awssim.CompletedByAPI || action.Result != "CONTINUE" {
					t.Fatalf("action ended by %s with %s, want CompleteLifecycleAction CONTINUE", action.CompletedBy, action.Result)
				}
				if took < 5*time.Second || took > 12*time.Second {
					t.Errorf("action completed %v after it started; want the ~1 s drain plus the 5 s delay", took)
				}
				if action.Heartbeats < 2 {
					t.Errorf("heartbeats = %d; the 5 s delay outlasts the 2 s heartbeat timeout only with heartbeats", action.Heartbeats)
				}
				if h.NodeEvents(node, "LifecycleDelayed") < 1 {
					t.Error("no LifecycleDelayed Event on the node")
				}
			case "heartbeat until":
				// Heartbeats stop 4 s after the start (about one a second:
				// half the 2 s heartbeat timeout), and the action ends one
				// heartbeat timeout later: by the timeout, or by lifeboat
				// completing it at the drain's deadline, which it knows is
				// then (--lifecycle-timeout-result, CONTINUE). Without the
				// cap the PDB would hold it under heartbeats.
				if took < 3*time.Second || took > 9*time.Second {
					t.Errorf("action ended %v after it started; want about HEARTBEAT_UNTIL (4 s) plus the 2 s heartbeat timeout", took)
				}
				if action.Heartbeats < 1 || action.Heartbeats > 7 {
					t.Errorf("heartbeats = %d; want those of the first 4 s only (about 4)", action.Heartbeats)
				}
				t.Logf("action ended by %s with %s after %v and %d heartbeats", action.CompletedBy, action.Result, took, action.Heartbeats)
			}
		})
	}
}
