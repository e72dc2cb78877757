// Package sqs is the queue-mode event source: it long-polls an SQS queue,
// hands each message to a bounded pool of workers, keeps messages whose work
// is in progress invisible, and deletes a message only when told its work is
// done.
//
// It owns every SQS call. It must not parse messages or touch Kubernetes.
package sqs

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
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

// HandBackAPI is the call that hands messages back to the queue.
type HandBackAPI interface {
	ChangeMessageVisibilityBatch(context.Context, *sqs.ChangeMessageVisibilityBatchInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// SQS limits.
const (
	maxMessages = 10
	// longPoll is a receive's wait. A stop lets the polls in flight finish
	// (see receiveLoop), so it also bounds how long a stop (or a deposed
	// leader's exit) takes; 5 s instead of SQS's 20 s costs four times the
	// idle receives (4 receivers: ~2 million requests, ~0.8 USD a month).
	longPoll      = 5 * time.Second
	maxVisibility = 12 * time.Hour
	// DefaultVisibility is a received message's visibility when Options
	// leave it unset (--visibility-timeout's default). The message's work
	// may take longer: its visibility is extended every third of it while
	// the work runs (extendLoop). So it bounds only how long the messages
	// of a consumer that died (SIGKILL, a lost node) stay hidden from the
	// next leader; 2 min, the whole Spot notice, made a killed leader's
	// nodes wait it out (issue 28 item 6).
	DefaultVisibility = 30 * time.Second
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
	// OnHold, if set, is told when a receive added messages to those the
	// source holds (the failover journal writes them soon). It must not
	// block.
	OnHold func()
	// HandBack, if set, is the client that hands the messages still in
	// flight back when Run stops (nil: the source's own). Making a message
	// visible again cannot act on anything, so queue mode sends it past
	// the leader fence: a replica that lost the Lease still gives back
	// what it holds, and the next leader need not wait out the
	// visibility timeout. Only messages whose visibility this source
	// knows has not lapsed are handed back (see inFlight.hiddenUntil).
	HandBack HandBackAPI
	// KeepOnHandBack, if set, names the messages (by receipt handle) the
	// source keeps when it stops instead of handing them back: queue mode
	// keeps those of the failover journal when this replica may no longer
	// lead, because the next leader makes them visible itself, and may
	// already be working on them.
	KeepOnHandBack func(handle string) bool
}

// Source is the SQS event source.
type Source struct {
	api   sqsAPI
	clock clock.WithTickerAndDelayedExecution
	log   *slog.Logger
	o     Options

	mu       sync.Mutex
	inFlight map[string]inFlight // by MessageID

	// extending is held (written) while a round of extensions is on its
	// way; releases read-hold it, so they wait for a round but not for
	// each other. A round takes its receipt handles first and sends them
	// after: a message released in between was hidden again for the whole
	// visibility timeout by the round's change landing after the release's
	// (CI's TestTwoClustersOneQueue: a message handed back for its owner
	// stayed hidden 30 s).
	extending sync.RWMutex
}

type inFlight struct {
	handle   string
	received time.Time
	// hiddenUntil is when the message's visibility ends at the latest, as
	// far as this source knows: the send time of the receive or of the
	// last successful extension plus the visibility it asked for. Until
	// then no other consumer can have received the message, so its handle
	// is the current one and handing it back is safe. After it (this
	// process was paused, or its extensions failed) another consumer may
	// hold the message: handing it back would show it to a third one.
	hiddenUntil time.Time
}

// New returns a Source.
func New(api sqsAPI, clk clock.WithTickerAndDelayedExecution, log *slog.Logger, o Options) *Source {
	if o.Workers < 1 {
		o.Workers = 10
	}
	if o.Receivers < 1 {
		o.Receivers = 4
	}
	if o.Visibility <= 0 {
		o.Visibility = DefaultVisibility
	}
	if o.OnReceiveError == nil {
		o.OnReceiveError = func(error) {}
	}
	if o.OnReceive == nil {
		o.OnReceive = func() {}
	}
	if o.HandBack == nil {
		o.HandBack = api
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
	// The messages held stay hidden until they are handed back: on a stop
	// the extensions go on while the last long polls are answered (with a
	// 10 s visibility timeout a message could otherwise come back by
	// itself meanwhile, to another cluster's consumer).
	holdCtx, stopHolding := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHolding()
	g.Go(func() error { s.extendLoop(holdCtx); return nil })
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
		stopHolding()
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

// Ack deletes a message whose work is done, with its newest receipt
// handle. In dry-run nothing is deleted (the message only stops being
// extended).
func (s *Source) Ack(ctx context.Context, r Receipt) error {
	handle := s.forget(r)
	if s.o.DryRun {
		s.log.Info("dry run: would delete message", "messageID", r.MessageID)
		return nil
	}
	_, err := s.api.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(s.o.QueueURL), ReceiptHandle: aws.String(handle)})
	if err != nil {
		return fmt.Errorf("deleting message %s: %w", r.MessageID, err)
	}
	return nil
}

// Release stops keeping a message invisible; it is received again after
// delay (0: at once; negative: when its current visibility ends, which a
// round of extensions already on its way may push out once more). A
// release waits for such a round, so its own change lands last.
func (s *Source) Release(ctx context.Context, r Receipt, delay time.Duration) error {
	handle := s.forget(r)
	if delay < 0 {
		return nil
	}
	s.extending.RLock()
	defer s.extending.RUnlock()
	_, err := s.api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(s.o.QueueURL), ReceiptHandle: aws.String(handle), VisibilityTimeout: int32(delay / time.Second),
	})
	if err != nil {
		return fmt.Errorf("releasing message %s: %w", r.MessageID, err)
	}
	return nil
}

// forget stops holding r's message and returns its newest receipt handle
// (r's own if the source no longer holds it).
func (s *Source) forget(r Receipt) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	handle := r.ReceiptHandle
	if f, held := s.inFlight[r.MessageID]; held {
		handle = f.handle
	}
	delete(s.inFlight, r.MessageID)
	return handle
}

// Held is a message the source holds: plain data for the failover journal.
type Held struct {
	MessageID string
	Handle    string // the newest receipt handle
	// HiddenUntil is when its visibility ends at the latest, as far as
	// the source knows (inFlight.hiddenUntil).
	HiddenUntil time.Time
}

// Held returns the messages being worked on.
func (s *Source) Held() []Held {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Held, 0, len(s.inFlight))
	for id, f := range s.inFlight {
		out = append(out, Held{MessageID: id, Handle: f.handle, HiddenUntil: f.hiddenUntil})
	}
	return out
}

// InFlight returns the number of messages being worked on.
func (s *Source) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inFlight)
}
