package awssim_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/google/go-cmp/cmp"

	"lifeboat.dev/lifeboat/test/awssim"
)

// TestLifecycleRuleDelivers checks that the simulator's announcements go
// through moto's EventBridge: a rule with the exact detail-type delivers the
// terminate lifecycle action into its queue, a rule with a typo in the
// detail-type delivers nothing, and state changes reach a state-change rule.
func TestLifecycleRuleDelivers(t *testing.T) {
	e := newEnv(t, awssim.Options{})
	rules := []struct {
		name, pattern string
		wantBodies    int
	}{
		{"exact", `{"source":["aws.autoscaling"],"detail-type":["EC2 Instance-terminate Lifecycle Action"]}`, 1},
		{"typo-space", `{"source":["aws.autoscaling"],"detail-type":["EC2 Instance Terminate Lifecycle Action"]}`, 0},
		{"typo-case", `{"source":["aws.autoscaling"],"detail-type":["EC2 Instance-Terminate Lifecycle Action"]}`, 0},
		{"launch-only", `{"source":["aws.autoscaling"],"detail-type":["EC2 Instance-launch Lifecycle Action"]}`, 0},
		{"state-change", `{"source":["aws.ec2"],"detail-type":["EC2 Instance State-change Notification"]}`, 4},
	}
	urls := map[string]string{}
	for _, r := range rules {
		url, arn := e.queue(t, r.name)
		e.rule(t, r.name, r.pattern, arn)
		urls[r.name] = url
	}
	e.createGroup(t, "g", 0, 1, 1)
	var id string
	waitFor(t, 5*time.Second, "an instance", func() bool {
		st := e.states(t)
		for k := range st {
			id = k
		}
		return len(st) == 1
	})
	if _, err := e.as.PutLifecycleHook(t.Context(), &autoscaling.PutLifecycleHookInput{
		AutoScalingGroupName: aws.String("g"), LifecycleHookName: aws.String("drain"),
		LifecycleTransition: aws.String(terminating), HeartbeatTimeout: aws.Int32(300),
		DefaultResult: aws.String("CONTINUE"), NotificationMetadata: aws.String(`{"cluster":"c1"}`),
	}); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	e.setDesired(t, "g", 0)
	a := e.waitActions(t, 1)[0]
	e.complete(t, a, "CONTINUE")

	got := map[string][]string{}
	for _, r := range rules {
		got[r.name] = e.drain(t, urls[r.name])
		if len(got[r.name]) != r.wantBodies {
			t.Errorf("queue of rule %s got %d messages, want %d: %v", r.name, len(got[r.name]), r.wantBodies, got[r.name])
		}
	}
	if t.Failed() {
		return
	}

	out, err := e.as.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"g"}})
	if err != nil {
		t.Fatal(err)
	}
	groupARN := aws.ToString(out.AutoScalingGroups[0].AutoScalingGroupARN)

	env := decodeEnvelope(t, got["exact"][0])
	if env.Version != "0" || env.Source != "aws.autoscaling" || env.DetailType != "EC2 Instance-terminate Lifecycle Action" ||
		env.Region != "us-east-1" || env.ID == "" || !slices.Equal(env.Resources, []string{groupARN}) {
		t.Errorf("envelope = %+v, want version 0, aws.autoscaling, EC2 Instance-terminate Lifecycle Action, us-east-1, resources [%s]", env, groupARN)
	}
	// moto deviation: its rule delivery drops "account" (AWS sends it).
	if env.Account != nil {
		t.Errorf("envelope has account %q: moto now keeps it; update the package doc", *env.Account)
	}
	// moto keeps the time the simulator gave, truncated to seconds.
	when, err := time.Parse(time.RFC3339, env.Time)
	if err != nil || when.Before(before.Truncate(time.Second)) || when.After(time.Now()) {
		t.Errorf("envelope time %q (%v), want the announcement time, between %v and now", env.Time, err, before)
	}
	var detail map[string]string
	if err := json.Unmarshal(env.Detail, &detail); err != nil {
		t.Fatal(err)
	}
	wantDetail := map[string]string{
		"LifecycleActionToken": a.Token, "AutoScalingGroupName": "g", "LifecycleHookName": "drain",
		"EC2InstanceId": id, "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
		"NotificationMetadata": `{"cluster":"c1"}`, "Origin": "AutoScalingGroup", "Destination": "EC2",
	}
	if diff := cmp.Diff(wantDetail, detail); diff != "" {
		t.Errorf("detail (-want +got):\n%s", diff)
	}

	var states []string
	for _, b := range got["state-change"] {
		env := decodeEnvelope(t, b)
		var d struct {
			InstanceID string `json:"instance-id"`
			State      string `json:"state"`
		}
		if err := json.Unmarshal(env.Detail, &d); err != nil {
			t.Fatal(err)
		}
		if d.InstanceID != id || !slices.Equal(env.Resources, []string{"arn:aws:ec2:us-east-1:123456789012:instance/" + id}) {
			t.Errorf("state change %s is not about %s", b, id)
		}
		states = append(states, d.State)
	}
	if want := []string{"pending", "running", "shutting-down", "terminated"}; !slices.Equal(states, want) {
		t.Errorf("state changes = %v, want %v", states, want)
	}
}

// TestSpotRuleDetailType is failure F3 in moto: a rule written with the
// wrong detail-type "EC2 Spot Interruption Warning" never sees a real Spot
// interruption event; the exact "EC2 Spot Instance Interruption Warning"
// does.
func TestSpotRuleDetailType(t *testing.T) {
	e := newEnv(t, awssim.Options{})
	b, err := os.ReadFile(filepath.Join("testdata", "aws-doc-current.spot-interruption-warning-terminate.filled.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fixture struct {
		Source     string          `json:"source"`
		DetailType string          `json:"detail-type"`
		Time       time.Time       `json:"time"`
		Resources  []string        `json:"resources"`
		Detail     json.RawMessage `json:"detail"`
	}
	if err := json.Unmarshal(b, &fixture); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, detailType string
		wantDelivered    bool
	}{
		{"wrong", "EC2 Spot Interruption Warning", false},
		{"exact", "EC2 Spot Instance Interruption Warning", true},
	}
	urls := map[string]string{}
	for _, tt := range tests {
		url, arn := e.queue(t, "spot-"+tt.name)
		pattern, _ := json.Marshal(map[string][]string{"source": {"aws.ec2"}, "detail-type": {tt.detailType}})
		e.rule(t, "spot-"+tt.name, string(pattern), arn)
		urls[tt.name] = url
	}
	out, err := e.eb.PutEvents(t.Context(), &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		Source: aws.String(fixture.Source), DetailType: aws.String(fixture.DetailType),
		Detail: aws.String(string(fixture.Detail)), Resources: fixture.Resources, Time: aws.Time(fixture.Time),
	}}})
	if err != nil || out.FailedEntryCount != 0 {
		t.Fatalf("PutEvents: %v %+v", err, out)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bodies := e.drain(t, urls[tt.name])
			if !tt.wantDelivered {
				if len(bodies) != 0 {
					t.Fatalf("rule with detail-type %q delivered %v", tt.detailType, bodies)
				}
				return
			}
			if len(bodies) != 1 {
				t.Fatalf("rule with detail-type %q delivered %d messages, want 1", tt.detailType, len(bodies))
			}
			env := decodeEnvelope(t, bodies[0])
			if env.Source != fixture.Source || env.DetailType != fixture.DetailType || env.Time != "2017-09-18T08:20:00Z" ||
				!slices.Equal(env.Resources, fixture.Resources) {
				t.Errorf("delivered envelope %+v does not carry the fixture's source, detail-type, time and resources", env)
			}
			var got, want any
			_ = json.Unmarshal(env.Detail, &got)
			_ = json.Unmarshal(fixture.Detail, &want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("detail (-fixture +delivered):\n%s", diff)
			}
		})
	}
}
