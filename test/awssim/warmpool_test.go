package awssim_test

import (
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/test/awssim"
)

const lifecyclePattern = `{"source":["aws.autoscaling"],"detail-type":["EC2 Instance-launch Lifecycle Action","EC2 Instance-terminate Lifecycle Action"]}`

// warmStates returns the warm pool's instances and their states.
func (e *env) warmStates(t *testing.T, group string) map[string]astypes.LifecycleState {
	t.Helper()
	out, err := e.as.DescribeWarmPool(t.Context(), &autoscaling.DescribeWarmPoolInput{AutoScalingGroupName: aws.String(group)})
	if err != nil {
		t.Fatalf("DescribeWarmPool: %v", err)
	}
	m := map[string]astypes.LifecycleState{}
	for _, in := range out.Instances {
		m[aws.ToString(in.InstanceId)] = in.LifecycleState
	}
	return m
}

type move struct{ Transition, Origin, Destination string }

func moves(t *testing.T, bodies []string) []move {
	var out []move
	for _, d := range lifecycleEvents(t, bodies) {
		out = append(out, move{d.LifecycleTransition, d.Origin, d.Destination})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Transition+out[i].Origin+out[i].Destination < out[j].Transition+out[j].Origin+out[j].Destination
	})
	return out
}

func TestWarmPoolTransitions(t *testing.T) {
	tests := []struct {
		poolState astypes.WarmPoolState
		wantWarm  astypes.LifecycleState
		wantEC2   string
	}{
		{astypes.WarmPoolStateStopped, astypes.LifecycleStateWarmedStopped, "stopped"},
		{astypes.WarmPoolStateRunning, astypes.LifecycleStateWarmedRunning, "running"},
		{astypes.WarmPoolStateHibernated, astypes.LifecycleStateWarmedHibernated, "stopped"},
	}
	for _, tt := range tests {
		t.Run(string(tt.poolState), func(t *testing.T) {
			e := newEnv(t, awssim.Options{})
			url, arn := e.queue(t, "lifecycle")
			e.rule(t, "lifecycle", lifecyclePattern, arn)
			e.createGroup(t, "g", 0, 3, 0, hookSpec("launch", launching, 60, "ABANDON"), hookSpec("term", terminating, 60, "CONTINUE"))

			// The pool fills: MaxGroupPreparedCapacity 2 - desired 0.
			if _, err := e.as.PutWarmPool(t.Context(), &autoscaling.PutWarmPoolInput{
				AutoScalingGroupName: aws.String("g"), MinSize: aws.Int32(1), MaxGroupPreparedCapacity: aws.Int32(2),
				PoolState: tt.poolState, InstanceReusePolicy: &astypes.InstanceReusePolicy{ReuseOnScaleIn: aws.Bool(true)},
			}); err != nil {
				t.Fatalf("PutWarmPool: %v", err)
			}
			acts := e.waitActions(t, 2)
			for id, st := range e.warmStates(t, "g") {
				if st != astypes.LifecycleStateWarmedPendingWait {
					t.Fatalf("warm instance %s is %s, want Warmed:Pending:Wait", id, st)
				}
			}
			for _, a := range acts {
				e.complete(t, a, "CONTINUE")
			}
			warm := e.warmStates(t, "g")
			var warmIDs []string
			for id, st := range warm {
				warmIDs = append(warmIDs, id)
				if st != tt.wantWarm || e.ec2State(t, id) != tt.wantEC2 {
					t.Fatalf("warm instance %s is %s (EC2 %s), want %s (EC2 %s)", id, st, e.ec2State(t, id), tt.wantWarm, tt.wantEC2)
				}
			}
			if len(warmIDs) != 2 {
				t.Fatalf("warm pool holds %v, want 2 instances", warm)
			}

			// Scale out takes the oldest warm instance.
			e.setDesired(t, "g", 1)
			a := e.waitActions(t, 1)[0]
			if a.Origin != "WarmPool" || a.Destination != "AutoScalingGroup" || a.Transition != launching {
				t.Fatalf("scale-out action = %+v, want a launch from WarmPool to AutoScalingGroup", a)
			}
			if !slices.Contains(warmIDs, a.InstanceID) {
				t.Fatalf("scale-out launched %s, not one of the warm instances %v", a.InstanceID, warmIDs)
			}
			if st := e.states(t)[a.InstanceID]; st != astypes.LifecycleStatePendingWait {
				t.Fatalf("instance leaving the pool is %s, want Pending:Wait", st)
			}
			e.complete(t, a, "CONTINUE")
			if st := e.states(t)[a.InstanceID]; st != astypes.LifecycleStateInService {
				t.Fatalf("instance is %s after CONTINUE, want InService", st)
			}
			if st := e.ec2State(t, a.InstanceID); st != "running" {
				t.Fatalf("instance in service is %s in EC2, want running", st)
			}
			if len(e.warmStates(t, "g")) != 1 {
				t.Fatalf("warm pool = %v, want 1 instance (max(MinSize 1, 2 - desired 1))", e.warmStates(t, "g"))
			}

			// Scale in with ReuseOnScaleIn returns it to the pool.
			e.setDesired(t, "g", 0)
			b := e.waitActions(t, 1)[0]
			if b.InstanceID != a.InstanceID || b.Origin != "AutoScalingGroup" || b.Destination != "WarmPool" || b.Transition != terminating {
				t.Fatalf("scale-in action = %+v, want a terminate of %s from AutoScalingGroup to WarmPool", b, a.InstanceID)
			}
			if st := e.states(t)[b.InstanceID]; st != astypes.LifecycleStateTerminatingWait {
				t.Fatalf("instance is %s, want Terminating:Wait", st)
			}
			e.complete(t, b, "CONTINUE")
			warm = e.warmStates(t, "g")
			if warm[b.InstanceID] != tt.wantWarm || len(warm) != 2 {
				t.Fatalf("after scale-in the warm pool is %v, want %s back in it as %s", warm, b.InstanceID, tt.wantWarm)
			}
			if st := e.ec2State(t, b.InstanceID); st != tt.wantEC2 {
				t.Fatalf("returned instance is %s in EC2, want %s", st, tt.wantEC2)
			}

			// The announcements carry the same transitions.
			want := []move{
				{launching, "EC2", "WarmPool"},
				{launching, "EC2", "WarmPool"},
				{launching, "WarmPool", "AutoScalingGroup"},
				{terminating, "AutoScalingGroup", "WarmPool"},
			}
			sort.Slice(want, func(i, j int) bool {
				return want[i].Transition+want[i].Origin+want[i].Destination < want[j].Transition+want[j].Origin+want[j].Destination
			})
			if diff := cmp.Diff(want, moves(t, e.drain(t, url))); diff != "" {
				t.Errorf("announced transitions (-want +got):\n%s", diff)
			}

			// Kubernetes nodes follow EC2: running at launch, gone when
			// stopped, running again when started.
			waitFor(t, 2*time.Second, "callbacks", func() bool {
				running, gone := e.callbacks()
				wantRunning, wantGone := 2, 0
				if tt.wantEC2 == "stopped" {
					wantRunning, wantGone = 3, 3 // a is started once more, and stopped twice
				}
				return len(running) == wantRunning && len(gone) == wantGone
			})

			out, err := e.as.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"g"}})
			if err != nil {
				t.Fatal(err)
			}
			g := out.AutoScalingGroups[0]
			if aws.ToInt32(g.WarmPoolSize) != 2 || len(g.Instances) != 0 || g.WarmPoolConfiguration == nil || g.WarmPoolConfiguration.PoolState != tt.poolState {
				t.Errorf("DescribeAutoScalingGroups: WarmPoolSize=%d Instances=%d WarmPoolConfiguration=%+v", aws.ToInt32(g.WarmPoolSize), len(g.Instances), g.WarmPoolConfiguration)
			}
		})
	}
}

// TestF1SeedReproduction reproduces failure F1 without lifeboat: warm-pool
// instances exist before the launch hook; when one enters service its launch
// action is announced (WarmPool -> AutoScalingGroup), nobody completes it,
// and after the hook's timeout the ASG abandons and terminates a healthy
// instance. It runs on a fake clock so that the state before the timeout
// can be asserted however slow moto is.
func TestF1SeedReproduction(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	e := newEnv(t, awssim.Options{Clock: fc, MinHeartbeatTimeout: awssim.AWSMinHeartbeatTimeout})
	url, arn := e.queue(t, "lifecycle")
	e.rule(t, "lifecycle", lifecyclePattern, arn)
	e.createGroup(t, "g", 0, 2, 0)
	if _, err := e.as.PutWarmPool(t.Context(), &autoscaling.PutWarmPoolInput{
		AutoScalingGroupName: aws.String("g"), MinSize: aws.Int32(1), MaxGroupPreparedCapacity: aws.Int32(1),
	}); err != nil {
		t.Fatalf("PutWarmPool: %v", err)
	}
	warm := e.warmStates(t, "g")
	id := onlyKey(t, warm)
	if warm[id] != astypes.LifecycleStateWarmedStopped {
		t.Fatalf("warm instance is %s, want Warmed:Stopped", warm[id])
	}
	// The hook arrives after the instance.
	e.putHook(t, "g", "launch", launching, 30, "ABANDON")
	e.setDesired(t, "g", 1)

	var a awssim.Action
	for _, x := range e.sim.Actions() {
		if x.InstanceID == id {
			a = x
		}
	}
	if a.Token == "" || a.Origin != "WarmPool" || a.Destination != "AutoScalingGroup" {
		t.Fatalf("no launch action from WarmPool to AutoScalingGroup for %s: %+v", id, e.sim.Actions())
	}
	if in, _ := e.sim.Instance(id); in.LifecycleState != astypes.LifecycleStatePendingWait || in.EC2State != "running" {
		t.Fatalf("instance is %s (EC2 %s), want Pending:Wait and running", in.LifecycleState, in.EC2State)
	}
	// Just before the timeout nothing has happened; the Describe call also
	// brings the simulator up to the clock.
	fc.Step(29 * time.Second)
	if st := e.states(t)[id]; st != astypes.LifecycleStatePendingWait {
		t.Fatalf("1 s before the timeout the instance is %s, want Pending:Wait", st)
	}
	fc.Step(time.Second)
	waitFor(t, 5*time.Second, "the hook timeout to terminate the instance", func() bool {
		in, _ := e.sim.Instance(id)
		return in.LifecycleState == astypes.LifecycleStateTerminated
	})
	got, _ := e.sim.Action(a.Token)
	if got.Result != "ABANDON" || got.CompletedBy != awssim.CompletedByHeartbeatTimeout {
		t.Errorf("action ended %s by %s, want ABANDON by heartbeat timeout", got.Result, got.CompletedBy)
	}
	if st := e.ec2State(t, id); st != "terminated" {
		t.Errorf("EC2 state is %s, want terminated", st)
	}
	var announced bool
	for _, d := range lifecycleEvents(t, e.drain(t, url)) {
		if d.EC2InstanceId == id && d.LifecycleActionToken == a.Token && d.Origin == "WarmPool" && d.Destination == "AutoScalingGroup" {
			announced = true
		}
	}
	if !announced {
		t.Errorf("the WarmPool -> AutoScalingGroup launch action of %s was not delivered to the queue", id)
	}
}

func TestDeleteWarmPoolRunsTerminateHooks(t *testing.T) {
	e := newEnv(t, awssim.Options{})
	e.createGroup(t, "g", 0, 2, 0, hookSpec("term", terminating, 60, "CONTINUE"))
	if _, err := e.as.PutWarmPool(t.Context(), &autoscaling.PutWarmPoolInput{AutoScalingGroupName: aws.String("g"), MaxGroupPreparedCapacity: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	id := onlyKey(t, e.warmStates(t, "g"))
	if _, err := e.as.DeleteWarmPool(t.Context(), &autoscaling.DeleteWarmPoolInput{AutoScalingGroupName: aws.String("g")}); err != nil {
		t.Fatal(err)
	}
	a := e.waitActions(t, 1)[0]
	if a.InstanceID != id || a.Transition != terminating || a.Origin != "WarmPool" || a.Destination != "EC2" {
		t.Fatalf("action %+v, want a terminate of %s from WarmPool to EC2", a, id)
	}
	out, err := e.as.DescribeWarmPool(t.Context(), &autoscaling.DescribeWarmPoolInput{AutoScalingGroupName: aws.String("g")})
	if err != nil {
		t.Fatal(err)
	}
	if out.WarmPoolConfiguration == nil || out.WarmPoolConfiguration.Status != astypes.WarmPoolStatusPendingDelete ||
		len(out.Instances) != 1 || out.Instances[0].LifecycleState != astypes.LifecycleStateWarmedTerminatingWait {
		t.Fatalf("DescribeWarmPool while deleting = %+v", out)
	}
	e.complete(t, a, "CONTINUE")
	out, err = e.as.DescribeWarmPool(t.Context(), &autoscaling.DescribeWarmPoolInput{AutoScalingGroupName: aws.String("g")})
	if err != nil {
		t.Fatal(err)
	}
	if out.WarmPoolConfiguration != nil || len(out.Instances) != 0 {
		t.Errorf("DescribeWarmPool after deletion = %+v, want no pool", out)
	}
	if in, _ := e.sim.Instance(id); in.LifecycleState != astypes.LifecycleStateWarmedTerminated || e.ec2State(t, id) != "terminated" {
		t.Errorf("instance is %s (EC2 %s), want Warmed:Terminated and terminated", in.LifecycleState, e.ec2State(t, id))
	}
}
