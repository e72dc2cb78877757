package message

import (
	"strings"
	"testing"
)

// Hostile bodies are rejected with a bounded reason, never acted on:
// nesting deeper than encoding/json's limit, instance IDs carrying shell,
// path or template syntax, node names where an instance ID belongs.
func TestParseHostile(t *testing.T) {
	spot := func(detail string) []byte {
		return []byte(`{"detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","detail":` + detail + `}`)
	}
	tests := []struct {
		name       string
		body       []byte
		wantReason string
	}{
		{"objects nested 20,000 deep", []byte(strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000)), MalformedInvalidJSON},
		{"arrays nested 15,000 deep in the detail", spot(strings.Repeat("[", 15000) + strings.Repeat("]", 15000)), MalformedInvalidJSON},
		{"SNS message nested 20,000 deep", []byte(`{"Type":"Notification","MessageId":"m","Message":"` + strings.Repeat(`[`, 20000) + `"}`), MalformedInvalidJSON},
		{"shell injection", spot(`{"instance-id":"i-0123456789abcdef0; rm -rf /"}`), MalformedInvalidInstanceID},
		{"path traversal", spot(`{"instance-id":"../../i-0123456789abcdef0"}`), MalformedInvalidInstanceID},
		{"template", spot(`{"instance-id":"{{.Env.HOME}}"}`), MalformedInvalidInstanceID},
		{"node name", spot(`{"instance-id":"ip-10-0-0-1.ec2.internal"}`), MalformedInvalidInstanceID},
		{"newline", spot(`{"instance-id":"i-0123456789abcdef0\ni-0123456789abcdef1"}`), MalformedInvalidInstanceID},
		{"NUL", spot(`{"instance-id":"i-0123456789abcdef0\u0000"}`), MalformedInvalidInstanceID},
		{"too long", spot(`{"instance-id":"i-0123456789abcdef0123456789abcdef"}`), MalformedInvalidInstanceID},
		{"number", spot(`{"instance-id":12345678}`), MalformedInvalidInstanceID},
		{"list", spot(`{"instance-id":["i-0123456789abcdef0"]}`), MalformedInvalidInstanceID},
		{"lifecycle action naming a node", []byte(`{"LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING","EC2InstanceId":"ip-10-0-0-1.ec2.internal","AutoScalingGroupName":"g","LifecycleHookName":"h","LifecycleActionToken":"t"}`), MalformedInvalidInstanceID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Parse(tt.body)
			if got := Reason(err); got != tt.wantReason {
				t.Errorf("Parse() reason = %q (%v), want %q", got, err, tt.wantReason)
			}
			if len(res.Events) > 0 {
				t.Errorf("Parse() returned events %+v for a hostile body", res.Events)
			}
		})
	}
}
