package awssim_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"

	"lifeboat.dev/lifeboat/test/awssim"
)

// fixtureKeys returns the sorted top-level keys of a JSON object.
func fixtureKeys(t *testing.T, b []byte) []string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDirectSQSNotifications(t *testing.T) {
	e := newEnv(t, awssim.Options{})
	url, arn := e.queue(t, "hooks")
	// An EventBridge rule into a second queue: AWS announces every action
	// on EventBridge too, whatever the hook's target.
	ebURL, ebARN := e.queue(t, "eventbridge")
	e.rule(t, "lifecycle", lifecyclePattern, ebARN)
	e.createGroup(t, "g", 0, 1, 0)
	if _, err := e.as.PutLifecycleHook(t.Context(), &autoscaling.PutLifecycleHookInput{
		AutoScalingGroupName: aws.String("g"), LifecycleHookName: aws.String("launch"),
		LifecycleTransition: aws.String(launching), HeartbeatTimeout: aws.Int32(300),
		NotificationTargetARN: aws.String(arn), RoleARN: aws.String("arn:aws:iam::123456789012:role/asg-sqs"),
		NotificationMetadata: aws.String("meta"),
	}); err != nil {
		t.Fatalf("PutLifecycleHook: %v", err)
	}
	out, err := e.as.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"g"}})
	if err != nil {
		t.Fatal(err)
	}
	groupARN := aws.ToString(out.AutoScalingGroups[0].AutoScalingGroupARN)

	t.Run("TEST_NOTIFICATION", func(t *testing.T) {
		bodies := e.drain(t, url)
		if len(bodies) != 1 {
			t.Fatalf("got %d messages, want one TEST_NOTIFICATION: %v", len(bodies), bodies)
		}
		want := fixtureKeys(t, readTestdata(t, "unidentified-repo-cdk.autoscaling-TEST_NOTIFICATION.json"))
		if diff := cmp.Diff(want, fixtureKeys(t, []byte(bodies[0]))); diff != "" {
			t.Errorf("keys (-real notification +simulated):\n%s", diff)
		}
		var m map[string]string
		if err := json.Unmarshal([]byte(bodies[0]), &m); err != nil {
			t.Fatal(err)
		}
		if m["Event"] != "autoscaling:TEST_NOTIFICATION" || m["Service"] != "AWS Auto Scaling" || m["AutoScalingGroupARN"] != groupARN ||
			m["AutoScalingGroupName"] != "g" || m["AccountId"] != "123456789012" {
			t.Errorf("TEST_NOTIFICATION = %v", m)
		}
		if _, err := time.Parse("2006-01-02T15:04:05.000Z", m["Time"]); err != nil {
			t.Errorf("Time %q is not in AWS's millisecond format: %v", m["Time"], err)
		}
	})

	t.Run("lifecycle action", func(t *testing.T) {
		e.setDesired(t, "g", 1)
		a := e.waitActions(t, 1)[0]
		bodies := e.drain(t, url)
		if len(bodies) != 1 {
			t.Fatalf("got %d messages, want one notification: %v", len(bodies), bodies)
		}
		want := append(fixtureKeys(t, readTestdata(t, "unidentified-repo-cdk.EC2_INSTANCE_LAUNCHING-origin-ec2-dest-asg.json")), "NotificationMetadata")
		slices.Sort(want)
		if diff := cmp.Diff(want, fixtureKeys(t, []byte(bodies[0]))); diff != "" {
			t.Errorf("keys (-real notification +simulated):\n%s", diff)
		}
		var m map[string]string
		if err := json.Unmarshal([]byte(bodies[0]), &m); err != nil {
			t.Fatal(err)
		}
		wantValues := map[string]string{
			"Origin": "EC2", "Destination": "AutoScalingGroup", "LifecycleHookName": "launch", "AccountId": "123456789012",
			"LifecycleTransition": launching, "AutoScalingGroupName": "g", "Service": "AWS Auto Scaling",
			"EC2InstanceId": a.InstanceID, "LifecycleActionToken": a.Token, "NotificationMetadata": "meta",
		}
		for k, v := range wantValues {
			if m[k] != v {
				t.Errorf("%s = %q, want %q", k, m[k], v)
			}
		}
		if m["RequestId"] == "" {
			t.Error("RequestId is empty")
		}
		if _, err := time.Parse("2006-01-02T15:04:05.000Z", m["Time"]); err != nil {
			t.Errorf("Time %q is not in AWS's millisecond format: %v", m["Time"], err)
		}
		ev := lifecycleEvents(t, e.drain(t, ebURL))
		if len(ev) != 1 || ev[0].LifecycleActionToken != a.Token {
			t.Errorf("EventBridge got %+v, want the same action (token %s)", ev, a.Token)
		}
	})

	t.Run("bad targets", func(t *testing.T) {
		tests := []struct {
			name, target, messagePrefix string
		}{
			{"missing queue", "arn:aws:sqs:us-east-1:123456789012:nope", "Unable to publish test message to notification target arn:aws:sqs:us-east-1:123456789012:nope."},
			{"SNS", "arn:aws:sns:us-east-1:123456789012:topic", "awssim does not simulate SNS notification targets"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := e.as.PutLifecycleHook(t.Context(), &autoscaling.PutLifecycleHookInput{
					AutoScalingGroupName: aws.String("g"), LifecycleHookName: aws.String("other"),
					LifecycleTransition: aws.String(terminating), NotificationTargetARN: aws.String(tt.target),
					RoleARN: aws.String("arn:aws:iam::123456789012:role/asg-sqs"),
				})
				wantAPIError(t, err, "ValidationError", "")
				var ae smithy.APIError
				errors.As(err, &ae)
				if !strings.HasPrefix(ae.ErrorMessage(), tt.messagePrefix) {
					t.Errorf("message %q, want prefix %q", ae.ErrorMessage(), tt.messagePrefix)
				}
			})
		}
	})
}
