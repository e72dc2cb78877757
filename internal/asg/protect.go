package asg

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
)

// protectionAPI is the part of the Auto Scaling API that scale-in
// protection needs (only with --scale-in-protection).
type protectionAPI interface {
	DescribeAutoScalingInstances(context.Context, *autoscaling.DescribeAutoScalingInstancesInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingInstancesOutput, error)
	SetInstanceProtection(context.Context, *autoscaling.SetInstanceProtectionInput, ...func(*autoscaling.Options)) (*autoscaling.SetInstanceProtectionOutput, error)
}

var _ protectionAPI = (*autoscaling.Client)(nil)

// errNoProtectionAPI: the client was built on an API without the calls.
var errNoProtectionAPI = errors.New("auto scaling client cannot set instance protection")

// GroupOf returns the Auto Scaling group of an instance and whether it is
// protected from scale-in; group is "" when the instance is in none.
func (c *Client) GroupOf(ctx context.Context, instanceID string) (group string, protected bool, err error) {
	api, ok := c.api.(protectionAPI)
	if !ok {
		return "", false, errNoProtectionAPI
	}
	out, err := api.DescribeAutoScalingInstances(ctx, &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: []string{instanceID}})
	if err != nil {
		return "", false, fmt.Errorf("describing auto scaling instance %s: %w", instanceID, err)
	}
	for _, in := range out.AutoScalingInstances {
		if aws.ToString(in.InstanceId) == instanceID {
			return aws.ToString(in.AutoScalingGroupName), aws.ToBool(in.ProtectedFromScaleIn), nil
		}
	}
	return "", false, nil
}

// SetProtection sets or lifts the instance's scale-in protection in its
// group (nothing in dry-run mode).
func (c *Client) SetProtection(ctx context.Context, group, instanceID string, protect bool) error {
	if c.dryRun {
		c.log.Info("dry run: not setting scale-in protection", "group", group, "instanceID", instanceID, "protect", protect)
		return nil
	}
	api, ok := c.api.(protectionAPI)
	if !ok {
		return errNoProtectionAPI
	}
	_, err := api.SetInstanceProtection(ctx, &autoscaling.SetInstanceProtectionInput{
		AutoScalingGroupName: aws.String(group), InstanceIds: []string{instanceID}, ProtectedFromScaleIn: aws.Bool(protect),
	})
	if err != nil {
		return fmt.Errorf("setting scale-in protection of %s in %s to %t: %w", instanceID, group, protect, err)
	}
	return nil
}
