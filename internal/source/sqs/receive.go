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

// receiveSlack is how long a receive's answer is waited for beyond its
// long poll. A receive given up on may already have been handed messages,
// which then stay hidden for a whole visibility timeout; but an answer
// that late rarely comes: in issue 28's 5,000-notice storms (moto on two
// cores) 0-9 receives a run went unanswered for 8 s, and with a 25 s wait
// 1-4 a run still went unanswered for all of it, their receivers idle
// (docs/benchmarks.md, session 25). The slack also bounds how long a stop
// waits for the receives in flight (see receiveLoop), inside the chart's
// 30 s grace period with the hand-back after it (handBackTimeout).
const receiveSlack = 3 * time.Second

var errNoAnswer = errors.New("no answer " + (longPoll + receiveSlack).String() + " after the receive was sent")

// receiveContext returns the context of one receive, sent now. The end of
// ctx (the source's) does not cancel it: a long poll already sent is let
// finish (see receiveLoop). It ends longPoll+receiveSlack after the send,
// on the source's clock, with errNoAnswer as its cause.
func (s *Source) receiveContext(ctx context.Context) (context.Context, context.CancelFunc) {
	rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	slow := s.clock.AfterFunc(longPoll+receiveSlack, func() { cancel(errNoAnswer) })
	return rctx, func() {
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
		// poll and receiveSlack (receiveContext).
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
