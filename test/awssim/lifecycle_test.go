package awssim_test

import (
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/test/awssim"
)

// startAction brings one instance of group "g" to the wait state of
// transition with a hook "h" of heartbeat seconds and defaultResult, and
// returns its action. For a terminate hook the instance is launched first
// and the hook is put while it is InService.
func startAction(t *testing.T, e *env, transition string, heartbeat int32, defaultResult string) awssim.Action {
	t.Helper()
	if transition == launching {
		e.createGroup(t, "g", 0, 2, 1, hookSpec("h", launching, heartbeat, defaultResult))
	} else {
		e.createGroup(t, "g", 0, 2, 1)
		waitFor(t, 5*time.Second, "one instance InService", func() bool {
			st := e.states(t)
			return len(st) == 1 && st[onlyKey(t, st)] == astypes.LifecycleStateInService
		})
		e.putHook(t, "g", "h", terminating, heartbeat, defaultResult)
		e.setDesired(t, "g", 0)
	}
	return e.waitActions(t, 1)[0]
}

func TestLifecycleActionDefaultResultOnTimeout(t *testing.T) {
	tests := []struct {
		name          string
		transition    string
		defaultResult string
		wantState     astypes.LifecycleState
		wantEC2       string
	}{
		{"launch ABANDON terminates the instance", launching, "ABANDON", astypes.LifecycleStateTerminated, "terminated"},
		{"launch CONTINUE puts the instance in service", launching, "CONTINUE", astypes.LifecycleStateInService, "running"},
		{"terminate CONTINUE terminates the instance", terminating, "CONTINUE", astypes.LifecycleStateTerminated, "terminated"},
		{"terminate ABANDON terminates the instance", terminating, "ABANDON", astypes.LifecycleStateTerminated, "terminated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, awssim.Options{})
			a := startAction(t, e, tt.transition, 1, tt.defaultResult)
			if got := a.Deadline.Sub(a.Started); got != time.Second {
				t.Errorf("deadline is %v after start, want 1s", got)
			}
			waitFor(t, 5*time.Second, "the action to time out", func() bool {
				got, _ := e.sim.Action(a.Token)
				return !got.Active()
			})
			got, _ := e.sim.Action(a.Token)
			if got.Result != tt.defaultResult || got.CompletedBy != awssim.CompletedByHeartbeatTimeout {
				t.Errorf("action ended %s by %s, want %s by %s", got.Result, got.CompletedBy, tt.defaultResult, awssim.CompletedByHeartbeatTimeout)
			}
			if elapsed := got.Completed.Sub(got.Started); elapsed < time.Second {
				t.Errorf("action ended %v after it started, before its 1s timeout", elapsed)
			}
			in, _ := e.sim.Instance(a.InstanceID)
			if in.LifecycleState != tt.wantState {
				t.Errorf("instance is %s, want %s", in.LifecycleState, tt.wantState)
			}
			if st := e.ec2State(t, a.InstanceID); st != tt.wantEC2 {
				t.Errorf("EC2 state is %s, want %s", st, tt.wantEC2)
			}
			if tt.wantState == astypes.LifecycleStateTerminated {
				waitFor(t, 2*time.Second, "OnInstanceGone", func() bool {
					_, gone := e.callbacks()
					return slices.Contains(gone, a.InstanceID)
				})
			}
			if tt.transition == launching && tt.defaultResult == "ABANDON" {
				// The group keeps its desired capacity: a replacement
				// launches and waits on the hook in turn.
				waitFor(t, 5*time.Second, "a replacement instance", func() bool {
					for _, x := range e.activeActions() {
						if x.InstanceID != a.InstanceID {
							return true
						}
					}
					return false
				})
			}
		})
	}
}

// TestHeartbeatKeepsActionAlive runs on a fake clock: with the real one a
// loaded machine can stretch a request past a short timeout.
func TestHeartbeatKeepsActionAlive(t *testing.T) {
	tests := []struct {
		name       string
		transition string
		byInstance bool // heartbeat by instance ID instead of token
		wantWait   astypes.LifecycleState
		wantFinal  astypes.LifecycleState
	}{
		{"launch, by token", launching, false, astypes.LifecycleStatePendingWait, astypes.LifecycleStateInService},
		{"terminate, by instance ID", terminating, true, astypes.LifecycleStateTerminatingWait, astypes.LifecycleStateTerminated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			e := newEnv(t, awssim.Options{Clock: fc, MinHeartbeatTimeout: awssim.AWSMinHeartbeatTimeout})
			a := startAction(t, e, tt.transition, 30, "ABANDON")
			in := &autoscaling.RecordLifecycleActionHeartbeatInput{AutoScalingGroupName: aws.String("g"), LifecycleHookName: aws.String("h")}
			if tt.byInstance {
				in.InstanceId = aws.String(a.InstanceID)
			} else {
				in.LifecycleActionToken = aws.String(a.Token)
			}
			// Five heartbeats 25 s apart: 125 s, four timeouts' worth.
			for range 5 {
				fc.Step(25 * time.Second)
				if _, err := e.as.RecordLifecycleActionHeartbeat(t.Context(), in); err != nil {
					t.Fatalf("RecordLifecycleActionHeartbeat at +%v: %v", fc.Now().Sub(a.Started), err)
				}
			}
			fc.Step(25 * time.Second)
			if st := e.states(t)[a.InstanceID]; st != tt.wantWait {
				t.Fatalf("instance is %s, want %s", st, tt.wantWait)
			}
			got, _ := e.sim.Action(a.Token)
			if !got.Active() || got.Heartbeats != 5 || !got.Deadline.Equal(a.Started.Add(155*time.Second)) {
				t.Fatalf("after heartbeats the action is %+v, want active with 5 heartbeats and its deadline 30 s after the last", got)
			}
			e.complete(t, a, "CONTINUE")
			inst, _ := e.sim.Instance(a.InstanceID)
			if inst.LifecycleState != tt.wantFinal {
				t.Errorf("after CONTINUE the instance is %s, want %s", inst.LifecycleState, tt.wantFinal)
			}
			got, _ = e.sim.Action(a.Token)
			if got.Result != "CONTINUE" || got.CompletedBy != awssim.CompletedByAPI || got.Completions != 1 {
				t.Errorf("action = %+v, want CONTINUE by the API once", got)
			}
		})
	}
}

func TestCompleteLifecycleActionTwice(t *testing.T) {
	e := newEnv(t, awssim.Options{})
	a := startAction(t, e, launching, 60, "ABANDON")
	e.complete(t, a, "CONTINUE")

	calls := []struct {
		name    string
		call    func() error
		message string
	}{
		{"complete by token", func() error {
			_, err := e.as.CompleteLifecycleAction(t.Context(), &autoscaling.CompleteLifecycleActionInput{
				AutoScalingGroupName: aws.String("g"), LifecycleHookName: aws.String("h"),
				LifecycleActionToken: aws.String(a.Token), LifecycleActionResult: aws.String("CONTINUE"),
			})
			return err
		}, "No active Lifecycle Action found with token " + a.Token},
		{"complete by instance ID", func() error {
			_, err := e.as.CompleteLifecycleAction(t.Context(), &autoscaling.CompleteLifecycleActionInput{
				AutoScalingGroupName: aws.String("g"), LifecycleHookName: aws.String("h"),
				InstanceId: aws.String(a.InstanceID), LifecycleActionResult: aws.String("CONTINUE"),
			})
			return err
		}, "No active Lifecycle Action found with instance ID " + a.InstanceID},
		{"heartbeat by token", func() error {
			_, err := e.as.RecordLifecycleActionHeartbeat(t.Context(), &autoscaling.RecordLifecycleActionHeartbeatInput{
				AutoScalingGroupName: aws.String("g"), LifecycleHookName: aws.String("h"), LifecycleActionToken: aws.String(a.Token),
			})
			return err
		}, "No active Lifecycle Action found with token " + a.Token},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			wantAPIError(t, c.call(), "ValidationError", c.message)
		})
	}
	got, _ := e.sim.Action(a.Token)
	if got.Completions != 1 || got.Rejected != 3 {
		t.Errorf("action counts completions=%d rejected=%d, want 1 and 3", got.Completions, got.Rejected)
	}
	if n := e.sim.Calls("CompleteLifecycleAction"); n != 3 {
		t.Errorf("CompleteLifecycleAction calls = %d, want 3", n)
	}
	if in, _ := e.sim.Instance(a.InstanceID); in.LifecycleState != astypes.LifecycleStateInService {
		t.Errorf("instance is %s, want InService", in.LifecycleState)
	}
}

func TestHookAddedAfterLaunchGivesNoAction(t *testing.T) {
	e := newEnv(t, awssim.Options{})
	e.createGroup(t, "g", 0, 2, 1)
	var id string
	waitFor(t, 5*time.Second, "one instance InService", func() bool {
		st := e.states(t)
		for k, v := range st {
			id = k
			return len(st) == 1 && v == astypes.LifecycleStateInService
		}
		return false
	})
	e.putHook(t, "g", "h", launching, 60, "ABANDON")
	_, err := e.as.CompleteLifecycleAction(t.Context(), &autoscaling.CompleteLifecycleActionInput{
		AutoScalingGroupName: aws.String("g"), LifecycleHookName: aws.String("h"),
		InstanceId: aws.String(id), LifecycleActionResult: aws.String("CONTINUE"),
	})
	wantAPIError(t, err, "ValidationError", "No active Lifecycle Action found with instance ID "+id)
	if n := len(e.sim.Actions()); n != 0 {
		t.Errorf("%d lifecycle actions exist, want none", n)
	}
}

func TestGlobalTimeoutInDescribe(t *testing.T) {
	e := newEnv(t, awssim.Options{})
	e.createGroup(t, "g", 0, 1, 0)
	tests := []struct {
		heartbeat  int32
		wantGlobal int32
	}{
		{1, 100}, // below AWS's 30 s: simulator only
		{30, 3000},
		{300, 30000},
		{1728, 172800},
		{3600, 172800},
		{7200, 172800},
	}
	for _, tt := range tests {
		e.putHook(t, "g", "h", terminating, tt.heartbeat, "CONTINUE")
		out, err := e.as.DescribeLifecycleHooks(t.Context(), &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: aws.String("g")})
		if err != nil {
			t.Fatal(err)
		}
		h := out.LifecycleHooks[0]
		if aws.ToInt32(h.HeartbeatTimeout) != tt.heartbeat || aws.ToInt32(h.GlobalTimeout) != tt.wantGlobal {
			t.Errorf("heartbeat %d: described HeartbeatTimeout=%d GlobalTimeout=%d, want GlobalTimeout %d", tt.heartbeat, aws.ToInt32(h.HeartbeatTimeout), aws.ToInt32(h.GlobalTimeout), tt.wantGlobal)
		}
	}
	// Defaults: 3600 s, ABANDON.
	if _, err := e.as.PutLifecycleHook(t.Context(), &autoscaling.PutLifecycleHookInput{
		AutoScalingGroupName: aws.String("g"), LifecycleHookName: aws.String("d"), LifecycleTransition: aws.String(launching),
	}); err != nil {
		t.Fatal(err)
	}
	out, err := e.as.DescribeLifecycleHooks(t.Context(), &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: aws.String("g"), LifecycleHookNames: []string{"d"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []astypes.LifecycleHook{{
		AutoScalingGroupName: aws.String("g"), LifecycleHookName: aws.String("d"), LifecycleTransition: aws.String(launching),
		HeartbeatTimeout: aws.Int32(3600), GlobalTimeout: aws.Int32(172800), DefaultResult: aws.String("ABANDON"),
	}}
	if diff := cmp.Diff(want, out.LifecycleHooks, cmp.AllowUnexported(astypes.LifecycleHook{})); diff != "" {
		t.Errorf("DescribeLifecycleHooks (-want +got):\n%s", diff)
	}
}

func TestHeartbeatsStopAtGlobalTimeout(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	e := newEnv(t, awssim.Options{Clock: fc, MinHeartbeatTimeout: awssim.AWSMinHeartbeatTimeout})
	a := startAction(t, e, terminating, 30, "CONTINUE")
	if got := a.GlobalDeadline.Sub(a.Started); got != 3000*time.Second {
		t.Fatalf("global deadline is %v after start, want 3000s", got)
	}
	heartbeat := func() error {
		_, err := e.as.RecordLifecycleActionHeartbeat(t.Context(), &autoscaling.RecordLifecycleActionHeartbeatInput{
			AutoScalingGroupName: aws.String("g"), LifecycleHookName: aws.String("h"), LifecycleActionToken: aws.String(a.Token),
		})
		return err
	}
	// Heartbeat every 20 s (of the fake clock) up to the global deadline.
	for fc.Now().Add(20 * time.Second).Before(a.GlobalDeadline) {
		fc.Step(20 * time.Second)
		if err := heartbeat(); err != nil {
			t.Fatalf("heartbeat at +%v: %v", fc.Now().Sub(a.Started), err)
		}
	}
	got, _ := e.sim.Action(a.Token)
	if !got.Active() || !got.Deadline.Equal(a.GlobalDeadline) {
		t.Fatalf("before the global deadline the action is %+v, want active with its deadline capped at %v", got, a.GlobalDeadline)
	}
	fc.Step(20 * time.Second)
	waitFor(t, 5*time.Second, "the global timeout", func() bool {
		got, _ = e.sim.Action(a.Token)
		return !got.Active()
	})
	if got.CompletedBy != awssim.CompletedByGlobalTimeout || got.Result != "CONTINUE" {
		t.Errorf("action ended %s by %s, want CONTINUE by %s", got.Result, got.CompletedBy, awssim.CompletedByGlobalTimeout)
	}
	wantAPIError(t, heartbeat(), "ValidationError", "No active Lifecycle Action found with token "+a.Token)
	if in, _ := e.sim.Instance(a.InstanceID); in.LifecycleState != astypes.LifecycleStateTerminated {
		t.Errorf("instance is %s, want Terminated", in.LifecycleState)
	}
}

func TestScaleInRespectsProtection(t *testing.T) {
	e := newEnv(t, awssim.Options{})
	e.createGroup(t, "g", 0, 3, 3)
	var ids []string
	waitFor(t, 5*time.Second, "three instances InService", func() bool {
		st := e.states(t)
		ids = ids[:0]
		for id, s := range st {
			if s != astypes.LifecycleStateInService {
				return false
			}
			ids = append(ids, id)
		}
		return len(ids) == 3
	})
	slices.Sort(ids)
	protect := func(on bool, which ...string) {
		t.Helper()
		if _, err := e.as.SetInstanceProtection(t.Context(), &autoscaling.SetInstanceProtectionInput{
			AutoScalingGroupName: aws.String("g"), InstanceIds: which, ProtectedFromScaleIn: aws.Bool(on),
		}); err != nil {
			t.Fatalf("SetInstanceProtection: %v", err)
		}
	}
	protect(true, ids[0], ids[1])

	e.setDesired(t, "g", 1)
	want := map[string]astypes.LifecycleState{ids[0]: astypes.LifecycleStateInService, ids[1]: astypes.LifecycleStateInService}
	if diff := cmp.Diff(want, e.states(t)); diff != "" {
		t.Fatalf("after scale-in to 1 with two protected (-want +got):\n%s", diff)
	}
	if in, _ := e.sim.Instance(ids[2]); in.LifecycleState != astypes.LifecycleStateTerminated {
		t.Fatalf("unprotected instance is %s, want Terminated", in.LifecycleState)
	}

	// Lifting protection lets the group reach its desired capacity.
	protect(false, ids[1])
	want = map[string]astypes.LifecycleState{ids[0]: astypes.LifecycleStateInService}
	if diff := cmp.Diff(want, e.states(t)); diff != "" {
		t.Fatalf("after lifting protection (-want +got):\n%s", diff)
	}
	out, err := e.as.DescribeAutoScalingInstances(t.Context(), &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: []string{ids[0]}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.AutoScalingInstances) != 1 || !aws.ToBool(out.AutoScalingInstances[0].ProtectedFromScaleIn) {
		t.Errorf("DescribeAutoScalingInstances = %+v, want %s protected", out.AutoScalingInstances, ids[0])
	}

	// New instances of a group that protects them are protected.
	if _, err := e.as.UpdateAutoScalingGroup(t.Context(), &autoscaling.UpdateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String("g"), NewInstancesProtectedFromScaleIn: aws.Bool(true), DesiredCapacity: aws.Int32(2),
	}); err != nil {
		t.Fatal(err)
	}
	for id := range e.states(t) {
		if in, _ := e.sim.Instance(id); !in.ProtectedFromScaleIn {
			t.Errorf("instance %s is not protected from scale-in", id)
		}
	}
}

func TestSeveralHooksAndHookDeletion(t *testing.T) {
	t.Run("all hooks must continue, one abandon ends the launch", func(t *testing.T) {
		e := newEnv(t, awssim.Options{})
		e.createGroup(t, "g", 0, 1, 1, hookSpec("a", launching, 60, "CONTINUE"), hookSpec("b", launching, 60, "CONTINUE"))
		acts := e.waitActions(t, 2)
		if acts[0].InstanceID != acts[1].InstanceID || acts[0].Token == acts[1].Token {
			t.Fatalf("actions %+v, want two tokens for one instance", acts)
		}
		e.complete(t, acts[0], "CONTINUE")
		if in, _ := e.sim.Instance(acts[0].InstanceID); in.LifecycleState != astypes.LifecycleStatePendingWait {
			t.Fatalf("after one CONTINUE the instance is %s, want Pending:Wait", in.LifecycleState)
		}
		e.complete(t, acts[1], "ABANDON")
		if in, _ := e.sim.Instance(acts[0].InstanceID); in.LifecycleState != astypes.LifecycleStateTerminated {
			t.Fatalf("after ABANDON the instance is %s, want Terminated", in.LifecycleState)
		}
	})
	t.Run("deleting a hook ends its terminate action with CONTINUE", func(t *testing.T) {
		e := newEnv(t, awssim.Options{})
		a := startAction(t, e, terminating, 60, "ABANDON")
		if _, err := e.as.DeleteLifecycleHook(t.Context(), &autoscaling.DeleteLifecycleHookInput{AutoScalingGroupName: aws.String("g"), LifecycleHookName: aws.String("h")}); err != nil {
			t.Fatal(err)
		}
		got, _ := e.sim.Action(a.Token)
		if got.Result != "CONTINUE" || got.CompletedBy != awssim.CompletedByHookDeleted {
			t.Errorf("action ended %s by %s, want CONTINUE by %s", got.Result, got.CompletedBy, awssim.CompletedByHookDeleted)
		}
		if in, _ := e.sim.Instance(a.InstanceID); in.LifecycleState != astypes.LifecycleStateTerminated {
			t.Errorf("instance is %s, want Terminated", in.LifecycleState)
		}
		out, err := e.as.DescribeLifecycleHooks(t.Context(), &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: aws.String("g")})
		if err != nil || len(out.LifecycleHooks) != 0 {
			t.Errorf("DescribeLifecycleHooks = %+v, %v; want none", out, err)
		}
	})
}
