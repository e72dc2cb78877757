package sqs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/internal/clocktest"
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

// countingBatch answers ChangeMessageVisibilityBatch with every entry done,
// records each entry's visibility by receipt handle and tells calls about
// each call once answered.
type countingBatch struct {
	sqsAPI
	mu    sync.Mutex
	asked map[string][]int32
	calls chan int
}

func (f *countingBatch) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	f.mu.Lock()
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		f.asked[aws.ToString(e.ReceiptHandle)] = append(f.asked[aws.ToString(e.ReceiptHandle)], e.VisibilityTimeout)
		out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	f.mu.Unlock()
	f.calls <- len(in.Entries)
	return out, nil
}

// With the default visibility (30 s since issue 28 item 6: it bounds how
// long a killed leader's messages stay hidden) a message whose work runs
// for minutes never comes close to lapsing: every 10 s each message held
// is asked 30 s more, so it is always known hidden for at least the 20 s
// its extension has to get through. 25 messages go in 3 calls a round.
func TestExtensionWithTheDefaultVisibility(t *testing.T) {
	clk := clocktesting.NewFakeClock(clocktest.Epoch)
	fake := &countingBatch{asked: map[string][]int32{}, calls: make(chan int, 100)}
	s := New(fake, clk, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{QueueURL: "q"})
	if s.o.Visibility != 30*time.Second {
		t.Fatalf("default visibility %s, want 30s", s.o.Visibility)
	}
	const messages = 25
	received := clk.Now()
	for i := range messages {
		s.inFlight[fmt.Sprint("m", i)] = inFlight{handle: fmt.Sprint("h", i), received: received, hiddenUntil: received.Add(s.o.Visibility)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.extendLoop(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	const minutes = 3
	for sec := 1; sec <= minutes*60; sec++ {
		clk.Step(time.Second)
		if sec%10 == 0 {
			for got := 0; got < messages; {
				select {
				case n := <-fake.calls:
					got += n
				case <-time.After(5 * time.Second):
					t.Fatalf("at %d s: %d of %d messages extended", sec, got, messages)
				}
			}
			waitKnownHidden(t, s, clk.Now().Add(s.o.Visibility))
		}
		s.mu.Lock()
		for id, f := range s.inFlight {
			if left := f.hiddenUntil.Sub(clk.Now()); left < 20*time.Second {
				t.Errorf("at %d s: %s known hidden for %s more, want at least 20s", sec, id, left)
			}
		}
		s.mu.Unlock()
	}
	select {
	case n := <-fake.calls:
		t.Errorf("a call of %d entries between rounds", n)
	default:
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	for i := range messages {
		asked := fake.asked[fmt.Sprint("h", i)]
		if len(asked) != minutes*6 {
			t.Errorf("h%d extended %d times in %d min, want %d", i, len(asked), minutes, minutes*6)
		}
		for _, v := range asked {
			if v != 30 {
				t.Errorf("h%d asked %d s, want 30", i, v)
			}
		}
	}
}

// waitKnownHidden waits until the answers of a round are recorded: every
// message held known hidden until until.
func waitKnownHidden(t *testing.T, s *Source, until time.Time) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		all := true
		for _, f := range s.inFlight {
			all = all && f.hiddenUntil.Equal(until)
		}
		s.mu.Unlock()
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the round's answers not recorded within 5 s")
		}
	}
}

// barrierBatch answers a ChangeMessageVisibilityBatch only once want calls
// are on their way together (or after 3 s), and records the most it saw.
type barrierBatch struct {
	sqsAPI
	want     int
	mu       sync.Mutex
	inFlight int
	most     int
	met      bool
	all      chan struct{}
}

func (f *barrierBatch) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	f.mu.Lock()
	f.inFlight++
	f.most = max(f.most, f.inFlight)
	if f.inFlight == f.want && !f.met {
		f.met = true
		close(f.all)
	}
	f.mu.Unlock()
	select {
	case <-f.all:
	case <-time.After(3 * time.Second):
	}
	f.mu.Lock()
	f.inFlight--
	f.mu.Unlock()
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

// The batches of one round go out together, up to batchesInFlight at once:
// one after another, a storm's 5,000 messages took 500 calls in a row, a
// third of the default visibility at 20 ms a call and longer than the 5 s
// the hand-back has on the way out.
func TestBatchesSentTogether(t *testing.T) {
	clk := clocktesting.NewFakeClock(clocktest.Epoch)
	fake := &barrierBatch{want: batchesInFlight, all: make(chan struct{})}
	s := New(fake, clk, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{QueueURL: "q"})
	for i := range 3 * batchesInFlight * maxMessages {
		s.inFlight[fmt.Sprint("m", i)] = inFlight{handle: fmt.Sprint("h", i), received: clk.Now(), hiddenUntil: clk.Now().Add(time.Minute)}
	}
	s.extend(context.Background())
	if fake.most != batchesInFlight {
		t.Errorf("at most %d calls on their way together, want %d", fake.most, batchesInFlight)
	}
}
