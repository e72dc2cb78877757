package awssim_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/test/awssim"
)

func TestUnknownActionIsAnXMLError(t *testing.T) {
	e := newEnv(t, awssim.Options{})
	_, err := e.as.DescribeScalingActivities(t.Context(), &autoscaling.DescribeScalingActivitiesInput{})
	wantAPIError(t, err, "InvalidAction", "The action DescribeScalingActivities is not valid for this web service.")
}

func TestValidationErrors(t *testing.T) {
	e := newEnv(t, awssim.Options{})
	e.createGroup(t, "g", 1, 3, 1)
	tests := []struct {
		name    string
		call    func() error
		code    string
		message string // "" checks only the code
	}{
		{"desired above max", func() error {
			_, err := e.as.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(4)})
			return err
		}, "ValidationError", "New SetDesiredCapacity value 4 is above max value 3 for the AutoScalingGroup."},
		{"desired below min", func() error {
			_, err := e.as.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(0)})
			return err
		}, "ValidationError", "New SetDesiredCapacity value 0 is below min value 1 for the AutoScalingGroup."},
		{"duplicate group", func() error {
			_, err := e.as.CreateAutoScalingGroup(t.Context(), &autoscaling.CreateAutoScalingGroupInput{
				AutoScalingGroupName: aws.String("g"), MinSize: aws.Int32(0), MaxSize: aws.Int32(1),
				LaunchTemplate: &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String("lt")},
			})
			return err
		}, "AlreadyExists", "AutoScalingGroup by this name already exists - A group with the name g already exists"},
		{"group without launch template", func() error {
			_, err := e.as.CreateAutoScalingGroup(t.Context(), &autoscaling.CreateAutoScalingGroupInput{
				AutoScalingGroupName: aws.String("h"), MinSize: aws.Int32(0), MaxSize: aws.Int32(1),
			})
			return err
		}, "ValidationError", "Valid requests must contain either LaunchTemplate, LaunchConfigurationName, InstanceId or MixedInstancesPolicy parameter."},
		{"heartbeat timeout below the minimum", func() error {
			_, err := e.as.PutLifecycleHook(t.Context(), &autoscaling.PutLifecycleHookInput{
				AutoScalingGroupName: aws.String("g"), LifecycleHookName: aws.String("h"),
				LifecycleTransition: aws.String(launching), HeartbeatTimeout: aws.Int32(0),
			})
			return err
		}, "ValidationError", ""},
		{"heartbeat timeout above 7200", func() error {
			_, err := e.as.PutLifecycleHook(t.Context(), &autoscaling.PutLifecycleHookInput{
				AutoScalingGroupName: aws.String("g"), LifecycleHookName: aws.String("h"),
				LifecycleTransition: aws.String(launching), HeartbeatTimeout: aws.Int32(7201),
			})
			return err
		}, "ValidationError", ""},
		{"terminate below min", func() error {
			id := onlyKey(t, e.states(t))
			_, err := e.as.TerminateInstanceInAutoScalingGroup(t.Context(), &autoscaling.TerminateInstanceInAutoScalingGroupInput{
				InstanceId: aws.String(id), ShouldDecrementDesiredCapacity: aws.Bool(true),
			})
			return err
		}, "ValidationError", "Currently, desiredSize equals minSize (1). Terminating instance without replacement will violate group's min size constraint. Either set shouldDecrementDesiredCapacity flag to false or lower group's min size."},
		{"unknown group", func() error {
			_, err := e.as.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("nope"), DesiredCapacity: aws.Int32(1)})
			return err
		}, "ValidationError", ""},
		{"complete without token or instance", func() error {
			_, err := e.as.CompleteLifecycleAction(t.Context(), &autoscaling.CompleteLifecycleActionInput{
				AutoScalingGroupName: aws.String("g"), LifecycleHookName: aws.String("h"), LifecycleActionResult: aws.String("CONTINUE"),
			})
			return err
		}, "ValidationError", ""},
		{"bad lifecycle action result", func() error {
			_, err := e.as.CompleteLifecycleAction(t.Context(), &autoscaling.CompleteLifecycleActionInput{
				AutoScalingGroupName: aws.String("g"), LifecycleHookName: aws.String("h"), InstanceId: aws.String("i-0123456789abcdef0"),
				LifecycleActionResult: aws.String("PROCEED"),
			})
			return err
		}, "ValidationError", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantAPIError(t, tt.call(), tt.code, tt.message)
		})
	}
}

func TestTerminateInstanceInAutoScalingGroup(t *testing.T) {
	tests := []struct {
		name        string
		decrement   bool
		wantDesired int32
		wantLive    int
	}{
		{"with decrement", true, 1, 1},
		{"without decrement, replaced", false, 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, awssim.Options{})
			e.createGroup(t, "g", 0, 3, 2)
			states := e.states(t)
			if len(states) != 2 {
				t.Fatalf("group has %v, want 2 instances", states)
			}
			var victim string
			for id := range states {
				victim = id
			}
			out, err := e.as.TerminateInstanceInAutoScalingGroup(t.Context(), &autoscaling.TerminateInstanceInAutoScalingGroupInput{
				InstanceId: aws.String(victim), ShouldDecrementDesiredCapacity: aws.Bool(tt.decrement),
			})
			if err != nil {
				t.Fatal(err)
			}
			if out.Activity == nil || aws.ToString(out.Activity.AutoScalingGroupName) != "g" || aws.ToString(out.Activity.ActivityId) == "" ||
				!strings.Contains(aws.ToString(out.Activity.Description), victim) {
				t.Errorf("Activity = %+v", out.Activity)
			}
			if in, _ := e.sim.Instance(victim); in.LifecycleState != astypes.LifecycleStateTerminated {
				t.Errorf("victim is %s, want Terminated", in.LifecycleState)
			}
			states = e.states(t)
			if _, ok := states[victim]; ok || len(states) != tt.wantLive {
				t.Errorf("after termination the group has %s, want %d instances without %s", joinStates(states), tt.wantLive, victim)
			}
			g, err := e.as.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"g"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := aws.ToInt32(g.AutoScalingGroups[0].DesiredCapacity); got != tt.wantDesired {
				t.Errorf("desired = %d, want %d", got, tt.wantDesired)
			}
		})
	}
}

func TestDescribeAutoScalingGroups(t *testing.T) {
	e := newEnv(t, awssim.Options{})
	for _, name := range []string{"c", "a", "b"} {
		e.createGroup(t, name, 0, 2, 1)
	}
	var names []string
	pages := 0
	p := autoscaling.NewDescribeAutoScalingGroupsPaginator(e.as, &autoscaling.DescribeAutoScalingGroupsInput{MaxRecords: aws.Int32(1)})
	for p.HasMorePages() {
		out, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, g := range out.AutoScalingGroups {
			names = append(names, aws.ToString(g.AutoScalingGroupName))
		}
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, names); diff != "" || pages != 3 {
		t.Errorf("paginated %d pages of names (-want +got):\n%s", pages, diff)
	}

	out, err := e.as.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"a", "missing"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.AutoScalingGroups) != 1 {
		t.Fatalf("got %d groups, want only a", len(out.AutoScalingGroups))
	}
	g := out.AutoScalingGroups[0]
	if !strings.HasPrefix(aws.ToString(g.AutoScalingGroupARN), "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:") ||
		!strings.HasSuffix(aws.ToString(g.AutoScalingGroupARN), ":autoScalingGroupName/a") {
		t.Errorf("ARN = %s", aws.ToString(g.AutoScalingGroupARN))
	}
	if g.LaunchTemplate == nil || aws.ToString(g.LaunchTemplate.LaunchTemplateName) != "nodes" || aws.ToString(g.LaunchTemplate.Version) != "$Latest" {
		t.Errorf("LaunchTemplate = %+v", g.LaunchTemplate)
	}
	if aws.ToInt32(g.MinSize) != 0 || aws.ToInt32(g.MaxSize) != 2 || aws.ToInt32(g.DesiredCapacity) != 1 || len(g.Instances) != 1 {
		t.Fatalf("sizes %d/%d/%d with %d instances, want 0/2/1 with 1", aws.ToInt32(g.MinSize), aws.ToInt32(g.MaxSize), aws.ToInt32(g.DesiredCapacity), len(g.Instances))
	}
	in := g.Instances[0]
	if in.LifecycleState != astypes.LifecycleStateInService || aws.ToString(in.AvailabilityZone) != "us-east-1a" || g.CreatedTime == nil {
		t.Errorf("instance %+v, created %v", in, g.CreatedTime)
	}
	sim, _ := e.sim.Instance(aws.ToString(in.InstanceId))
	if !strings.HasSuffix(sim.PrivateDNSName, ".ec2.internal") || sim.EC2State != "running" {
		t.Errorf("instance from EC2 = %+v, want a private DNS name and running", sim)
	}
	// The instance is in moto's EC2 with the group's tag.
	ec2out, err := e.ec2.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:aws:autoscaling:groupName"), Values: []string{"a"}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var tagged []string
	for _, r := range ec2out.Reservations {
		for _, i := range r.Instances {
			tagged = append(tagged, aws.ToString(i.InstanceId)+" "+aws.ToString(i.PrivateDnsName))
		}
	}
	if want := []string{sim.ID + " " + sim.PrivateDNSName}; !cmp.Equal(want, tagged) {
		t.Errorf("EC2 instances tagged for group a = %v, want %v", tagged, want)
	}
}

func TestCallCounts(t *testing.T) {
	e := newEnv(t, awssim.Options{})
	e.createGroup(t, "g", 0, 1, 0)
	for range 3 {
		e.setDesired(t, "g", 0)
	}
	_, _ = e.as.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(5)})
	want := map[string]int{"CreateAutoScalingGroup": 1, "SetDesiredCapacity": 4}
	if diff := cmp.Diff(want, e.sim.CallCounts()); diff != "" {
		t.Errorf("CallCounts (-want +got):\n%s", diff)
	}
}

func TestCloseStopsTimeouts(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	e := newEnv(t, awssim.Options{Clock: fc})
	a := startAction(t, e, launching, 1, "ABANDON")
	if err := e.sim.Close(); err != nil {
		t.Fatal(err)
	}
	fc.Step(time.Hour)
	if got, _ := e.sim.Action(a.Token); !got.Active() {
		t.Errorf("action %s ended after Close: %+v", a.Token, got)
	}
	if fc.HasWaiters() {
		t.Error("a timer of the closed simulator is still waiting")
	}
}
