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

// okBatch answers ChangeMessageVisibilityBatch with every entry done and
// records the receipt handles and visibilities it was sent.
type okBatch struct {
	sqsAPI
	mu   sync.Mutex
	sent map[string]int32
}

func (f *okBatch) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		f.sent[aws.ToString(e.ReceiptHandle)] = e.VisibilityTimeout
		out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

// A stopping source hands back only the messages it knows are still hidden
// from everyone else. One whose visibility may have lapsed (the process was
// paused, or its extensions failed: the leader fence refuses them once the
// Lease is lost) may have been received by the next leader: handing it
// back with the old receipt would show it to a third consumer. A
// successful extension pushes the message's known visibility out.
func TestHandBackOnlyWhatIsStillHidden(t *testing.T) {
	const visibility = 30 * time.Second
	tests := []struct {
		name       string
		extendedAt time.Duration // since the message was received; 0: never extended
		stoppedAt  time.Duration // since the message was received
		want       bool          // handed back
	}{
		{name: "received just now", stoppedAt: time.Second, want: true},
		{name: "visibility about to lapse", stoppedAt: visibility - time.Second, want: true},
		{name: "visibility lapsed", stoppedAt: visibility, want: false},
		{name: "lapsed but for its extension", extendedAt: visibility / 3, stoppedAt: visibility + visibility/6, want: true},
		{name: "lapsed after its extension", extendedAt: visibility / 3, stoppedAt: visibility + visibility/3, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(clocktest.Epoch)
			api := &okBatch{sent: map[string]int32{}}
			handBack := &okBatch{sent: map[string]int32{}}
			s := New(api, clk, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{QueueURL: "q", Visibility: visibility, HandBack: handBack})
			received := clk.Now()
			s.inFlight["m1"] = inFlight{handle: "h1", received: received, hiddenUntil: received.Add(visibility)}
			extended := tt.extendedAt > 0
			if extended {
				clk.SetTime(received.Add(tt.extendedAt))
				s.extend(context.Background())
			}
			clk.SetTime(received.Add(tt.stoppedAt))
			s.handBack(context.Background())
			v, sent := handBack.sent["h1"]
			if sent != tt.want || sent && v != 0 {
				t.Errorf("handed back: %v (visibility %d), want %v", sent, v, tt.want)
			}
			if len(api.sent) != map[bool]int{false: 0, true: 1}[extended] {
				t.Errorf("source's own client sent %v; the hand-back must go through Options.HandBack", api.sent)
			}
			if s.InFlight() != 0 {
				t.Errorf("%d messages still in flight after the hand-back", s.InFlight())
			}
		})
	}
}
