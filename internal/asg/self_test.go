package asg

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/lifecycle"
)

// selfAPI answers the calls TerminateActions makes: the instance's group
// (none when group is "") and that group's hooks.
type selfAPI struct {
	fakeAPI
	group    string
	hooks    []types.LifecycleHook
	hookErr  error
	describe int // DescribeLifecycleHooks calls
}

func (f *selfAPI) DescribeAutoScalingInstances(_ context.Context, in *autoscaling.DescribeAutoScalingInstancesInput, _ ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingInstancesOutput, error) {
	if f.group == "" {
		return &autoscaling.DescribeAutoScalingInstancesOutput{}, nil
	}
	return &autoscaling.DescribeAutoScalingInstancesOutput{AutoScalingInstances: []types.AutoScalingInstanceDetails{
		{InstanceId: aws.String(in.InstanceIds[0]), AutoScalingGroupName: aws.String(f.group)},
	}}, nil
}

func (f *selfAPI) SetInstanceProtection(context.Context, *autoscaling.SetInstanceProtectionInput, ...func(*autoscaling.Options)) (*autoscaling.SetInstanceProtectionOutput, error) {
	return &autoscaling.SetInstanceProtectionOutput{}, nil
}

func (f *selfAPI) DescribeLifecycleHooks(_ context.Context, in *autoscaling.DescribeLifecycleHooksInput, _ ...func(*autoscaling.Options)) (*autoscaling.DescribeLifecycleHooksOutput, error) {
	f.describe++
	if f.hookErr != nil {
		return nil, f.hookErr
	}
	var out []types.LifecycleHook
	for _, h := range f.hooks {
		if len(in.LifecycleHookNames) == 0 || in.LifecycleHookNames[0] == aws.ToString(h.LifecycleHookName) {
			out = append(out, h)
		}
	}
	return &autoscaling.DescribeLifecycleHooksOutput{LifecycleHooks: out}, nil
}

func TestTerminateActions(t *testing.T) {
	terminating := func(name string, hb int32) types.LifecycleHook {
		return types.LifecycleHook{LifecycleHookName: aws.String(name), LifecycleTransition: aws.String(event.TransitionTerminating),
			HeartbeatTimeout: aws.Int32(hb), DefaultResult: aws.String("ABANDON")}
	}
	launching := types.LifecycleHook{LifecycleHookName: aws.String("up"), LifecycleTransition: aws.String(event.TransitionLaunching)}
	action := func(hook string) event.LifecycleAction {
		return event.LifecycleAction{GroupName: "g", HookName: hook, Transition: event.TransitionTerminating,
			Origin: event.PlaceAutoScalingGroup, Destination: event.PlaceEC2}
	}
	tests := []struct {
		name    string
		api     *selfAPI
		want    []event.LifecycleAction
		wantErr bool
	}{
		{"no group", &selfAPI{}, nil, false},
		{"group without hooks", &selfAPI{group: "g"}, nil, false},
		{"launch hooks are not terminate actions", &selfAPI{group: "g", hooks: []types.LifecycleHook{launching}}, nil, false},
		{"one action per terminate hook", &selfAPI{group: "g", hooks: []types.LifecycleHook{launching, terminating("drain", 120), terminating("backup", 60)}},
			[]event.LifecycleAction{action("drain"), action("backup")}, false},
		{"hooks unreadable", &selfAPI{group: "g", hookErr: errors.New("AccessDenied")}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(tt.api, clocktesting.NewFakeClock(time.Now()), discard, Options{})
			got, err := c.TerminateActions(t.Context(), "i-1234abcd")
			if (err != nil) != tt.wantErr {
				t.Fatalf("TerminateActions error = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("TerminateActions (-want +got):\n%s", diff)
			}
		})
	}
}

// The hooks TerminateActions read are not read again for their timeouts.
func TestTerminateActionsCachesHooks(t *testing.T) {
	api := &selfAPI{group: "g", hooks: []types.LifecycleHook{{LifecycleHookName: aws.String("drain"),
		LifecycleTransition: aws.String(event.TransitionTerminating), HeartbeatTimeout: aws.Int32(120), DefaultResult: aws.String("ABANDON")}}}
	c := New(api, clocktesting.NewFakeClock(time.Now()), discard, Options{})
	if _, err := c.TerminateActions(t.Context(), "i-1234abcd"); err != nil {
		t.Fatal(err)
	}
	h, err := c.Hook(t.Context(), "g", "drain")
	if err != nil {
		t.Fatal(err)
	}
	want := lifecycle.Hook{HeartbeatTimeout: 2 * time.Minute, GlobalTimeout: 200 * time.Minute, DefaultResult: "ABANDON"}
	if h != want || api.describe != 1 {
		t.Errorf("Hook = %+v after %d DescribeLifecycleHooks, want %+v after 1", h, api.describe, want)
	}
}
