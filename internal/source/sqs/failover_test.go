package sqs

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/internal/clocktest"
)

// failsSome answers ChangeMessageVisibilityBatch with the entries whose
// handle is in gone failed (their messages were deleted), the rest done.
type failsSome struct {
	okBatch
	gone map[string]bool
}

func (f *failsSome) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	var ok []types.ChangeMessageVisibilityBatchRequestEntry
	for _, e := range in.Entries {
		if f.gone[aws.ToString(e.ReceiptHandle)] {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid")})
			continue
		}
		ok = append(ok, e)
	}
	done, err := f.okBatch.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{Entries: ok}, o...)
	if err != nil {
		return nil, err
	}
	out.Successful = done.Successful
	return out, nil
}

// Reveal makes a former leader's messages visible at once through the
// hand-back client, in batches of ten, and counts only those it could:
// 25 handles, 3 of them deleted meanwhile.
func TestRevealCountsWhatBecameVisible(t *testing.T) {
	api := &okBatch{sent: map[string]int32{}}
	hb := &failsSome{okBatch: okBatch{sent: map[string]int32{}}, gone: map[string]bool{"h3": true, "h7": true, "h20": true}}
	s := New(api, clocktesting.NewFakeClock(clocktest.Epoch), slog.New(slog.NewTextHandler(io.Discard, nil)), Options{QueueURL: "q", HandBack: hb})
	var handles []string
	for i := range 25 {
		handles = append(handles, fmt.Sprintf("h%d", i))
	}
	if got := s.Reveal(context.Background(), handles); got != 22 {
		t.Errorf("Reveal = %d, want 22", got)
	}
	if len(hb.sent) != 22 || len(api.sent) != 0 {
		t.Errorf("hand-back client changed %d messages, the source's own %d; want 22 and 0", len(hb.sent), len(api.sent))
	}
	for h, v := range hb.sent {
		if v != 0 {
			t.Errorf("%s given visibility %d, want 0", h, v)
		}
	}
	if s.InFlight() != 0 {
		t.Errorf("revealed messages are not the source's: %d in flight", s.InFlight())
	}
}

// Held lists what the source holds with its newest receipt handle and
// known visibility; on a stop, the messages KeepOnHandBack names stay
// hidden (the next leader reveals them from the failover journal) and the
// rest are handed back.
func TestHeldAndKeepOnHandBack(t *testing.T) {
	clk := clocktesting.NewFakeClock(clocktest.Epoch)
	hb := &okBatch{sent: map[string]int32{}}
	s := New(&okBatch{sent: map[string]int32{}}, clk, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{
		QueueURL: "q", HandBack: hb, KeepOnHandBack: func(h string) bool { return h == "h1" },
	})
	now := clk.Now()
	s.inFlight["m1"] = inFlight{handle: "h1", received: now, hiddenUntil: now.Add(30 * time.Second)}
	s.inFlight["m2"] = inFlight{handle: "h2", received: now, hiddenUntil: now.Add(20 * time.Second)}
	held := s.Held()
	slices.SortFunc(held, func(a, b Held) int { return a.HiddenUntil.Compare(b.HiddenUntil) })
	want := []Held{{MessageID: "m2", Handle: "h2", HiddenUntil: now.Add(20 * time.Second)}, {MessageID: "m1", Handle: "h1", HiddenUntil: now.Add(30 * time.Second)}}
	if !slices.Equal(held, want) {
		t.Errorf("Held = %v, want %v", held, want)
	}
	s.handBack(context.Background())
	if _, sent := hb.sent["h1"]; sent {
		t.Errorf("h1 handed back although KeepOnHandBack names it")
	}
	if v, sent := hb.sent["h2"]; !sent || v != 0 {
		t.Errorf("h2 not handed back (sent %v, visibility %d)", sent, v)
	}
	if len(s.Held()) != 0 {
		t.Errorf("still held after the stop: %v", s.Held())
	}
}

// OnHold is told once a receive adds messages to those held, and not when
// a receive brings nothing new (the same message again) or nothing at all.
func TestOnHoldOnlyForNewMessages(t *testing.T) {
	q := &twiceQueue{handles: []string{"h1", "h2"}}
	var holds int
	s := New(q, clocktesting.NewFakeClock(clocktest.Epoch), slog.New(slog.NewTextHandler(io.Discard, nil)), Options{QueueURL: "q", OnHold: func() { holds++ }})
	for range 3 { // m1, m1 again, nothing
		if _, err := s.receive(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if holds != 1 {
		t.Errorf("OnHold told %d times, want once", holds)
	}
}
