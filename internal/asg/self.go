package asg

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"

	"lifeboat.dev/lifeboat/internal/event"
)

// TerminateActions returns the terminate lifecycle actions an instance
// can complete for itself (IMDS mode, where no queue delivers a token): one
// per autoscaling:EC2_INSTANCE_TERMINATING hook of its group, identified by
// group and hook only, to be heartbeated and completed by instance ID. It
// returns none when the instance is in no group or the group has no such
// hook. The hooks' timeouts are cached for Hook.
func (c *Client) TerminateActions(ctx context.Context, instanceID string) ([]event.LifecycleAction, error) {
	group, _, err := c.GroupOf(ctx, instanceID)
	if err != nil || group == "" {
		return nil, err
	}
	out, err := c.api.DescribeLifecycleHooks(ctx, &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: aws.String(group)})
	if err != nil {
		return nil, fmt.Errorf("describing the lifecycle hooks of group %s: %w", group, err)
	}
	var actions []event.LifecycleAction
	for _, lh := range out.LifecycleHooks {
		if aws.ToString(lh.LifecycleTransition) != event.TransitionTerminating {
			continue
		}
		name := aws.ToString(lh.LifecycleHookName)
		c.mu.Lock()
		c.hooks[group+"/"+name] = hookOf(lh)
		c.mu.Unlock()
		actions = append(actions, event.LifecycleAction{GroupName: group, HookName: name, Transition: event.TransitionTerminating,
			Origin: event.PlaceAutoScalingGroup, Destination: event.PlaceEC2})
	}
	return actions, nil
}
