package message

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/route"
)

// spotBody is an EventBridge Spot interruption with the given instance-id
// JSON value and envelope fields.
func spotBody(envelopeFields, instanceIDJSON string) string {
	return `{` + envelopeFields + `"detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2",
		"detail": {"instance-id": ` + instanceIDJSON + `, "instance-action": "terminate"}}`
}

func spotEvent(instance, tm, account string) event.Event {
	t := at(tm)
	return event.Event{
		ID:   event.ID(event.SpotInterruption, instance, "terminate", stamp(t.Add(2*time.Minute))),
		Kind: event.SpotInterruption, Source: event.SourceSQS, InstanceID: instance, Action: "terminate",
		Time: t, Deadline: t.Add(2 * time.Minute), Account: account,
	}
}

// healthBody is an AWS Health EC2 event.
func healthBody(category, status, startTime, entities, resources string) string {
	return `{"version": "0", "id": "e1", "detail-type": "AWS Health Event", "source": "aws.health",
		"account": "123456789012", "time": "2024-05-01T10:00:00Z", "region": "eu-west-1", "resources": ` + resources + `,
		"detail": {"eventArn": "arn:aws:health:eu-west-1::event/EC2/AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED/x1",
		"service": "EC2", "eventTypeCode": "AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED", "eventTypeCategory": "` + category + `",
		"statusCode": "` + status + `", "page": "1", "totalPages": "2", "startTime": "` + startTime + `", "affectedEntities": ` + entities + `}}`
}

const rebootArn = "arn:aws:health:eu-west-1::event/EC2/AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED/x1"

func scheduled(kind event.Kind, instance string, deadline time.Time) event.Event {
	return event.Event{
		ID: event.ID(kind, instance, rebootArn), Kind: kind, Source: event.SourceSQS, InstanceID: instance,
		Action: "AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED", Time: at("2024-05-01T10:00:00Z"), Deadline: deadline,
		Region: "eu-west-1", Account: "123456789012",
	}
}

func TestParseLiberal(t *testing.T) {
	const inst = "i-0123456789abcdef0"
	tests := []struct {
		name string
		body string
		want Result
	}{
		{
			name: "no version, no id",
			body: spotBody(`"time": "2024-01-02T03:04:05Z", "account": "123456789012",`, `"i-0123456789abcdef0"`),
			want: events(FormatEventBridge, spotEvent(inst, "2024-01-02T03:04:05Z", "123456789012")),
		},
		{
			name: "instance ID as an ARN",
			body: spotBody(`"time": "2024-01-02T03:04:05Z",`, `"arn:aws:ec2:us-east-2a:instance/i-0123456789abcdef0"`),
			want: events(FormatEventBridge, spotEvent(inst, "2024-01-02T03:04:05Z", "")),
		},
		{
			name: "instance ID with stray white space",
			body: spotBody(`"time": "2024-01-02T03:04:05Z",`, `"\t i-0123456789abcdef0\n"`),
			want: events(FormatEventBridge, spotEvent(inst, "2024-01-02T03:04:05Z", "")),
		},
		{
			name: "account as a number",
			body: spotBody(`"time": "2024-01-02T03:04:05Z", "account": 123456789012,`, `"i-0123456789abcdef0"`),
			want: events(FormatEventBridge, spotEvent(inst, "2024-01-02T03:04:05Z", "123456789012")),
		},
		{
			name: "fractional seconds",
			body: spotBody(`"time": "2024-01-02T03:04:05.250Z",`, `"i-0123456789abcdef0"`),
			want: events(FormatEventBridge, spotEvent(inst, "2024-01-02T03:04:05.25Z", "")),
		},
		{
			name: "unknown version and unknown keys",
			body: spotBody(`"version": "7", "time": "2024-01-02T03:04:05Z", "new-key": {"a": [1, 2]},`, `"i-0123456789abcdef0"`),
			want: events(FormatEventBridge, spotEvent(inst, "2024-01-02T03:04:05Z", "")),
		},
		{
			name: "detail-type from another source is not acted on",
			body: `{"detail-type": "EC2 Spot Instance Interruption Warning", "source": "my.app", "detail": {"instance-id": "i-0123456789abcdef0"}}`,
			want: ignoredResult(FormatEventBridge, IgnoredUnhandledDetailType),
		},
		{
			name: "detail-type is exact: the F3 typo is not a Spot warning",
			body: `{"detail-type": "EC2 Spot Interruption Warning", "source": "aws.ec2", "detail": {"instance-id": "i-0123456789abcdef0"}}`,
			want: ignoredResult(FormatEventBridge, IgnoredUnhandledDetailType),
		},
		{
			name: "AWS Health Abuse Event",
			body: `{"detail-type": "AWS Health Abuse Event", "source": "aws.health", "detail": {}}`,
			want: ignoredResult(FormatEventBridge, IgnoredUnhandledDetailType),
		},
		{
			name: "state running",
			body: `{"detail-type": "EC2 Instance State-change Notification", "source": "aws.ec2", "detail": {"instance-id": "i-0123456789abcdef0", "state": "running"}}`,
			want: ignoredResult(FormatEventBridge, IgnoredStateNotTerminal),
		},
		{
			name: "state that only a substring test would match",
			body: `{"detail-type": "EC2 Instance State-change Notification", "source": "aws.ec2", "detail": {"instance-id": "i-0123456789abcdef0", "state": "stop"}}`,
			want: ignoredResult(FormatEventBridge, IgnoredStateNotTerminal),
		},
		{
			name: "state with envelope id but no time: the id discriminates",
			body: `{"id": "abc", "detail-type": "EC2 Instance State-change Notification", "source": "aws.ec2", "detail": {"instance-id": "i-0123456789abcdef0", "state": "Stopped "}}`,
			want: events(FormatEventBridge, event.Event{
				ID:   event.ID(event.StateChange, inst, "stopped", "abc"),
				Kind: event.StateChange, InstanceID: inst, Action: "stopped",
			}),
		},
		{
			name: "health: one-digit day, string page numbers, entity ARN and bare ID, resources duplicate",
			body: `{"detail-type": "AWS Health Event", "source": "aws.health", "time": "2022-06-01T00:00:00Z",
				"resources": ["i-0123456789abcdef0", "vol-0123456789abcdef0"],
				"detail": {"eventArn": "arn:x", "service": "EC2", "eventTypeCategory": "scheduledChange",
				"eventTypeCode": "AWS_EC2_INSTANCE_NETWORK_MAINTENANCE_SCHEDULED", "startTime": "Fri, 3 Jun 2022 05:01:10 GMT",
				"page": "1", "totalPages": "2", "backupEvent": "false",
				"affectedEntities": [{"entityValue": "arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0"}, {"entityValue": "i-abcd1111"}, {"entityValue": "h-0123456789abcdef0"}]}}`,
			want: events(FormatEventBridge,
				event.Event{
					ID: event.ID(event.ScheduledChange, inst, "arn:x"), Kind: event.ScheduledChange, InstanceID: inst,
					Action: "AWS_EC2_INSTANCE_NETWORK_MAINTENANCE_SCHEDULED", Time: at("2022-06-01T00:00:00Z"), Deadline: at("2022-06-03T05:01:10Z"),
				},
				event.Event{
					ID: event.ID(event.ScheduledChange, "i-abcd1111", "arn:x"), Kind: event.ScheduledChange, InstanceID: "i-abcd1111",
					Action: "AWS_EC2_INSTANCE_NETWORK_MAINTENANCE_SCHEDULED", Time: at("2022-06-01T00:00:00Z"), Deadline: at("2022-06-03T05:01:10Z"),
				},
			),
		},
		{
			name: "health: numbers as numbers, resources as a string, region and account of the affected instance",
			body: `{"detail-type": "AWS Health Event", "source": "aws.health", "region": "us-west-2", "account": "111111111111", "resources": "i-abcd1111",
				"detail": {"eventArn": "arn:y", "service": "EC2", "eventTypeCategory": "scheduledChange", "page": 1, "totalPages": 1, "backupEvent": true,
				"eventRegion": "us-east-1", "affectedAccount": "222222222222", "startTime": "2022-06-03T05:01:10Z"}}`,
			want: events(FormatEventBridge, event.Event{
				ID: event.ID(event.ScheduledChange, "i-abcd1111", "arn:y"), Kind: event.ScheduledChange, InstanceID: "i-abcd1111",
				Deadline: at("2022-06-03T05:01:10Z"), Region: "us-east-1", Account: "222222222222",
			}),
		},
		{
			name: "health: EC2 scheduled change for a dedicated host only",
			body: `{"detail-type": "AWS Health Event", "source": "aws.health", "resources": ["h-0123456789abcdef0"],
				"detail": {"service": "EC2", "eventTypeCategory": "scheduledChange", "affectedEntities": [{"entityValue": "h-0123456789abcdef0"}]}}`,
			want: ignoredResult(FormatEventBridge, IgnoredHealthNoInstances),
		},
		{
			name: "health: affectedEntities of the wrong type are skipped, resources still count",
			body: `{"detail-type": "AWS Health Event", "source": "aws.health", "resources": ["i-abcd1111"],
				"detail": {"service": "EC2", "eventTypeCategory": "scheduledChange", "affectedEntities": {"entityValue": "i-abcd2222"}}}`,
			want: events(FormatEventBridge, event.Event{
				ID: event.ID(event.ScheduledChange, "i-abcd1111", "", ""), Kind: event.ScheduledChange, InstanceID: "i-abcd1111",
			}),
		},
		{
			name: "capacity reservation without instance-termination-time: two minutes after the warning",
			body: `{"detail-type": "EC2 Capacity Reservation Instance Interruption Warning", "source": "aws.ec2", "time": "2025-06-01T12:00:00Z",
				"detail": {"instance-id": "i-0123456789abcdef0", "instance-action": "terminate"}}`,
			want: events(FormatEventBridge, event.Event{
				ID:   event.ID(event.CapacityReservationInterruption, inst, "terminate", "2025-06-01T12:02:00Z"),
				Kind: event.CapacityReservationInterruption, InstanceID: inst, Action: "terminate",
				Time: at("2025-06-01T12:00:00Z"), Deadline: at("2025-06-01T12:02:00Z"),
			}),
		},
		{
			name: "unknown Spot action: still an interruption, action unknown",
			body: `{"detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2", "time": "2024-01-02T03:04:05Z",
				"detail": {"instance-id": "i-0123456789abcdef0", "instance-action": "evaporate"}}`,
			want: events(FormatEventBridge, event.Event{
				ID:   event.ID(event.SpotInterruption, inst, "", "2024-01-02T03:06:05Z"),
				Kind: event.SpotInterruption, InstanceID: inst,
				Time: at("2024-01-02T03:04:05Z"), Deadline: at("2024-01-02T03:06:05Z"),
			}),
		},
		{
			name: "EventBridge lifecycle action without LifecycleTransition: the detail-type decides",
			body: `{"id": "env-1", "detail-type": "EC2 Instance-launch Lifecycle Action", "source": "aws.autoscaling",
				"detail": {"EC2InstanceId": "i-0123456789abcdef0", "AutoScalingGroupName": "g", "LifecycleHookName": "h"}}`,
			want: events(FormatEventBridge, lifecycleEvent(event.LifecycleLaunch, inst, time.Time{}, "", "",
				event.LifecycleAction{GroupName: "g", HookName: "h", Transition: event.TransitionLaunching}, "env-1")),
		},
		{
			name: "EventBridge terminate action with an empty LifecycleTransition and a time but no id",
			body: `{"time": "2024-01-02T03:04:05Z", "detail-type": "EC2 Instance-terminate Lifecycle Action", "source": "aws.autoscaling",
				"detail": {"EC2InstanceId": "i-0123456789abcdef0", "LifecycleTransition": " "}}`,
			want: events(FormatEventBridge, lifecycleEvent(event.LifecycleTerminate, inst, at("2024-01-02T03:04:05Z"), "", "",
				event.LifecycleAction{Transition: event.TransitionTerminating}, "2024-01-02T03:04:05Z")),
		},
		{
			name: "EventBridge-shaped TEST_NOTIFICATION (as in NTH's tests)",
			body: `{"detail-type": "EC2 Instance-terminate Lifecycle Action", "source": "aws.autoscaling",
				"detail": {"LifecycleTransition": "autoscaling:TEST_NOTIFICATION", "AutoScalingGroupName": "g"}}`,
			want: ignoredResult(FormatEventBridge, IgnoredTestNotification),
		},
		{
			name: "direct notification without a token: the RequestId discriminates; metadata JSON kept as text",
			body: `{"LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING", "EC2InstanceId": "i-0123456789abcdef0", "RequestId": "r-1",
				"AutoScalingGroupName": "g", "LifecycleHookName": "h", "NotificationMetadata": {"drain": true},
				"AutoScalingGroupARN": "arn:aws:autoscaling:ap-south-1:123456789012:autoScalingGroup:x:autoScalingGroupName/g"}`,
			want: events(FormatAutoScaling, lifecycleEvent(event.LifecycleTerminate, inst, time.Time{}, "ap-south-1", "",
				event.LifecycleAction{GroupName: "g", HookName: "h", Transition: event.TransitionTerminating, Metadata: `{"drain": true}`}, "r-1")),
		},
		{
			name: "direct notification with LifecycleTransition TEST_NOTIFICATION",
			body: `{"LifecycleTransition": "autoscaling:TEST_NOTIFICATION", "AutoScalingGroupName": "g"}`,
			want: ignoredResult(FormatAutoScaling, IgnoredTestNotification),
		},
		{
			name: "Auto Scaling scaling notification (not a lifecycle action)",
			body: `{"Service": "AWS Auto Scaling", "Event": "autoscaling:EC2_INSTANCE_TERMINATE", "EC2InstanceId": "i-0123456789abcdef0", "AutoScalingGroupName": "g"}`,
			want: ignoredResult(FormatAutoScaling, IgnoredUnhandledNotification),
		},
		{
			name: "direct notification with an unknown transition",
			body: `{"LifecycleTransition": "autoscaling:EC2_INSTANCE_REBOOTING", "EC2InstanceId": "i-0123456789abcdef0"}`,
			want: ignoredResult(FormatAutoScaling, IgnoredLifecycleTransitionUnknown),
		},
		{
			name: "SNS subscription confirmation",
			body: `{"Type": "SubscriptionConfirmation", "MessageId": "m", "Token": "t", "TopicArn": "arn:aws:sns:us-east-1:1:t", "Message": "You have chosen to subscribe"}`,
			want: ignoredResult(FormatSNS, IgnoredUnknownFormat),
		},
		{
			name: "SNS inside SNS is not unwrapped twice",
			body: `{"Type": "Notification", "TopicArn": "arn:aws:sns:us-east-1:1:t", "Message": "{\"Type\":\"Notification\",\"TopicArn\":\"arn:aws:sns:us-east-1:1:u\",\"Message\":\"{}\"}"}`,
			want: ignoredResult(FormatSNS, IgnoredUnknownFormat),
		},
		{
			name: "empty object",
			body: `{}`,
			want: ignoredResult("", IgnoredUnknownFormat),
		},
		{
			name: "SQS ReceiveMessage response given as a body",
			body: `{"Messages": [{"Body": "{}"}]}`,
			want: ignoredResult("", IgnoredUnknownFormat),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.body))
			if err != nil {
				t.Fatalf("Parse() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got, resultOptions...); diff != "" {
				t.Errorf("Parse() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseMalformed(t *testing.T) {
	valid, err := readFixture("eventbridge/spot-interruption/aws-doc-current.spot-interruption-warning-terminate.filled.json")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		body       []byte
		wantReason string
		wantFormat string
	}{
		{"one byte over the limit", append(bytes.Repeat([]byte(" "), MaxBodySize-1), "{}"...), MalformedTooLarge, ""},
		{"empty", nil, MalformedInvalidJSON, ""},
		{"white space", []byte(" \n\t"), MalformedInvalidJSON, ""},
		{"null", []byte("null"), MalformedInvalidJSON, ""},
		{"array", []byte(`[{"detail-type": "x"}]`), MalformedInvalidJSON, ""},
		{"string", []byte(`"{}"`), MalformedInvalidJSON, ""},
		{"truncated", valid[:len(valid)/2], MalformedInvalidJSON, ""},
		{"trailing garbage", append(bytes.Clone(valid), "}"...), MalformedInvalidJSON, ""},
		{"not UTF-8 outside strings", []byte("{\xff}"), MalformedInvalidJSON, ""},
		{"SNS message is truncated JSON", []byte(`{"Type": "Notification", "TopicArn": "arn:aws:sns:us-east-1:1:t", "Message": "{\"LifecycleTransition\":"}`), MalformedInvalidJSON, FormatSNS},
		{"SNS message is empty", []byte(`{"Type": "Notification", "MessageId": "m", "Message": ""}`), MalformedInvalidJSON, FormatSNS},
		{
			"Spot without detail",
			[]byte(`{"detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2"}`),
			MalformedMissingInstanceID, FormatEventBridge,
		},
		{
			"Spot with detail of the wrong type",
			[]byte(`{"detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2", "detail": "i-0123456789abcdef0"}`),
			MalformedMissingInstanceID, FormatEventBridge,
		},
		{
			"rebalance with a volume ID",
			[]byte(`{"detail-type": "EC2 Instance Rebalance Recommendation", "source": "aws.ec2", "detail": {"instance-id": "vol-0123456789abcdef0"}}`),
			MalformedInvalidInstanceID, FormatEventBridge,
		},
		{
			"state change with upper-case hex",
			[]byte(`{"detail-type": "EC2 Instance State-change Notification", "source": "aws.ec2", "detail": {"instance-id": "i-0123456789ABCDEF0", "state": "terminated"}}`),
			MalformedInvalidInstanceID, FormatEventBridge,
		},
		{
			"capacity reservation with an object for the instance",
			[]byte(`{"detail-type": "EC2 Capacity Reservation Instance Interruption Warning", "source": "aws.ec2", "detail": {"instance-id": {"id": "i-0123456789abcdef0"}}}`),
			MalformedInvalidInstanceID, FormatEventBridge,
		},
		{
			"EventBridge lifecycle action without an instance",
			[]byte(`{"detail-type": "EC2 Instance-terminate Lifecycle Action", "source": "aws.autoscaling", "detail": {"LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING"}}`),
			MalformedMissingInstanceID, FormatEventBridge,
		},
		{
			"SNS-wrapped lifecycle action with an invalid instance",
			[]byte(`{"Type": "Notification", "Message": "{\"LifecycleTransition\":\"autoscaling:EC2_INSTANCE_LAUNCHING\",\"EC2InstanceId\":\"i-xyz\"}"}`),
			MalformedInvalidInstanceID, FormatSNS,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.body)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse() error = %v, want ErrMalformed", err)
			}
			if r := Reason(err); r != tt.wantReason {
				t.Errorf("Reason() = %q (%v), want %q", r, err, tt.wantReason)
			}
			want := Result{Format: tt.wantFormat}
			if diff := cmp.Diff(want, got, resultOptions...); diff != "" {
				t.Errorf("Parse() result mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseSizeLimit(t *testing.T) {
	// A body of exactly MaxBodySize bytes is parsed; one more is too large.
	body := append(bytes.Repeat([]byte(" "), MaxBodySize-2), "{}"...)
	if res, err := Parse(body); err != nil || res.Ignored != IgnoredUnknownFormat {
		t.Errorf("Parse(%d bytes) = %v, %v; want ignored unknown-format", len(body), res, err)
	}
	if _, err := Parse(append(body, ' ')); Reason(err) != MalformedTooLarge {
		t.Errorf("Parse(%d bytes) error = %v, want %s", len(body)+1, err, MalformedTooLarge)
	}
}

// readFixture reads one file of testdata/.
func readFixture(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(testdata, filepath.FromSlash(name)))
}

// reencode returns body re-serialised: keys sorted, white space changed.
// It returns false when body is not a JSON object.
func reencode(body []byte) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	out, err := json.MarshalIndent(v, "", "   ")
	if err != nil {
		return nil, false
	}
	return out, true
}

// TestRedeliveryIsIdentical: a redelivered message, or an EventBridge
// duplicate (same event, same envelope id, possibly serialised
// differently), yields identical events with identical IDs.
func TestRedeliveryIsIdentical(t *testing.T) {
	for _, f := range loadFixtures(t) {
		t.Run(f.name, func(t *testing.T) {
			first, err1 := Parse(f.body)
			again, err2 := Parse(bytes.Clone(f.body))
			if Reason(err1) != Reason(err2) {
				t.Fatalf("errors differ: %v, %v", err1, err2)
			}
			if diff := cmp.Diff(first, again, resultOptions...); diff != "" {
				t.Errorf("redelivery differs (-first +again):\n%s", diff)
			}
			other, ok := reencode(f.body)
			if !ok {
				return
			}
			dup, err3 := Parse(other)
			if Reason(err1) != Reason(err3) {
				t.Fatalf("errors differ: %v, %v", err1, err3)
			}
			if diff := cmp.Diff(first, dup, resultOptions...); diff != "" {
				t.Errorf("re-serialised duplicate differs (-first +dup):\n%s", diff)
			}
		})
	}
}

// snsEnvelope wraps message the way SNS delivers it to SQS with raw
// delivery off.
func snsEnvelope(message []byte) []byte {
	env := map[string]string{
		"Type":             "Notification",
		"MessageId":        "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
		"TopicArn":         "arn:aws:sns:eu-central-1:123456789012:lifeboat",
		"Message":          string(message),
		"Timestamp":        "2024-03-23T03:26:43.936Z",
		"SignatureVersion": "1",
		"Signature":        "EXAMPLE",
		"SigningCertURL":   "https://sns.eu-central-1.amazonaws.com/x.pem",
		"UnsubscribeURL":   "https://sns.eu-central-1.amazonaws.com/?Action=Unsubscribe",
	}
	out, err := json.Marshal(env)
	if err != nil {
		panic(err)
	}
	return out
}

// TestSNSWrapsEverything: every EventBridge event and every direct
// notification means the same when SNS wraps it. Only the format changes,
// and an event without a region takes the topic's.
func TestSNSWrapsEverything(t *testing.T) {
	for _, f := range loadFixtures(t) {
		if !strings.HasPrefix(f.name, "eventbridge/") && !strings.HasPrefix(f.name, "sqs-direct/") {
			continue
		}
		t.Run(f.name, func(t *testing.T) {
			direct, errDirect := Parse(f.body)
			wrapped, errWrapped := Parse(snsEnvelope(f.body))
			if Reason(errDirect) != Reason(errWrapped) {
				t.Fatalf("error reasons differ: direct %v, wrapped %v", errDirect, errWrapped)
			}
			want := direct
			want.Format = FormatSNS
			for i := range want.Events {
				if want.Events[i].Region == "" {
					want.Events[i].Region = "eu-central-1"
				}
			}
			if diff := cmp.Diff(want, wrapped, resultOptions...); diff != "" {
				t.Errorf("SNS-wrapped result differs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHealthPagination: AWS Health splits an event with many entities into
// pages with the same eventArn. Each page yields its own instances; the
// per-instance IDs depend on eventArn and instance only, so pages (and the
// backup copy of a page, from another region) combine per instance.
func TestHealthPagination(t *testing.T) {
	const start = "Wed, 5 Jun 2024 07:00:00 GMT"
	page1 := healthBody("scheduledChange", "upcoming", start, `[{"entityValue": "i-00000001"}, {"entityValue": "i-00000002"}]`, `["i-00000001", "i-00000002"]`)
	page2 := healthBody("scheduledChange", "upcoming", start, `[{"entityValue": "i-00000002"}, {"entityValue": "i-00000003"}]`, `["i-00000002", "i-00000003"]`)
	page2 = strings.Replace(page2, `"page": "1"`, `"page": "2"`, 1)
	backup := strings.Replace(strings.Replace(page1, `"region": "eu-west-1"`, `"region": "eu-central-1"`, 1), `"id": "e1"`, `"id": "e2"`, 1)

	ids := make(map[string]string) // instance -> ID
	for name, body := range map[string]string{"page 1": page1, "page 2": page2, "backup of page 1": backup} {
		res, err := Parse([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, ev := range res.Events {
			if want := event.ID(event.ScheduledChange, ev.InstanceID, rebootArn); ev.ID != want {
				t.Errorf("%s: %s has ID %s, want %s", name, ev.InstanceID, ev.ID, want)
			}
			if prev, ok := ids[ev.InstanceID]; ok && prev != ev.ID {
				t.Errorf("%s: %s has ID %s on one page and %s on another", name, ev.InstanceID, ev.ID, prev)
			}
			ids[ev.InstanceID] = ev.ID
		}
	}
	if len(ids) != 3 {
		t.Errorf("pages name %d instances, want 3: %v", len(ids), ids)
	}
}

// TestHealthOver: a closed scheduled change, or an entity whose status is
// RESOLVED, is over: ScheduledChangeCanceled (undo), with no deadline.
func TestHealthOver(t *testing.T) {
	deadline := at("2024-06-05T07:00:00Z")
	const start = "Wed, 05 Jun 2024 07:00:00 GMT"
	tests := []struct {
		name string
		body string
		want []event.Event
	}{
		{
			name: "open, one entity pending and one resolved",
			body: healthBody("scheduledChange", "open", start,
				`[{"entityValue": "i-00000001", "status": "PENDING"}, {"entityValue": "i-00000002", "status": "RESOLVED"}]`, `[]`),
			want: []event.Event{
				scheduled(event.ScheduledChange, "i-00000001", deadline),
				scheduled(event.ScheduledChangeCanceled, "i-00000002", time.Time{}),
			},
		},
		{
			name: "closed",
			body: healthBody("scheduledChange", "closed", start, `[{"entityValue": "i-00000001"}]`, `["i-00000001"]`),
			want: []event.Event{scheduled(event.ScheduledChangeCanceled, "i-00000001", time.Time{})},
		},
		{
			name: "upcoming",
			body: healthBody("scheduledChange", "upcoming", start, `[{"entityValue": "i-00000001"}]`, `null`),
			want: []event.Event{scheduled(event.ScheduledChange, "i-00000001", deadline)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Events, resultOptions...); diff != "" {
				t.Errorf("events mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCapacityReservationAltDetailType records a decision. AWS's page on
// interruptible Capacity Reservations spells the warning's detail-type
// "EC2 Capacity Reservation Instance Interruption Warning" in its markdown
// source (also Karpenter's spelling) and "EC2 Interruptible Capacity
// Reservation Instance Interruption Warning" in its rendered HTML. Which one
// EC2 sends could not be confirmed, the detail is identical, and missing a
// warning costs an unprotected termination, so both are accepted and mean
// the same. (Which one an EventBridge rule must match is `lifeboat check`'s
// concern.) The reclamation-completed events, in either spelling, are
// ignored: they go to the reservation owner and name no instance.
func TestCapacityReservationAltDetailType(t *testing.T) {
	filled, err := readFixture("eventbridge/capacity-reservation/aws-doc.cr-instance-interruption-warning.filled.json")
	if err != nil {
		t.Fatal(err)
	}
	alt := bytes.Replace(filled, []byte(route.CapacityInterruption), []byte(route.CapacityInterruptionAlt), 1)
	if bytes.Equal(alt, filled) {
		t.Fatal("the filled fixture does not hold the markdown detail-type")
	}
	want, err := Parse(filled)
	if err != nil || len(want.Events) != 1 {
		t.Fatalf("Parse(filled) = %v, %v; want one event", want, err)
	}
	got, err := Parse(alt)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, resultOptions...); diff != "" {
		t.Errorf("ALT detail-type parses differently (-markdown +html):\n%s", diff)
	}
}

// keyValueToJSON turns AWS's `Key: Value` rendering of a notification into
// the JSON object SQS carries.
func keyValueToJSON(t *testing.T, text []byte) []byte {
	t.Helper()
	obj := make(map[string]string)
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("not a Key: Value line: %q", line)
		}
		obj[k] = v
	}
	out, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestKeyValueDocSamples records a decision. The ASG user guide shows the
// SQS/SNS notification as `Key: Value` lines. That is a rendering, not what
// SQS delivers (bodies are JSON), so Parse rejects the text as invalid-json
// (see the fixture rows). Its content, once written as JSON, is a valid
// notification, which this test checks.
func TestKeyValueDocSamples(t *testing.T) {
	tests := []struct {
		file string
		want Result
	}{
		{
			file: "sqs-direct/aws-doc-2023-archive.notification-message-example.keyvalue.txt",
			want: events(FormatAutoScaling, lifecycleEvent(event.LifecycleLaunch, "i-0598c7d356eba48d7", at("2021-01-19T00:36:26.533Z"), "", docAccount,
				event.LifecycleAction{
					GroupName: "my-asg", HookName: "my-hook", Token: "71514b9d-6a40-4b26-8523-05e7ee35fa40",
					Transition: event.TransitionLaunching, Metadata: "hook message metadata",
				}, "71514b9d-6a40-4b26-8523-05e7ee35fa40")),
		},
		{
			file: "sqs-direct/aws-doc-2023-archive.test-notification-message-example.keyvalue.txt",
			want: ignoredResult(FormatAutoScaling, IgnoredTestNotification),
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			text, err := readFixture(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Parse(text); Reason(err) != MalformedInvalidJSON {
				t.Errorf("Parse(text) error = %v, want %s", err, MalformedInvalidJSON)
			}
			got, err := Parse(keyValueToJSON(t, text))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, resultOptions...); diff != "" {
				t.Errorf("Parse(JSON) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLifecycleIDAcrossFormats: one lifecycle action has one ID whether it
// arrives through EventBridge, straight from the hook, or through SNS: the
// ID is the token.
func TestLifecycleIDAcrossFormats(t *testing.T) {
	eventBridge, err := readFixture("eventbridge/autoscaling-lifecycle/aws-doc-current.terminate-lifecycle-action.filled.json")
	if err != nil {
		t.Fatal(err)
	}
	direct := []byte(`{"Origin":"AutoScalingGroup","LifecycleHookName":"my-lifecycle-hook","Destination":"EC2","AccountId":"123456789012",
		"RequestId":"f02639a5-62b9-0772-d50e-09647ae07b49","LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING",
		"AutoScalingGroupName":"my-asg","Service":"AWS Auto Scaling","Time":"2022-03-28T00:12:37.214Z",
		"EC2InstanceId":"i-1234567890abcdef0","LifecycleActionToken":"87654321-4321-4321-4321-210987654321"}`)
	var ids []string
	for _, body := range [][]byte{eventBridge, direct, snsEnvelope(direct)} {
		res, err := Parse(body)
		if err != nil || len(res.Events) != 1 {
			t.Fatalf("Parse() = %v, %v; want one event", res, err)
		}
		ids = append(ids, res.Events[0].ID)
	}
	if ids[0] != ids[1] || ids[1] != ids[2] {
		t.Errorf("IDs differ across formats: %v", ids)
	}
}
