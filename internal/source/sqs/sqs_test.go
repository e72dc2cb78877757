package sqs_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/source/sqs"
	"lifeboat.dev/lifeboat/test/testenv"
)

// Against moto's real SQS: a message held by lifeboat stays invisible past
// its visibility timeout; a released one comes back; an acked one is gone.
func TestHoldReleaseAck(t *testing.T) {
	moto := testenv.StartMoto(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := awssqs.NewFromConfig(testenv.MotoAWSConfig(), func(o *awssqs.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) })
	q, err := client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("hold")})
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"held", "released", "acked"} {
		if _, err := client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	src := sqs.New(client, clock.RealClock{}, slog.New(slog.NewTextHandler(io.Discard, nil)), sqs.Options{
		QueueURL: aws.ToString(q.QueueUrl), Workers: 2, Visibility: 2 * time.Second,
	})
	var mu sync.Mutex
	seen := map[string]int{}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- src.Run(runCtx, func(ctx context.Context, m sqs.Message) {
			mu.Lock()
			seen[string(m.Body)]++
			n := seen[string(m.Body)]
			mu.Unlock()
			switch {
			case string(m.Body) == "released" && n == 1:
				if err := src.Release(ctx, m.Receipt, 0); err != nil {
					t.Error(err)
				}
			case string(m.Body) == "acked", string(m.Body) == "released":
				if err := src.Ack(ctx, m.Receipt); err != nil {
					t.Error(err)
				}
			}
			if m.SentAt.IsZero() {
				t.Error("SentAt not set")
			}
		})
	}()
	// Three visibility timeouts pass; the held message must not come back.
	time.Sleep(6 * time.Second)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["held"] != 1 {
		t.Errorf("held message received %d times, want 1 (its visibility was not extended)", seen["held"])
	}
	if seen["released"] != 2 {
		t.Errorf("released message received %d times, want 2", seen["released"])
	}
	if seen["acked"] != 1 {
		t.Errorf("acked message received %d times, want 1", seen["acked"])
	}
	// Issue 14 item 7: stopping hands the held message back at once; it
	// is not hidden for the rest of its visibility timeout.
	if src.InFlight() != 0 {
		t.Errorf("in flight = %d after Run returned, want 0 (handed back)", src.InFlight())
	}
	got, err := client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 0, MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 1 || aws.ToString(got.Messages[0].Body) != "held" {
		t.Errorf("received %d messages right after the source stopped, want the held one back at once", len(got.Messages))
	}
}
