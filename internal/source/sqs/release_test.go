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

// orderQueue applies visibility changes in the order they arrive, as SQS
// does, and records the last one per receipt handle. A batch arrives only
// once the test lets it (proceed); a single change signals released when
// it arrives.
type orderQueue struct {
	sqsAPI
	entered  chan struct{} // closed when the batch call starts
	proceed  chan struct{} // the batch arrives once this is closed
	released chan struct{} // closed when the single change arrives
	mu       sync.Mutex
	last     map[string]int32
}

func (q *orderQueue) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	close(q.entered)
	<-q.proceed
	q.mu.Lock()
	defer q.mu.Unlock()
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		q.last[aws.ToString(e.ReceiptHandle)] = e.VisibilityTimeout
		out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (q *orderQueue) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	q.mu.Lock()
	q.last[aws.ToString(in.ReceiptHandle)] = in.VisibilityTimeout
	q.mu.Unlock()
	close(q.released)
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

// A message released (handed back for another cluster) while a round of
// extensions that took its receipt handle is on its way stays released:
// the release's change lands after the round's. Before the fix the round's
// change landed last and hid the message for the whole visibility timeout.
func TestReleaseDuringAnExtension(t *testing.T) {
	tests := []struct {
		name  string
		delay time.Duration
	}{
		{name: "at once", delay: 0},
		{name: "after a second", delay: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(clocktest.Epoch)
			q := &orderQueue{entered: make(chan struct{}), proceed: make(chan struct{}), released: make(chan struct{}), last: map[string]int32{}}
			s := New(q, clk, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{QueueURL: "q"})
			s.inFlight["m1"] = inFlight{handle: "h1", received: clk.Now(), hiddenUntil: clk.Now().Add(DefaultVisibility)}

			extended := make(chan struct{})
			go func() { s.extend(context.Background()); close(extended) }()
			<-q.entered // the round holds h1 and is on its way
			releaseDone := make(chan error, 1)
			go func() {
				releaseDone <- s.Release(context.Background(), Receipt{MessageID: "m1", ReceiptHandle: "h1"}, tt.delay)
			}()
			// Give the release every chance to overtake the round: it does
			// (the bug) as soon as its change arrives; with the fix it waits.
			select {
			case <-q.released:
			case <-time.After(300 * time.Millisecond):
			}
			close(q.proceed)
			<-extended
			if err := <-releaseDone; err != nil {
				t.Fatal(err)
			}
			want := int32(tt.delay / time.Second)
			if got := q.last["h1"]; got != want {
				t.Errorf("the message's last visibility change was %d s; want the release's %d s (the extension landed after it)", got, want)
			}
			if s.InFlight() != 0 {
				t.Errorf("%d messages still held after the release", s.InFlight())
			}
		})
	}
}
