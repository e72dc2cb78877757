package sqs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// How long a receive's answer is waited for beyond its long poll.
const (
	// receiveSlack is the wait while the source runs. A receive given up
	// is costly: SQS may already have handed it messages, which then stay
	// hidden for a whole visibility timeout (30 s of a two-minute Spot
	// notice), and the receiver backs off. Under load answers come late
	// but they come (issue 28's 5,000-notice storm, moto on two cores:
	// 6-12 receives a run abandoned after 3 s of slack, the last node
	// cordoned 27 s after the 4,999th), so a slow answer is waited for;
	// a connection that never answers is still given up on.
	receiveSlack = 20 * time.Second
	// stopSlack is the wait once the source stops: it bounds how long a
	// stop (or a deposed leader's exit) takes, inside the chart's 30 s
	// grace period with the hand-back after it (handBackTimeout).
	stopSlack = 3 * time.Second
)

var (
	errNoAnswer         = errors.New("no answer " + (longPoll + receiveSlack).String() + " after the receive was sent")
	errNoAnswerStopping = errors.New("stopping, and no answer " + (longPoll + stopSlack).String() + " after the receive was sent")
)

// receiveContext returns the context of one receive, sent now. The end of
// ctx (the source's) does not cancel it: a long poll already sent is let
// finish (see receiveLoop). It ends longPoll+receiveSlack after the send,
// or, once ctx has ended, longPoll+stopSlack after it; its cause says
// which. Its timers run on the source's clock.
func (s *Source) receiveContext(ctx context.Context) (context.Context, context.CancelFunc) {
	rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	sent := s.clock.Now()
	slow := s.clock.AfterFunc(longPoll+receiveSlack, func() { cancel(errNoAnswer) })
	stopWatch := context.AfterFunc(ctx, func() {
		left := sent.Add(longPoll + stopSlack).Sub(s.clock.Now())
		if left <= 0 {
			cancel(errNoAnswerStopping)
			return
		}
		s.clock.AfterFunc(left, func() { cancel(errNoAnswerStopping) })
	})
	return rctx, func() {
		stopWatch()
		slow.Stop()
		cancel(nil)
	}
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
		// is handed back with the rest. So a stop waits up to one long
		// poll and stopSlack (receiveContext).
		rctx, cancel := s.receiveContext(ctx)
		msgs, err := s.receive(rctx)
		cause := context.Cause(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if cause != nil {
				err = fmt.Errorf("%w (%w)", err, cause)
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
	sent := s.clock.Now()
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
	hiddenUntil := sent.Add(s.o.Visibility.Truncate(time.Second))
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
		if f, held := s.inFlight[msg.MessageID]; held {
			// Received again while its work runs: a standard queue
			// delivers at least once (two of moto's concurrent receives
			// got the same message in issue 28's failover run, and both
			// copies were worked on and deleted), or its visibility
			// lapsed. The work is under way; only the newest receipt
			// handle is sure to delete the message, so Ack and the
			// extensions use it.
			s.log.Debug("message received again while in flight", "messageID", msg.MessageID)
			f.handle, f.hiddenUntil = msg.ReceiptHandle, hiddenUntil
			s.inFlight[msg.MessageID] = f
			continue
		}
		s.inFlight[msg.MessageID] = inFlight{handle: msg.ReceiptHandle, received: now, hiddenUntil: hiddenUntil}
		msgs = append(msgs, msg)
	}
	if len(msgs) > 0 && s.o.OnHold != nil {
		s.o.OnHold()
	}
	return msgs, nil
}
