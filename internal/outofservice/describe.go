package outofservice

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// BatchSize is the most instance IDs one DescribeInstances call asks
// about. They are given as the instance-id filter, whose values EC2 caps
// at 200, rather than as InstanceIds: an ID that no longer exists is then
// simply absent from the answer instead of failing the whole call
// (InvalidInstanceID.NotFound).
const BatchSize = 200

// describer is the EC2 call the Watcher makes (ec2:DescribeInstances).
type describer interface {
	ec2.DescribeInstancesAPIClient
}

var _ describer = (*ec2.Client)(nil)

// ask asks EC2 for the state of ids, BatchSize at a time, and learns the
// answers as of now. Each instance asked about counts as asked, answered or
// not: a failing call is tried again an interval later, never hot. An
// instance EC2 does not list (gone for more than about an hour, or not
// this account's) stays unknown: nothing is done on its behalf.
func (w *Watcher) ask(ctx context.Context, ids []string, now time.Time) {
	for start := 0; start < len(ids); start += BatchSize {
		batch := ids[start:min(start+BatchSize, len(ids))]
		states, err := w.describe(ctx, batch)
		w.mu.Lock()
		for _, id := range batch {
			w.asked[id] = now
		}
		for id, state := range states {
			w.learn(id, state, now)
		}
		w.mu.Unlock()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.Log.Warn("describing instances failed; asking again in an interval", "instances", len(batch), "interval", w.o.Interval.String(), "error", err.Error())
		}
	}
}

// describe returns the state of each listed instance of ids.
func (w *Watcher) describe(ctx context.Context, ids []string) (map[string]string, error) {
	in := &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("instance-id"), Values: ids}}}
	states := map[string]string{}
	pages := ec2.NewDescribeInstancesPaginator(w.EC2, in)
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return states, err
		}
		for _, r := range out.Reservations {
			for _, i := range r.Instances {
				if i.InstanceId != nil && i.State != nil {
					states[*i.InstanceId] = string(i.State.Name)
				}
			}
		}
	}
	return states, nil
}
