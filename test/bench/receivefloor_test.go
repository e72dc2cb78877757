package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/sync/errgroup"

	"lifeboat.dev/lifeboat/test/testenv"
)

// receiveFloorPollers is lifeboat's default --queue-receivers: the floor
// receives the way lifeboat does as shipped.
const receiveFloorPollers = 4

// receiveFloor times moto handing n Spot notices to a bare SQS client, the
// floor of lifeboat's "received all" in a spot-queued burst. It queues them
// on a queue stack of its own (floor-recv-<i>) the way the burst's are
// queued (sendSpotNotices), then receives with receiveFloorPollers
// receives at once, ten messages each and the attributes lifeboat asks
// for, until it has had every message once, and returns the seconds from
// its first receive. It does nothing else: no deletes, no visibility
// changes, each message hidden for 10 minutes, so moto serves nothing but
// the receives. The API server is idle meanwhile (the floor's pods are
// gone), as it is not in lifeboat's burst.
func receiveFloor(ctx context.Context, b *testing.B, endpoint string, i, n int) float64 {
	stack, err := testenv.CreateQueueStack(ctx, endpoint, fmt.Sprintf("floor-recv-%d", i))
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, n)
	for j := range ids {
		ids[j] = testenv.RandomInstanceID()
	}
	sendSpotNotices(ctx, b, endpoint, stack.QueueURL, ids, func(int, time.Time) {})
	client := sqs.NewFromConfig(testenv.MotoAWSConfig(), func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) })

	rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	var mu sync.Mutex
	seen := make(map[string]bool, n)
	var last time.Time
	t0 := time.Now()
	g, gctx := errgroup.WithContext(rctx)
	for range receiveFloorPollers {
		g.Go(func() error {
			for {
				mu.Lock()
				done := len(seen) >= n
				mu.Unlock()
				if done {
					return nil
				}
				out, err := client.ReceiveMessage(gctx, floorReceive(stack.QueueURL))
				if err != nil {
					return err
				}
				mu.Lock()
				for _, m := range out.Messages {
					if id := aws.ToString(m.MessageId); !seen[id] {
						seen[id] = true
						if len(seen) == n {
							last = time.Now()
						}
					}
				}
				mu.Unlock()
			}
		})
	}
	if err := g.Wait(); err != nil {
		mu.Lock()
		got := len(seen)
		mu.Unlock()
		b.Fatalf("receive floor: %d of %d messages received: %v", got, n, err)
	}
	return last.Sub(t0).Seconds()
}

// floorReceive is a floor's receive: ten messages and the attributes
// lifeboat asks for, a short long poll, and every message hidden for 10
// minutes, so moto serves no visibility changes.
func floorReceive(queueURL string) *sqs.ReceiveMessageInput {
	return &sqs.ReceiveMessageInput{
		QueueUrl:            aws.String(queueURL),
		MaxNumberOfMessages: 10,
		WaitTimeSeconds:     1,
		VisibilityTimeout:   600,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{
			sqstypes.MessageSystemAttributeNameSentTimestamp, sqstypes.MessageSystemAttributeNameApproximateReceiveCount},
	}
}
