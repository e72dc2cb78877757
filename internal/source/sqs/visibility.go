package sqs

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/sync/errgroup"
)

// handBack makes every message still in flight visible again at once,
// unless its visibility may have lapsed (another consumer may hold it).
func (s *Source) handBack(ctx context.Context) {
	now := s.clock.Now()
	s.mu.Lock()
	var entries []types.ChangeMessageVisibilityBatchRequestEntry
	var ids []string
	lapsed, kept := 0, 0
	for id, f := range s.inFlight {
		if !now.Before(f.hiddenUntil) {
			lapsed++
			continue
		}
		if s.o.KeepOnHandBack != nil && s.o.KeepOnHandBack(f.handle) {
			kept++
			continue
		}
		entries = append(entries, types.ChangeMessageVisibilityBatchRequestEntry{
			Id: aws.String(strconv.Itoa(len(entries))), ReceiptHandle: aws.String(f.handle), VisibilityTimeout: 0,
		})
		ids = append(ids, id)
	}
	s.inFlight = map[string]inFlight{}
	s.mu.Unlock()
	if len(entries) > 0 {
		s.log.Info("handing messages in flight back to the queue", "messages", len(entries))
	}
	if lapsed > 0 {
		s.log.Info("not handing back messages whose visibility may have lapsed: another consumer may hold them", "messages", lapsed)
	}
	if kept > 0 {
		s.log.Info("not handing back messages the next leader finds in the failover journal", "messages", kept)
	}
	s.changeVisibility(ctx, s.o.HandBack, entries, ids, "handing a message back failed")
}

// Reveal makes the messages of receipt handles another replica held (the
// failover journal of a leader that died) visible at once, through the
// hand-back client, and returns how many it made visible. A handle whose
// message was deleted meanwhile fails; that is not an error.
func (s *Source) Reveal(ctx context.Context, handles []string) int {
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(handles))
	for i, h := range handles {
		entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(h), VisibilityTimeout: 0}
	}
	return s.changeVisibility(ctx, s.o.HandBack, entries, nil, "making a former leader's message visible failed")
}

// stillInFlight reports whether the message of batch entry entryID (an
// index into ids) is still being worked on.
func (s *Source) stillInFlight(ids []string, entryID string) bool {
	i, err := strconv.Atoi(entryID)
	if err != nil || i < 0 || i >= len(ids) {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.inFlight[ids[i]]
	return ok
}

// hidden records that the messages of the successful entries ok (an
// entry's ID is its index in entries and ids) are hidden until sent plus
// the visibility they got.
func (s *Source) hidden(sent time.Time, ids []string, entries []types.ChangeMessageVisibilityBatchRequestEntry, ok []types.ChangeMessageVisibilityBatchResultEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range ok {
		j, err := strconv.Atoi(aws.ToString(r.Id))
		if err != nil || j < 0 || j >= len(entries) {
			continue
		}
		if f, held := s.inFlight[ids[j]]; held {
			f.hiddenUntil = sent.Add(time.Duration(entries[j].VisibilityTimeout) * time.Second)
			s.inFlight[ids[j]] = f
		}
	}
}

// extendLoop keeps every in-flight message invisible: every third of the
// visibility timeout it pushes their visibility out again, ten per call.
func (s *Source) extendLoop(ctx context.Context) {
	t := s.clock.NewTicker(s.o.Visibility / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		s.extend(ctx)
	}
}

func (s *Source) extend(ctx context.Context) {
	s.extending.Lock()
	defer s.extending.Unlock()
	now := s.clock.Now()
	s.mu.Lock()
	var entries []types.ChangeMessageVisibilityBatchRequestEntry
	var ids []string // message ID of entries[i]
	for id, f := range s.inFlight {
		// SQS caps a message's total invisibility at 12 h from its receipt.
		left := maxVisibility - now.Sub(f.received)
		if left <= 0 {
			delete(s.inFlight, id)
			continue
		}
		entries = append(entries, types.ChangeMessageVisibilityBatchRequestEntry{
			Id: aws.String(strconv.Itoa(len(entries))), ReceiptHandle: aws.String(f.handle),
			VisibilityTimeout: int32(min(s.o.Visibility, left) / time.Second),
		})
		ids = append(ids, id)
	}
	s.mu.Unlock()
	s.changeVisibility(ctx, s.api, entries, ids, "extending message visibility failed")
}

// batchesInFlight bounds the visibility calls sent at once. One after
// another, the 5,000 messages of a region-wide storm take 500 calls per
// round, ~10 s at 20 ms a call: a third of the default visibility (the
// extension's margin is two thirds), and twice the 5 s the hand-back has on
// the way out.
const batchesInFlight = 8

// changeVisibility sends entries (ids[i] is the message of entries[i]) in
// batches of ten through api, up to batchesInFlight at once. Each message
// that got its new visibility is known hidden until its batch's send time
// plus it. A failed entry is logged with failure unless its message was
// deleted meanwhile (the source no longer holds it).
//
// It returns how many entries succeeded. With ids nil the messages are not
// this source's: nothing is recorded and failures are only counted.
func (s *Source) changeVisibility(ctx context.Context, api HandBackAPI, entries []types.ChangeMessageVisibilityBatchRequestEntry, ids []string, failure string) int {
	var g errgroup.Group
	g.SetLimit(batchesInFlight)
	var mu sync.Mutex
	done := 0
	for i := 0; i < len(entries); i += maxMessages {
		batch := entries[i:min(i+maxMessages, len(entries))]
		g.Go(func() error {
			n := s.changeBatch(ctx, api, batch, entries, ids, failure)
			mu.Lock()
			done += n
			mu.Unlock()
			return nil
		})
	}
	_ = g.Wait()
	return done
}

// changeBatch sends one batch of entries (a slice of all).
func (s *Source) changeBatch(ctx context.Context, api HandBackAPI, batch, all []types.ChangeMessageVisibilityBatchRequestEntry, ids []string, failure string) int {
	sent := s.clock.Now()
	out, err := api.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(s.o.QueueURL), Entries: batch})
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			s.log.Warn(failure, "messages", len(batch), "error", err.Error())
		}
		return 0
	}
	if ids == nil {
		for _, f := range out.Failed {
			s.log.Debug(failure, "code", aws.ToString(f.Code), "error", aws.ToString(f.Message))
		}
		return len(out.Successful)
	}
	s.hidden(sent, ids, all, out.Successful)
	for _, f := range out.Failed {
		if !s.stillInFlight(ids, aws.ToString(f.Id)) {
			continue // deleted while the batch was on its way
		}
		s.log.Warn(failure, "code", aws.ToString(f.Code), "error", aws.ToString(f.Message))
	}
	return len(out.Successful)
}
