package imds

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"

	imdssrc "lifeboat.dev/lifeboat/internal/source/imds"
	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

const terminating = "autoscaling:EC2_INSTANCE_TERMINATING"

// lifecycleHookTimeout is the terminate hook's heartbeat timeout: shorter
// than the drain (lifecyclePodShutdown), so that only heartbeats keep the
// action alive until lifeboat completes it.
const (
	lifecycleHookTimeout = 4 // seconds
	lifecyclePodShutdown = 7 * time.Second
)

// Issue 17, section 3: in IMDS mode, with --imds-complete-lifecycle, the
// node completes its own terminate lifecycle action: when its metadata says
// target-lifecycle-state Terminated it finds its group and terminate hook
// by instance ID, heartbeats the action while its pod drains (the drain
// outlasts the hook's heartbeat timeout) and completes it with CONTINUE
// after the drain, once. Without the option no Auto Scaling call is made:
// the action times out with the hook's default result. lifeboat-imds (the
// IMDS-only build) refuses the option at start, saying what to run instead.
func TestIMDSCompletesOwnTerminateAction(t *testing.T) {
	t.Run("on", func(t *testing.T) {
		if os.Getenv("LIFEBOAT_IMDS_BUILD") == "imdsonly" {
			assertLifecycleRefused(t)
			return
		}
		s := startGroupWithTerminateHook(t)
		w := s.terminate(t, "--imds-complete-lifecycle")
		a := s.ended(w)
		if a.Result != "CONTINUE" || a.CompletedBy != awssim.CompletedByAPI || a.Completions != 1 {
			t.Fatalf("action %s/%s ended %s by %s after %d completions, want CONTINUE by CompleteLifecycleAction once", a.GroupName, a.HookName, a.Result, a.CompletedBy, a.Completions)
		}
		// The drain (the pod takes about lifecyclePodShutdown to stop) ran
		// past the hook's heartbeat timeout: without heartbeats the action
		// would have timed out before it was completed.
		if d := a.Completed.Sub(a.Started); d <= lifecycleHookTimeout*time.Second {
			t.Errorf("action completed %s after it started, within the hook's heartbeat timeout (%ds): the test does not show heartbeats through a drain", d, lifecycleHookTimeout)
		}
		// The Events are written by the recorder's queue, a moment after
		// the action ended: wait for them, then count them (below).
		w.eventually(10*time.Second, "the Drained and LifecycleCompleted Events", func() bool {
			return w.nodeEvents("Drained") >= 1 && w.nodeEvents("LifecycleCompleted") >= 1
		})
		// The drain outlasts the heartbeat timeout: only heartbeats sent
		// while it ran kept the action alive.
		if a.Heartbeats < 2 || !a.FirstHeartbeat.Before(a.Started.Add(lifecycleHookTimeout*time.Second)) {
			t.Errorf("action heartbeated %d times, first at %s (started %s); want ≥ 2 from within its %ds timeout", a.Heartbeats,
				a.FirstHeartbeat.Format(time.StampMilli), a.Started.Format(time.StampMilli), lifecycleHookTimeout)
		}
		// Once: no second completion later (the state stays Terminated).
		time.Sleep(time.Second)
		for _, reason := range []string{"Drained", "LifecycleCompleted"} {
			if n := w.nodeEvents(reason); n != 1 {
				t.Errorf("%s Events on the node = %d, want 1", reason, n)
			}
		}
		if n := s.sim.Calls("CompleteLifecycleAction"); n != 1 {
			t.Errorf("CompleteLifecycleAction called %d times, want 1", n)
		}
		if a, _ := s.action(); a.Rejected != 0 {
			t.Errorf("%d calls named the action after it ended, want 0", a.Rejected)
		}
	})
	t.Run("off", func(t *testing.T) {
		s := startGroupWithTerminateHook(t)
		w := s.terminate(t)
		a := s.ended(w)
		if a.CompletedBy != awssim.CompletedByHeartbeatTimeout || a.Heartbeats != 0 || a.Completions != 0 {
			t.Errorf("action ended by %s after %d heartbeats and %d completions, want a heartbeat timeout and no call", a.CompletedBy, a.Heartbeats, a.Completions)
		}
		for _, call := range []string{"DescribeAutoScalingInstances", "DescribeLifecycleHooks", "RecordLifecycleActionHeartbeat", "CompleteLifecycleAction"} {
			if n := s.sim.Calls(call); n != 0 {
				t.Errorf("%s called %d times without --imds-complete-lifecycle, want 0", call, n)
			}
		}
	})
}

// assertLifecycleRefused runs lifeboat-imds with --imds-complete-lifecycle:
// it must stop at once with a usage error that says what to run instead.
func assertLifecycleRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, lifeboatBin, "run", "--mode", "imds", "--node-name", "n", "--kubeconfig", kube.Kubeconfig, "--imds-complete-lifecycle").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("lifeboat-imds --imds-complete-lifecycle: exit = %v, want status 2; output:\n%s", err, out)
	}
	for _, want := range []string{"--imds-complete-lifecycle needs the Auto Scaling client", "lifeboat-imds", "daemonsetCommand: []"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output does not say %q:\n%s", want, out)
		}
	}
}

// asgSide is a test's Auto Scaling: moto, the simulator in front of it, and
// one group with one instance in service and a terminate hook ("drain",
// default result ABANDON).
type asgSide struct {
	sim      *awssim.Server
	as       *autoscaling.Client
	instance string
	group    string
}

func startGroupWithTerminateHook(t *testing.T) *asgSide {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	moto := testenv.StartMoto(t, t.TempDir())
	sim, err := awssim.New(awssim.Options{MotoEndpoint: moto.Endpoint, MinHeartbeatTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(ctx, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sim.Close()
		if err := sim.Err(); err != nil {
			t.Errorf("auto scaling simulator: %v", err)
		}
	})
	s := &asgSide{sim: sim, group: testenv.UniqueName("g"),
		as: autoscaling.NewFromConfig(testenv.MotoAWSConfig(), func(o *autoscaling.Options) { o.BaseEndpoint = aws.String(sim.Endpoint()) })}
	if _, err := s.as.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String(s.group), MinSize: aws.Int32(0), MaxSize: aws.Int32(1), DesiredCapacity: aws.Int32(1),
		AvailabilityZones: []string{"us-east-1a"},
		LaunchTemplate:    &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String("lt"), Version: aws.String("$Latest")},
	}); err != nil {
		t.Fatalf("creating group: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.instance == "" {
		for _, in := range sim.Instances() {
			if in.GroupName == s.group && in.LifecycleState == astypes.LifecycleStateInService {
				s.instance = in.ID
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no instance of %s in service after 30s", s.group)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := s.as.PutLifecycleHook(ctx, &autoscaling.PutLifecycleHookInput{
		AutoScalingGroupName: aws.String(s.group), LifecycleHookName: aws.String("drain"), LifecycleTransition: aws.String(terminating),
		HeartbeatTimeout: aws.Int32(lifecycleHookTimeout), DefaultResult: aws.String("ABANDON"),
	}); err != nil {
		t.Fatalf("putting hook: %v", err)
	}
	return s
}

// terminate runs lifeboat in IMDS mode (with flags) on the instance's node,
// with a pod that takes lifecyclePodShutdown to stop; once lifeboat is
// ready it scales the instance in, which starts its terminate action, and
// then serves target-lifecycle-state Terminated, as the instance's metadata
// does.
func (s *asgSide) terminate(t *testing.T, flags ...string) *world {
	t.Helper()
	w := newWorld(t, worldOptions{
		instanceID: s.instance,
		imds:       testenv.IMDSOptions{Scenario: testenv.IMDSASGLifecycle},
		hide:       []string{imdssrc.PathTargetState},
		flags:      append([]string{"--aws-endpoint", "autoscaling=" + s.sim.Endpoint()}, flags...),
	})
	w.pod(lifecyclePodShutdown)
	w.eventually(30*time.Second, "lifeboat ready", func() bool { return w.readyz() == 200 })
	if _, err := s.as.TerminateInstanceInAutoScalingGroup(w.ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: aws.String(s.instance), ShouldDecrementDesiredCapacity: aws.Bool(true),
	}); err != nil {
		t.Fatalf("scaling in %s: %v", s.instance, err)
	}
	if _, ok := s.action(); !ok {
		t.Fatal("no terminate action started")
	}
	w.proxy.show(imdssrc.PathTargetState)
	return w
}

// action returns the instance's terminate action.
func (s *asgSide) action() (awssim.Action, bool) {
	for _, a := range s.sim.Actions() {
		if a.InstanceID == s.instance && a.Transition == terminating {
			return a, true
		}
	}
	return awssim.Action{}, false
}

// ended waits until the instance's terminate action has ended.
func (s *asgSide) ended(w *world) awssim.Action {
	w.t.Helper()
	var a awssim.Action
	w.eventually(lifecyclePodShutdown+20*time.Second, "the terminate action to end", func() bool {
		a, _ = s.action()
		return !a.Active()
	})
	return a
}
