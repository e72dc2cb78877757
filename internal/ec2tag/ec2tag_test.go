package ec2tag

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

type fakeEC2 struct {
	tags []types.TagDescription
	err  error
	in   *ec2.DescribeTagsInput
}

func (f *fakeEC2) DescribeTags(_ context.Context, in *ec2.DescribeTagsInput, _ ...func(*ec2.Options)) (*ec2.DescribeTagsOutput, error) {
	f.in = in
	return &ec2.DescribeTagsOutput{Tags: f.tags}, f.err
}

func tag(id, key string) types.TagDescription {
	return types.TagDescription{ResourceId: aws.String(id), Key: aws.String(key), Value: aws.String("")}
}

func TestHasKey(t *testing.T) {
	const key = "aws-node-termination-handler/managed"
	tests := []struct {
		name    string
		tags    []types.TagDescription
		err     error
		want    bool
		wantErr bool
	}{
		{name: "tagged (any value)", tags: []types.TagDescription{tag("i-1", key)}, want: true},
		{name: "no such tag", tags: nil, want: false},
		{name: "another instance's tag", tags: []types.TagDescription{tag("i-2", key)}, want: false},
		{name: "another key", tags: []types.TagDescription{tag("i-1", "team")}, want: false},
		{name: "EC2 error", err: errors.New("UnauthorizedOperation"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeEC2{tags: tt.tags, err: tt.err}
			got, err := HasKey(f, key)(context.Background(), "i-1")
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("HasKey = %v, %v; want %v (error: %v)", got, err, tt.want, tt.wantErr)
			}
			if len(f.in.Filters) != 2 || f.in.Filters[0].Values[0] != "i-1" || f.in.Filters[1].Values[0] != key {
				t.Errorf("filters %+v; want resource-id i-1 and key %s", f.in.Filters, key)
			}
		})
	}
}
