package awssim

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/route"
)

// Exact EventBridge strings come from the route table (internal/route), the
// one place that spells them; the rest are Auto Scaling's own.
const (
	sourceAutoScaling     = route.SourceAutoScaling
	sourceEC2             = route.SourceEC2
	detailTypeLaunch      = route.LifecycleLaunch
	detailTypeTerminate   = route.LifecycleTerminate
	detailTypeStateChange = route.StateChange
	testNotificationEvent = "autoscaling:TEST_NOTIFICATION"
	serviceName           = "AWS Auto Scaling"
	// notificationTime is the Time format of direct notifications
	// (2019-09-27T02:39:14.183Z).
	notificationTime = "2006-01-02T15:04:05.000Z"
)

// lifecycleDetail is the detail of a lifecycle-action event, keys in the
// order AWS's documentation shows them.
type lifecycleDetail struct {
	LifecycleActionToken string `json:"LifecycleActionToken"`
	AutoScalingGroupName string `json:"AutoScalingGroupName"`
	LifecycleHookName    string `json:"LifecycleHookName"`
	EC2InstanceID        string `json:"EC2InstanceId"`
	LifecycleTransition  string `json:"LifecycleTransition"`
	NotificationMetadata string `json:"NotificationMetadata,omitempty"`
	Origin               string `json:"Origin"`
	Destination          string `json:"Destination"`
}

// directNotification is the body a hook sends to its SQS notification
// target: flat, no envelope (fixtures/sqs-direct).
type directNotification struct {
	Origin               string `json:"Origin"`
	LifecycleHookName    string `json:"LifecycleHookName"`
	Destination          string `json:"Destination"`
	AccountID            string `json:"AccountId"`
	RequestID            string `json:"RequestId"`
	LifecycleTransition  string `json:"LifecycleTransition"`
	AutoScalingGroupName string `json:"AutoScalingGroupName"`
	Service              string `json:"Service"`
	Time                 string `json:"Time"`
	EC2InstanceID        string `json:"EC2InstanceId"`
	LifecycleActionToken string `json:"LifecycleActionToken"`
	NotificationMetadata string `json:"NotificationMetadata,omitempty"`
}

// testNotification is autoscaling:TEST_NOTIFICATION, sent to an SQS target
// when a hook is put with it.
type testNotification struct {
	AccountID            string `json:"AccountId"`
	RequestID            string `json:"RequestId"`
	AutoScalingGroupARN  string `json:"AutoScalingGroupARN"`
	AutoScalingGroupName string `json:"AutoScalingGroupName"`
	Service              string `json:"Service"`
	Event                string `json:"Event"`
	Time                 string `json:"Time"`
}

type stateChangeDetail struct {
	InstanceID string `json:"instance-id"`
	State      string `json:"state"`
}

// announceAction publishes a new lifecycle action as AWS does: always as an
// EventBridge event on the default bus, and in addition as a direct
// notification when the hook's target is an SQS queue. (AWS emits the
// EventBridge event for every lifecycle action whatever the hook's
// notification target, so a queue fed both ways gets the action twice, with
// one token.) The messages go out through the outbox, after the operation;
// a failure is recorded for Err.
func (s *Server) announceAction(g *group, a *action) {
	detailType := detailTypeLaunch
	if a.transition == event.TransitionTerminating {
		detailType = detailTypeTerminate
	}
	now := s.clock.Now()
	detail := lifecycleDetail{
		LifecycleActionToken: a.token, AutoScalingGroupName: g.name, LifecycleHookName: a.hook.name,
		EC2InstanceID: a.inst.id, LifecycleTransition: a.transition, NotificationMetadata: a.hook.metadata,
		Origin: a.origin, Destination: a.dest,
	}
	var direct *directNotification
	if a.hook.targetARN != "" {
		direct = &directNotification{
			Origin: a.origin, LifecycleHookName: a.hook.name, Destination: a.dest,
			AccountID: s.opts.AccountID, RequestID: newUUID(), LifecycleTransition: a.transition,
			AutoScalingGroupName: g.name, Service: serviceName,
			Time:          now.UTC().Format(notificationTime),
			EC2InstanceID: a.inst.id, LifecycleActionToken: a.token, NotificationMetadata: a.hook.metadata,
		}
	}
	groupARN, targetARN := g.arn, a.hook.targetARN
	queued := time.Now() // the wall clock: moto's delay is real even with a fake Options.Clock
	a.announcing = true
	s.outbox.add(a.inst.id, func(ctx context.Context) error {
		err := s.putEvent(ctx, now, sourceAutoScaling, detailType, []string{groupARN}, detail)
		if err != nil {
			err = fmt.Errorf("announcing lifecycle action %s: %w", a.token, err)
		} else if direct != nil {
			if err = s.sendToQueue(ctx, targetARN, direct); err != nil {
				err = fmt.Errorf("notifying %s of lifecycle action %s: %w", targetARN, a.token, err)
			}
		}
		// AWS announces an action within about a second, and its timeout
		// runs from the start. When moto took longer (a burst of hundreds),
		// the action could not time out meanwhile (announcing), and the
		// whole seconds of delay are added to its deadlines, so moto's lag
		// is not counted against the consumer's first heartbeat.
		lag := time.Since(queued).Truncate(time.Second)
		s.mu.Lock()
		defer s.mu.Unlock()
		a.announcing = false
		if err == nil {
			a.announced = s.clock.Now()
		}
		if lag > 0 && a.active() {
			a.globalDeadline = a.globalDeadline.Add(lag)
			a.deadline = minTime(a.deadline.Add(lag), a.globalDeadline)
		}
		s.poke()
		return err
	})
}

func (s *Server) sendTestNotification(ctx context.Context, g *group, targetARN string) error {
	body := testNotification{
		AccountID: s.opts.AccountID, RequestID: newUUID(), AutoScalingGroupARN: g.arn,
		AutoScalingGroupName: g.name, Service: serviceName, Event: testNotificationEvent,
		Time: s.clock.Now().UTC().Format(notificationTime),
	}
	return s.sendToQueue(ctx, targetARN, body)
}

// stateChange publishes an "EC2 Instance State-change Notification" for
// each of states, in order, through the outbox.
func (s *Server) stateChange(in *instance, states ...string) {
	s.ec2Call(in, nil, states...)
}

// ec2Call queues call (an EC2 request about the instance, may be nil) and
// then the state-change events it causes. The model already holds the
// outcome; moto's EC2 follows shortly after.
func (s *Server) ec2Call(in *instance, call func(context.Context) error, states ...string) {
	now := s.clock.Now()
	id := in.id
	arn := fmt.Sprintf("arn:aws:ec2:%s:%s:instance/%s", s.opts.Region, s.opts.AccountID, id)
	s.outbox.add(id, func(ctx context.Context) error {
		if call != nil {
			if err := call(ctx); err != nil {
				return err
			}
		}
		for _, state := range states {
			if err := s.putEvent(ctx, now, sourceEC2, detailTypeStateChange, []string{arn}, stateChangeDetail{InstanceID: id, State: state}); err != nil {
				return fmt.Errorf("announcing state %s of %s: %w", state, id, err)
			}
		}
		return nil
	})
}

func (s *Server) putEvent(ctx context.Context, at time.Time, source, detailType string, resources []string, detail any) error {
	b, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("encoding event detail: %w", err)
	}
	out, err := s.events.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		Source: aws.String(source), DetailType: aws.String(detailType), Detail: aws.String(string(b)),
		Resources: resources, Time: aws.Time(at),
	}}})
	if err != nil {
		return fmt.Errorf("putting %q event: %w", detailType, err)
	}
	if out.FailedEntryCount > 0 {
		e := out.Entries[0]
		return fmt.Errorf("putting %q event: %s: %s", detailType, aws.ToString(e.ErrorCode), aws.ToString(e.ErrorMessage))
	}
	return nil
}

func (s *Server) sendToQueue(ctx context.Context, queueARN string, body any) error {
	url, err := s.queueURL(ctx, queueARN)
	if err != nil {
		return err
	}
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encoding notification: %w", err)
	}
	if _, err := s.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(string(b))}); err != nil {
		return fmt.Errorf("sending to %s: %w", queueARN, err)
	}
	return nil
}

func (s *Server) queueURL(ctx context.Context, queueARN string) (string, error) {
	s.urlMu.Lock()
	url, ok := s.queueURLs[queueARN]
	s.urlMu.Unlock()
	if ok {
		return url, nil
	}
	account, name, ok := parseQueueARN(queueARN)
	if !ok {
		return "", fmt.Errorf("%q is not an SQS queue ARN", queueARN)
	}
	out, err := s.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name), QueueOwnerAWSAccountId: aws.String(account)})
	if err != nil {
		return "", fmt.Errorf("resolving queue %s: %w", queueARN, err)
	}
	url = aws.ToString(out.QueueUrl)
	s.urlMu.Lock()
	s.queueURLs[queueARN] = url
	s.urlMu.Unlock()
	return url, nil
}

// parseQueueARN splits arn:aws:sqs:REGION:ACCOUNT:NAME.
func parseQueueARN(arn string) (account, name string, ok bool) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[4] == "" || parts[5] == "" {
		return "", "", false
	}
	return parts[4], parts[5], true
}

// targetService returns the service of a notification target ARN ("sqs",
// "sns", …) or "".
func targetService(arn string) string {
	parts := strings.Split(arn, ":")
	if len(parts) < 6 || parts[0] != "arn" {
		return ""
	}
	return parts[2]
}
