package leader_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/leader"
	"lifeboat.dev/lifeboat/internal/source/sqs"
	"lifeboat.dev/lifeboat/test/testenv"
)

// Issue 22 defect 2: the chart runs two replicas with leader election. When
// the leader stops (SIGTERM: a rollout, a restart) or loses the Lease, the
// messages it holds must be visible on the queue again at once, for the
// next leader, not after the visibility timeout (by default the whole Spot
// notice). The pieces are wired as cmd/lifeboat wires them: the election,
// the fence on the SQS client (hand-backs past it), the SQS source as the
// leader's work; moto is the queue. On 609520a no message came back in
// either case: the Lease was released (fence shut) before the source
// handed back, through the fenced client.
func TestMessagesInFlightHandedBackWhenLeadershipEnds(t *testing.T) {
	moto := testenv.StartMoto(t, t.TempDir())
	for _, tc := range []struct {
		name string
		lose bool // the Lease is lost (renewals fail); else the process stops
	}{
		{"stopped (SIGTERM)", false},
		{"lease lost", true},
	} {
		t.Run(tc.name, func(t *testing.T) { handBackScenario(t, moto.Endpoint, tc.lose) })
	}
}

func handBackScenario(t *testing.T, endpoint string, lose bool) {
	const messages = 3
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	plain := awssqs.NewFromConfig(testenv.MotoAWSConfig(), func(o *awssqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
	q, err := plain.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("handback-" + map[bool]string{false: "stop", true: "lose"}[lose])})
	if err != nil {
		t.Fatal(err)
	}
	for range messages {
		if _, err := plain.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("spot notice")}); err != nil {
			t.Fatal(err)
		}
	}

	// The election on a fake API server whose Lease updates fail once lose
	// is set (the API server unreachable from this replica).
	kube := fake.NewClientset()
	var failRenewals atomic.Bool
	kube.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failRenewals.Load() {
			return true, nil, errors.New("the API server is unreachable")
		}
		return false, nil, nil
	})
	fence := leader.NewFence(clock.RealClock{}, true)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	fenced := awssqs.NewFromConfig(testenv.MotoAWSConfig(), func(o *awssqs.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.HTTPClient = fence.HTTPClient(awshttp.NewBuildableClient())
	})
	// Hand-backs go past the fence (cmd/lifeboat's wiring); the recorder
	// notes whether this replica still led at each.
	handBack := &handBackRecorder{HandBackAPI: plain, fence: fence}
	// A visibility timeout far longer than the test waits: a message not
	// handed back cannot come back by itself in time.
	src := sqs.New(fenced, clock.RealClock{}, log, sqs.Options{QueueURL: aws.ToString(q.QueueUrl), Visibility: 5 * time.Minute, HandBack: handBack})

	var mu sync.Mutex
	held := map[string]bool{}
	allHeld := make(chan struct{})
	lead := func(ctx context.Context) error {
		// The messages are being worked on (never acked) when leadership ends.
		return src.Run(ctx, func(_ context.Context, m sqs.Message) {
			mu.Lock()
			defer mu.Unlock()
			held[m.MessageID] = true
			if len(held) == messages {
				close(allHeld)
			}
		})
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	result := make(chan error, 1)
	go func() {
		result <- leader.Run(runCtx, leader.Options{Client: kube, Name: "lifeboat", Namespace: "lifeboat", Identity: "me",
			LeaseDuration: 600 * time.Millisecond, Log: log}, fence, lead)
	}()
	select {
	case <-allHeld:
	case <-ctx.Done():
		t.Fatal("the leader never received the messages")
	}
	if lose {
		failRenewals.Store(true)
	} else {
		stop() // what SIGTERM does
	}
	select {
	case err := <-result:
		t.Logf("leader.Run returned: %v", err)
	case <-ctx.Done():
		t.Fatal("leader.Run did not return")
	}

	// The next consumer (the new leader) gets every message at once.
	deadline := time.Now().Add(3 * time.Second)
	got := map[string]bool{}
	for len(got) < messages && time.Now().Before(deadline) {
		out, err := plain.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			got[aws.ToString(m.MessageId)] = true
		}
	}
	if len(got) != messages {
		t.Errorf("another consumer received %d of the %d messages held when leadership ended, within 3 s; the others stay hidden for the visibility timeout (5 m)", len(got), messages)
	}
	// A stopping replica hands back while it still holds the Lease, before
	// the next leader can start.
	if calls, fenced := handBack.counts(); !lose && (calls == 0 || fenced > 0) {
		t.Errorf("stopping: %d hand-back calls, %d of them after the Lease was released; want all before", calls, fenced)
	}
}

// handBackRecorder counts hand-back calls and those made while the fence
// was shut.
type handBackRecorder struct {
	sqs.HandBackAPI
	fence *leader.Fence

	mu            sync.Mutex
	calls, fenced int
}

func (r *handBackRecorder) ChangeMessageVisibilityBatch(ctx context.Context, in *awssqs.ChangeMessageVisibilityBatchInput, opts ...func(*awssqs.Options)) (*awssqs.ChangeMessageVisibilityBatchOutput, error) {
	r.mu.Lock()
	r.calls++
	if !r.fence.Open() {
		r.fenced++
	}
	r.mu.Unlock()
	return r.HandBackAPI.ChangeMessageVisibilityBatch(ctx, in, opts...)
}

func (r *handBackRecorder) counts() (calls, fenced int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls, r.fenced
}
