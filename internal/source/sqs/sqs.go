// Package sqs is the queue-mode event source: it long-polls an SQS queue,
// hands each message to a bounded pool of workers, keeps messages whose work
// is in progress invisible, and deletes a message only when told its work is
// done.
//
// It owns every SQS call. It must not parse messages or touch Kubernetes.
package sqs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/sync/errgroup"
	"k8s.io/utils/clock"
)

type sqsAPI interface {
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibilityBatch(context.Context, *sqs.ChangeMessageVisibilityBatchInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

var _ sqsAPI = (*sqs.Client)(nil)

// SQS limits.
const (
	maxMessages = 10
	// longPoll is a receive's wait. A stop lets the polls in flight finish
	// (see receiveLoop), so it also bounds how long a stop (or a deposed
	// leader's exit) takes; 5 s instead of SQS's 20 s costs four times the
	// idle receives (4 receivers: ~2 million requests, ~0.8 USD a month).
	longPoll = 5 * time.Second
	// receiveSlack bounds a receive beyond its long poll (a slow answer).
	receiveSlack  = 3 * time.Second
	maxVisibility = 12 * time.Hour
)

// Receipt identifies a received message: plain data the controller keeps
// and gives back to Ack or Release.
type Receipt struct {
	MessageID     string
	ReceiptHandle string
	// SentAt is when SQS received the message (SentTimestamp).
	SentAt time.Time
}

// Message is a received message.
type Message struct {
	Receipt
	Body         []byte
	ReceiveCount int
}

// Options configure a Source.
type Options struct {
	QueueURL string
	// Workers handle messages; Receivers long-poll the queue (default 4).
	Workers    int
	Receivers  int
	Visibility time.Duration
	DryRun     bool
	// OnReceiveError is told about failed receives (metrics, readiness).
	OnReceiveError func(error)
	// OnReceive is told about successful receives (readiness).
	OnReceive func()
}

// Source is the SQS event source.
type Source struct {
	api   sqsAPI
	clock clock.WithTicker
	log   *slog.Logger
	o     Options

	mu       sync.Mutex
	inFlight map[string]inFlight // by MessageID
}

type inFlight struct {
	handle   string
	received time.Time
}

// New returns a Source.
func New(api sqsAPI, clk clock.WithTicker, log *slog.Logger, o Options) *Source {
	if o.Workers < 1 {
		o.Workers = 10
	}
	if o.Receivers < 1 {
		o.Receivers = 4
	}
	if o.Visibility <= 0 {
		o.Visibility = 2 * time.Minute
	}
	if o.OnReceiveError == nil {
		o.OnReceiveError = func(error) {}
	}
	if o.OnReceive == nil {
		o.OnReceive = func() {}
	}
	return &Source{api: api, clock: clk, log: log, o: o, inFlight: map[string]inFlight{}}
}

// Run receives messages until ctx ends and calls handle for each in one of
// Options.Workers goroutines. handle should hand work off quickly; a message
// stays in flight (kept invisible) until Ack or Release.
func (s *Source) Run(ctx context.Context, handle func(context.Context, Message)) error {
	g, ctx := errgroup.WithContext(ctx)
	work := make(chan Message)
	for range s.o.Workers {
		g.Go(func() error {
			for m := range work {
				handle(ctx, m)
			}
			return nil
		})
	}
	g.Go(func() error { s.extendLoop(ctx); return nil })
	var receivers sync.WaitGroup
	for range s.o.Receivers {
		receivers.Add(1)
		g.Go(func() error {
			defer receivers.Done()
			s.receiveLoop(ctx, work)
			return nil
		})
	}
	g.Go(func() error {
		receivers.Wait()
		close(work)
		return nil
	})
	err := g.Wait()
	// Whatever is still in flight goes back to the queue at once: the next
	// leader (or this process, restarted) must not wait out the visibility
	// timeout, which may be the whole Spot notice. Work already written to
	// nodes is resumed from there, and its message recognised.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handBackTimeout)
	defer cancel()
	s.handBack(hctx)
	return err
}

// handBackTimeout bounds handing messages back on the way out.
const handBackTimeout = 5 * time.Second

// handBack makes every message still in flight visible again at once.
func (s *Source) handBack(ctx context.Context) {
	s.mu.Lock()
	var entries []types.ChangeMessageVisibilityBatchRequestEntry
	var ids []string
	for id, f := range s.inFlight {
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
	s.changeVisibility(ctx, entries, ids, "handing a message back failed")
}

// receiveLoop long-polls the queue and hands messages to the workers until
// ctx ends. Several run at once: one receive returns at most ten messages,
// and a burst of interruptions must not queue behind one poller.
func (s *Source) receiveLoop(ctx context.Context, work chan<- Message) {
	backoff := time.Second
	for ctx.Err() == nil {
		// A long poll already sent is let finish, never abandoned: SQS
		// may still hand an abandoned poll the messages that become
		// visible while it waits, including those handed back on the way
		// out, and they would stay hidden for a whole visibility timeout
		// (TestHoldReleaseAck caught it). What it receives after the stop
		// is handed back with the rest. So a stop waits up to one long poll (5 s).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), longPoll+receiveSlack)
		msgs, err := s.receive(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.o.OnReceiveError(err)
			s.log.Warn("receiving from queue failed", "error", err.Error(), "backoff", backoff)
			select {
			case <-ctx.Done():
				return
			case <-s.clock.After(backoff):
			}
			backoff = min(2*backoff, time.Minute)
			continue
		}
		backoff = time.Second
		s.o.OnReceive()
		if ctx.Err() != nil {
			return // stopped during the poll: handed back, not worked on
		}
		for _, m := range msgs {
			select {
			case work <- m:
			case <-ctx.Done():
				return
			}
		}
	}
}

func (s *Source) receive(ctx context.Context) ([]Message, error) {
	out, err := s.api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(s.o.QueueURL),
		MaxNumberOfMessages:         maxMessages,
		WaitTimeSeconds:             int32(longPoll / time.Second),
		VisibilityTimeout:           int32(s.o.Visibility / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameSentTimestamp, types.MessageSystemAttributeNameApproximateReceiveCount},
	})
	if err != nil {
		return nil, fmt.Errorf("receiving from %s: %w", s.o.QueueURL, err)
	}
	now := s.clock.Now()
	msgs := make([]Message, 0, len(out.Messages))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range out.Messages {
		msg := Message{
			Receipt: Receipt{MessageID: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle)},
			Body:    []byte(aws.ToString(m.Body)),
		}
		if ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
			msg.SentAt = time.UnixMilli(ms)
		}
		msg.ReceiveCount, _ = strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
		s.inFlight[msg.MessageID] = inFlight{handle: msg.ReceiptHandle, received: now}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// Ack deletes a message whose work is done. In dry-run nothing is deleted
// (the message only stops being extended).
func (s *Source) Ack(ctx context.Context, r Receipt) error {
	s.forget(r)
	if s.o.DryRun {
		s.log.Info("dry run: would delete message", "messageID", r.MessageID)
		return nil
	}
	_, err := s.api.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(s.o.QueueURL), ReceiptHandle: aws.String(r.ReceiptHandle)})
	if err != nil {
		return fmt.Errorf("deleting message %s: %w", r.MessageID, err)
	}
	return nil
}

// Release stops keeping a message invisible; it is received again after
// delay (0: at once; negative: when its current visibility ends).
func (s *Source) Release(ctx context.Context, r Receipt, delay time.Duration) error {
	s.forget(r)
	if delay < 0 {
		return nil
	}
	_, err := s.api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(s.o.QueueURL), ReceiptHandle: aws.String(r.ReceiptHandle), VisibilityTimeout: int32(delay / time.Second),
	})
	if err != nil {
		return fmt.Errorf("releasing message %s: %w", r.MessageID, err)
	}
	return nil
}

func (s *Source) forget(r Receipt) {
	s.mu.Lock()
	delete(s.inFlight, r.MessageID)
	s.mu.Unlock()
}

// InFlight returns the number of messages being worked on.
func (s *Source) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inFlight)
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
	s.changeVisibility(ctx, entries, ids, "extending message visibility failed")
}

// changeVisibility sends entries (ids[i] is the message of entries[i]) in
// batches of ten. A failed entry is logged with failure unless its message
// was deleted meanwhile (the source no longer holds it).
func (s *Source) changeVisibility(ctx context.Context, entries []types.ChangeMessageVisibilityBatchRequestEntry, ids []string, failure string) {
	for i := 0; i < len(entries); i += maxMessages {
		batch := entries[i:min(i+maxMessages, len(entries))]
		out, err := s.api.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(s.o.QueueURL), Entries: batch})
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				s.log.Warn(failure, "messages", len(batch), "error", err.Error())
			}
			continue
		}
		for _, f := range out.Failed {
			if !s.stillInFlight(ids, aws.ToString(f.Id)) {
				continue // deleted while the batch was on its way
			}
			s.log.Warn(failure, "code", aws.ToString(f.Code), "error", aws.ToString(f.Message))
		}
	}
}
