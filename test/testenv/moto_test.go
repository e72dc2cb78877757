package testenv

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// TestMotoReceiptHandlesAsMoto holds motoserver.py's receipt-handle
// lookups (its patch 4) against moto as is: the same calls, with current,
// old, deleted and unknown handles, get the same answers from both.
func TestMotoReceiptHandlesAsMoto(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 (the testbed's, for moto) is not on PATH: %v", err)
	}
	patched := StartMoto(t, t.TempDir())
	plain, err := startMotoCommand(t.TempDir(), nil, py, []string{"-c", "from moto.server import main; main()"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.Proc.Stop)
	got, want := receiptCalls(t, patched.Endpoint), receiptCalls(t, plain.Endpoint)
	if !slices.Equal(got, want) {
		t.Errorf("motoserver.py answered\n  %s\nmoto as is\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	// Both could be wrong alike: the answers are SQS's.
	for _, line := range []string{
		"received 3",
		"received again 3",
		"extend with the old handle: ok",
		"extend with the current handle: ok",
		"delete with the old handle: ok",
		"delete again: ok",
		"extend after the delete: ReceiptHandleIsInvalid",
		"batch of a held handle and an unknown one: 1 ok, 1 failed",
		"unknown handle: ReceiptHandleIsInvalid",
		"left: 0 visible, 0 not visible",
	} {
		if !slices.Contains(want, line) {
			t.Errorf("moto as is did not answer %q: %q", line, want)
		}
	}
}

// receiptCalls runs the same SQS calls against endpoint and says what each
// answered.
func receiptCalls(t *testing.T, endpoint string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := sqs.NewFromConfig(MotoAWSConfig(), func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("handles")})
	if err != nil {
		t.Fatal(err)
	}
	url := q.QueueUrl
	for i := range 3 {
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	var log []string
	say := func(what string, err error) {
		var api smithy.APIError
		switch {
		case err == nil:
			log = append(log, what+": ok")
		case errors.As(err, &api):
			log = append(log, what+": "+strings.TrimPrefix(api.ErrorCode(), "AWS.SimpleQueueService."))
		default:
			t.Fatalf("%s: %v", what, err)
		}
	}
	receive := func(visibility int32) map[string]string { // body -> handle
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url, MaxNumberOfMessages: 10, VisibilityTimeout: visibility})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, msg := range out.Messages {
			m[aws.ToString(msg.Body)] = aws.ToString(msg.ReceiptHandle)
		}
		return m
	}
	extend := func(handle string, seconds int32) error {
		_, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: url, ReceiptHandle: aws.String(handle), VisibilityTimeout: seconds})
		return err
	}
	del := func(handle string) error {
		_, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: url, ReceiptHandle: aws.String(handle)})
		return err
	}

	first := receive(60)
	log = append(log, fmt.Sprintf("received %d", len(first)))
	for _, body := range []string{"0", "1", "2"} { // handed back: the next receive hands out new handles
		say("hand back "+body, extend(first[body], 0))
	}
	second := receive(60)
	log = append(log, fmt.Sprintf("received again %d", len(second)))
	say("extend with the old handle", extend(first["0"], 60))
	say("extend with the current handle", extend(second["0"], 60))
	say("delete with the old handle", del(first["0"]))
	say("delete again", del(second["0"]))
	say("extend after the delete", extend(second["0"], 60))
	out, err := c.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: url, Entries: []sqstypes.ChangeMessageVisibilityBatchRequestEntry{
		{Id: aws.String("held"), ReceiptHandle: aws.String(second["1"]), VisibilityTimeout: 60},
		{Id: aws.String("unknown"), ReceiptHandle: aws.String("not-a-handle"), VisibilityTimeout: 60},
	}})
	if err != nil {
		t.Fatal(err)
	}
	log = append(log, fmt.Sprintf("batch of a held handle and an unknown one: %d ok, %d failed", len(out.Successful), len(out.Failed)))
	say("unknown handle", extend("not-a-handle", 60))
	say("hand back with the current handle", extend(second["2"], 0))
	third := receive(60)
	log = append(log, fmt.Sprintf("received after the hand-back %d", len(third)))
	say("delete 1", del(second["1"]))
	say("delete 2 with its first handle", del(first["2"]))
	say("delete 2 with its third", del(third["2"]))
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	log = append(log, fmt.Sprintf("left: %s visible, %s not visible",
		attrs.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)],
		attrs.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)]))
	return log
}
