// Package ec2tag answers one question about an EC2 instance: does it carry
// a tag key (--managed-tag, NTH's CHECK_TAG_BEFORE_DRAINING/MANAGED_TAG)?
//
// It owns the EC2 DescribeTags call. It must not decide what an untagged
// instance means (the queue intake does).
package ec2tag

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// API is the part of the EC2 client the check uses.
type API interface {
	DescribeTags(ctx context.Context, in *ec2.DescribeTagsInput, opts ...func(*ec2.Options)) (*ec2.DescribeTagsOutput, error)
}

// HasKey returns a check of whether an instance carries the tag key (any
// value, as NTH checks it).
func HasKey(api API, key string) func(ctx context.Context, instanceID string) (bool, error) {
	return func(ctx context.Context, instanceID string) (bool, error) {
		out, err := api.DescribeTags(ctx, &ec2.DescribeTagsInput{Filters: []types.Filter{
			{Name: aws.String("resource-id"), Values: []string{instanceID}},
			{Name: aws.String("key"), Values: []string{key}},
		}})
		if err != nil {
			return false, fmt.Errorf("reading tag %s of instance %s: %w", key, instanceID, err)
		}
		for _, t := range out.Tags {
			if aws.ToString(t.ResourceId) == instanceID && aws.ToString(t.Key) == key {
				return true, nil
			}
		}
		return false, nil
	}
}
