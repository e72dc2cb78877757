package sqs

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// batchFake answers ChangeMessageVisibilityBatch with every entry failed
// (ReceiptHandleIsInvalid, as SQS answers for a deleted message) and calls
// during first, to let a test act while the call is on its way.
type batchFake struct {
	sqsAPI
	during func()
}

func (f *batchFake) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	f.during()
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), Message: aws.String("The input receipt handle is invalid.")})
	}
	return out, nil
}

// A message deleted while its visibility extension was on its way fails
// that extension; that is expected and not worth a warning. A message still
// in flight whose extension fails is.
func TestExtendFailures(t *testing.T) {
	tests := []struct {
		name     string
		deleteIt bool
		warnings int
	}{
		{name: "deleted meanwhile", deleteIt: true, warnings: 0},
		{name: "still in flight", deleteIt: false, warnings: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC))
			fake := &batchFake{}
			s := New(fake, clk, slog.New(slog.NewTextHandler(&logs, nil)), Options{QueueURL: "q"})
			s.inFlight["m1"] = inFlight{handle: "h1", received: clk.Now()}
			fake.during = func() {
				if tt.deleteIt {
					s.mu.Lock()
					delete(s.inFlight, "m1")
					s.mu.Unlock()
				}
			}
			s.extend(context.Background())
			if got := strings.Count(logs.String(), "extending message visibility failed"); got != tt.warnings {
				t.Errorf("%d warnings, want %d:\n%s", got, tt.warnings, logs.String())
			}
		})
	}
}
