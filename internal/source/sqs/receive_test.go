package sqs

import (
	"context"
	"errors"
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

// slowQueue answers each receive when the test says so, or ends it when
// its context ends; it tells the test when a receive was sent.
type slowQueue struct {
	sqsAPI
	sent   chan struct{}
	answer chan []types.Message
}

func (q *slowQueue) ReceiveMessage(ctx context.Context, _ *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	q.sent <- struct{}{}
	select {
	case msgs := <-q.answer:
		return &sqs.ReceiveMessageOutput{Messages: msgs}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A receive's answer is waited for up to receiveSlack beyond its long
// poll, on the source's clock; one that does not come by then is given up
// on, with a cause that says so. A stop does not end a receive already
// sent (SQS may hand it messages), but the same bound ends the wait.
func TestReceiveGivesUpOnAnAnswerThatDoesNotCome(t *testing.T) {
	tests := []struct {
		name      string
		stopAfter time.Duration // since the send; 0: the source keeps running
		answerAt  time.Duration // since the send; 0: never
		wantMsg   bool          // the answer's message reaches the workers
	}{
		{name: "answered at the end of the long poll", answerAt: longPoll, wantMsg: true},
		{name: "answered just inside the slack", answerAt: longPoll + receiveSlack - time.Second, wantMsg: true},
		{name: "never answered"},
		{name: "stopping, answered inside the slack", stopAfter: time.Second, answerAt: longPoll + receiveSlack - time.Second},
		{name: "stopping, never answered", stopAfter: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(clocktest.Epoch)
			q := &slowQueue{sent: make(chan struct{}, 1), answer: make(chan []types.Message)}
			errs := make(chan error, 1)
			s := New(q, clk, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{QueueURL: "q",
				OnReceiveError: func(err error) { errs <- err }})
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			work := make(chan Message, 1)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); s.receiveLoop(ctx, work) }()
			<-q.sent
			sent := clk.Now()

			// Move the clock to each moment in order: the stop, then the
			// answer or the end of the wait.
			moveTo := func(d time.Duration) {
				for deadline := time.Now().Add(5 * time.Second); !clk.HasWaiters(); time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("the receive set no timer on the source's clock")
					}
				}
				clk.SetTime(sent.Add(d))
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			if tt.stopAfter > 0 && (tt.answerAt == 0 || tt.stopAfter < tt.answerAt) {
				moveTo(tt.stopAfter)
				stop()
			}
			switch {
			case tt.answerAt > 0:
				moveTo(tt.answerAt)
				select {
				case q.answer <- []types.Message{{MessageId: aws.String("m1"), ReceiptHandle: aws.String("h1"), Body: aws.String("{}")}}:
				case <-time.After(5 * time.Second):
					t.Fatalf("the receive was given up on before its answer at %s", tt.answerAt)
				}
			case tt.stopAfter == 0:
				moveTo(longPoll + receiveSlack)
				select {
				case err := <-errs:
					if !errors.Is(err, errNoAnswer) {
						t.Errorf("receive error %v, want its cause %v", err, errNoAnswer)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("the receive was not given up on at %s", longPoll+receiveSlack)
				}
			default:
				moveTo(longPoll + receiveSlack)
				select {
				case <-done:
				case <-time.After(5 * time.Second):
					t.Fatalf("stopped at %s: the receive loop still waits at %s", tt.stopAfter, longPoll+receiveSlack)
				}
			}
			if tt.wantMsg {
				select {
				case m := <-work:
					if m.MessageID != "m1" {
						t.Errorf("worked on %q, want m1", m.MessageID)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("the answer's message never reached the workers")
				}
			}
			// The loop's next receive (if any) is given up on at the stop.
			stop()
			for deadline := time.Now().Add(5 * time.Second); ; clk.Step(time.Minute) {
				select {
				case <-done:
					return
				case <-time.After(10 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatal("the receive loop did not return after the stop")
				}
			}
		})
	}
}
