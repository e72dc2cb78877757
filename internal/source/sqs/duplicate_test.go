package sqs

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/internal/clocktest"
)

// twiceQueue delivers message m1 twice, with receipt handles h1 then h2
// (two receives answered at once, as moto's concurrent receives did, or a
// standard queue's at-least-once delivery), then nothing; it records the
// handles deletes and visibility changes were sent.
type twiceQueue struct {
	sqsAPI
	mu      sync.Mutex
	handles []string
	deleted []string
	changed []string
}

func (q *twiceQueue) ReceiveMessage(ctx context.Context, _ *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	q.mu.Lock()
	if len(q.handles) > 0 {
		h := q.handles[0]
		q.handles = q.handles[1:]
		q.mu.Unlock()
		return &sqs.ReceiveMessageOutput{Messages: []types.Message{{MessageId: aws.String("m1"), ReceiptHandle: aws.String(h), Body: aws.String("{}")}}}, nil
	}
	q.mu.Unlock()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(20 * time.Millisecond):
		return &sqs.ReceiveMessageOutput{}, nil
	}
}

func (q *twiceQueue) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.deleted = append(q.deleted, aws.ToString(in.ReceiptHandle))
	return &sqs.DeleteMessageOutput{}, nil
}

func (q *twiceQueue) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.changed = append(q.changed, aws.ToString(in.ReceiptHandle))
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

// A message received again while its work runs is not worked on again:
// the failover run of issue 28 item 6 saw one message received twice at
// once by the new leader, both copies handled and the message deleted
// twice. Ack and Release use the newest receipt handle, the one SQS is
// sure to honour.
func TestReceivedAgainWhileInFlight(t *testing.T) {
	for _, ack := range []bool{true, false} {
		q := &twiceQueue{handles: []string{"h1", "h2"}}
		clk := clocktesting.NewFakeClock(clocktest.Epoch)
		s := New(q, clk, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{QueueURL: "q", Receivers: 1})
		ctx, cancel := context.WithCancel(context.Background())
		var mu sync.Mutex
		var got []Message
		done := make(chan error, 1)
		go func() {
			done <- s.Run(ctx, func(_ context.Context, m Message) {
				mu.Lock()
				got = append(got, m)
				mu.Unlock()
			})
		}()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			q.mu.Lock()
			left := len(q.handles)
			q.mu.Unlock()
			if left == 0 || time.Now().After(deadline) {
				break
			}
		}
		time.Sleep(100 * time.Millisecond) // a few more receives
		mu.Lock()
		if len(got) != 1 {
			t.Fatalf("handled %d times, want once", len(got))
		}
		first := got[0].Receipt
		mu.Unlock()
		var err error
		if ack {
			err = s.Ack(ctx, first)
		} else {
			err = s.Release(ctx, first, 0)
		}
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		q.mu.Lock()
		sent := map[bool][]string{true: q.deleted, false: q.changed}[ack]
		if len(sent) != 1 || sent[0] != "h2" {
			t.Errorf("ack %v: sent with handles %q, want once with the newest, h2", ack, sent)
		}
		q.mu.Unlock()
	}
}
