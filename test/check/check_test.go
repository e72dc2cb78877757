package check

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"

	"lifeboat.dev/lifeboat/test/testenv"
)

// TestCheckHealthy: the setup of deploy/aws/lifeboat.cfn.json, hooks on the
// cluster's group and lifeboat's RBAC pass every check.
func TestCheckHealthy(t *testing.T) {
	w := newWorld(t, worldOptions{})
	r, code := w.check()
	w.logReport(r)
	if code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if bad := append(r.withStatus("fail"), r.withStatus("warn")...); len(bad) > 0 {
		t.Errorf("checks not ok on a correct setup: %v", bad)
	}
	var names []string
	for _, c := range r.Checks {
		names = append(names, c.Name)
	}
	want := []string{
		"aws identity", "queue", "queue retention", "queue encryption", "queue policy",
		"rule for spot-interruption", "rule for rebalance-recommendation", "rule for scheduled-change", "rule for state-change",
		"rule for capacity-reservation-interruption", "rule for lifecycle-terminate", "rule for lifecycle-launch",
		"autoscaling groups", "asg nodes-a", "asg nodes-a hook lifeboat-launch", "asg nodes-a hook lifeboat-terminate",
		"aws permissions", "kubernetes api", "kubernetes permissions", "cluster review",
	}
	if d := cmp.Diff(want, names); d != "" {
		t.Errorf("checks (-want +got):\n%s", d)
	}
	// Rules are judged by real events, including the warm-pool transitions.
	if _, found, _, _ := r.row("rule for lifecycle-launch"); !strings.Contains(found, "nodes-a: WarmPool → AutoScalingGroup") {
		t.Errorf("launch rule result does not cover the warm-pool transition: %s", found)
	}
	// The table is what docs/operations.md shows.
	out, _, code := lifeboat(t, w.ctx, append([]string{"check"}, w.flags()...)...)
	if code != 0 || !strings.Contains(out, "20 checks: 20 ok, 0 warn, 0 fail") {
		t.Errorf("table output (exit %d):\n%s", code, out)
	}
	saveOutput(t, "healthy.txt", out)
	checkDocSample(t, "docs/operations.md", out, "### A healthy setup")
}

// TestCheckBroken breaks one thing at a time and expects check to name it,
// and only it.
func TestCheckBroken(t *testing.T) {
	tests := []struct {
		name   string
		opts   worldOptions
		break_ func(w *world)
		flags  []string
		// want maps a check to its status and a part of what it found.
		want map[string][2]string
	}{
		{
			name: "wrong detail-type (F3)",
			break_: func(w *world) {
				w.must(w.eb.PutRule(w.ctx, &eventbridge.PutRuleInput{Name: aws.String(w.ruleName(spotRule)),
					EventPattern: aws.String(`{"source":["aws.ec2"],"detail-type":["EC2 Spot Interruption Warning"]}`), State: ebtypes.RuleStateEnabled}))
			},
			want: map[string][2]string{
				"rule for spot-interruption": {"fail", `did you mean "EC2 Spot Instance Interruption Warning"?`},
				"rule lifeboat-" + spotRule:  {"fail", `detail-type "EC2 Spot Interruption Warning" is not one AWS sends; did you mean "EC2 Spot Instance Interruption Warning"?`},
			},
		},
		{
			name: "rule disabled",
			break_: func(w *world) {
				w.must(w.eb.DisableRule(w.ctx, &eventbridge.DisableRuleInput{Name: aws.String(w.ruleName(spotRule))}))
			},
			want: map[string][2]string{"rule for spot-interruption": {"fail", "rule lifeboat-SpotInterruptionRule matches but is DISABLED"}},
		},
		{
			name: "rule targets another queue",
			break_: func(w *world) {
				out, err := w.sqs.CreateQueue(w.ctx, &sqs.CreateQueueInput{QueueName: aws.String("someone-else")})
				w.must(out, err)
				w.must(w.eb.RemoveTargets(w.ctx, &eventbridge.RemoveTargetsInput{Rule: aws.String(w.ruleName(spotRule)), Ids: []string{"lifeboat"}}))
				w.must(w.eb.PutTargets(w.ctx, &eventbridge.PutTargetsInput{Rule: aws.String(w.ruleName(spotRule)),
					Targets: []ebtypes.Target{{Id: aws.String("other"), Arn: aws.String("arn:aws:sqs:us-east-1:123456789012:someone-else")}}}))
			},
			want: map[string][2]string{"rule for spot-interruption": {"fail", "sends to arn:aws:sqs:us-east-1:123456789012:someone-else, not to this queue"}},
		},
		{
			name: "missing queue policy",
			break_: func(w *world) {
				w.must(w.sqs.SetQueueAttributes(w.ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(w.stack.QueueURL), Attributes: map[string]string{"Policy": ""}}))
			},
			want: map[string][2]string{"queue policy": {"fail", "the queue has no policy"}},
		},
		{
			name: "queue policy without events.amazonaws.com",
			break_: func(w *world) {
				w.must(w.sqs.SetQueueAttributes(w.ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(w.stack.QueueURL), Attributes: map[string]string{"Policy": `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"sns.amazonaws.com"},"Action":"sqs:SendMessage","Resource":"*"}]}`}}))
			},
			want: map[string][2]string{"queue policy": {"fail", "does not let events.amazonaws.com send"}},
		},
		{
			name: "AWS-managed KMS key",
			break_: func(w *world) {
				// moto drops the policy on any SetQueueAttributes without one: give it again.
				out, err := w.sqs.GetQueueAttributes(w.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(w.stack.QueueURL), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNamePolicy}})
				w.must(out, err)
				w.must(w.sqs.SetQueueAttributes(w.ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(w.stack.QueueURL),
					Attributes: map[string]string{"KmsMasterKeyId": "alias/aws/sqs", "Policy": out.Attributes["Policy"]}}))
			},
			want: map[string][2]string{"queue encryption": {"fail", "EventBridge cannot use it"}},
		},
		{
			name: "terminate hook missing",
			break_: func(w *world) {
				w.must(w.as.DeleteLifecycleHook(w.ctx, &autoscaling.DeleteLifecycleHookInput{AutoScalingGroupName: aws.String(w.group), LifecycleHookName: aws.String("lifeboat-terminate")}))
			},
			want: map[string][2]string{"asg nodes-a": {"fail", "no terminate lifecycle hook"}},
		},
		{
			name: "launch hook missing with a warm pool",
			break_: func(w *world) {
				w.must(w.as.DeleteLifecycleHook(w.ctx, &autoscaling.DeleteLifecycleHookInput{AutoScalingGroupName: aws.String(w.group), LifecycleHookName: aws.String("lifeboat-launch")}))
			},
			want: map[string][2]string{"asg nodes-a": {"fail", "a warm pool but no launch lifecycle hook"}},
		},
		{
			name: "lifecycle rule filtered to another group",
			break_: func(w *world) {
				w.must(w.eb.PutRule(w.ctx, &eventbridge.PutRuleInput{Name: aws.String(w.ruleName(lifecycleRule)), State: ebtypes.RuleStateEnabled,
					EventPattern: aws.String(`{"source":["aws.autoscaling"],"detail-type":["EC2 Instance-terminate Lifecycle Action","EC2 Instance-launch Lifecycle Action"],"detail":{"AutoScalingGroupName":["nodes-b"]}}`)}))
			},
			want: map[string][2]string{
				"rule for lifecycle-terminate":        {"fail", "no enabled rule delivers a real lifecycle-terminate event (nodes-a: AutoScalingGroup → EC2, nodes-a: AutoScalingGroup → WarmPool)"},
				"rule for lifecycle-launch":           {"fail", "no enabled rule delivers"},
				"asg nodes-a hook lifeboat-terminate": {"fail", "its actions never reach the queue"},
				"asg nodes-a hook lifeboat-launch":    {"fail", "its actions never reach the queue"},
				"rule lifeboat-" + lifecycleRule:      {"fail", "its filters exclude every real sample"},
			},
		},
		{
			// lifeboat clamps the interval to half the hook's timeout
			// (issue 14 item 10): a warning that says what it does instead.
			name:  "heartbeat interval longer than the hook timeout",
			flags: []string{"--heartbeat-interval", "10m"},
			want: map[string][2]string{
				"asg nodes-a hook lifeboat-terminate": {"warn", "--heartbeat-interval 10m0s is more than half the hook's heartbeat timeout 5m0s: lifeboat heartbeats every 2m30s instead"},
				"asg nodes-a hook lifeboat-launch":    {"warn", "lifeboat heartbeats every 2m30s instead"},
			},
		},
		{
			name: "state-change rule for terminated only",
			break_: func(w *world) {
				w.must(w.eb.PutRule(w.ctx, &eventbridge.PutRuleInput{Name: aws.String(w.ruleName(stateRule)), State: ebtypes.RuleStateEnabled,
					EventPattern: aws.String(`{"source":["aws.ec2"],"detail-type":["EC2 Instance State-change Notification"],"detail":{"state":["terminated"]}}`)}))
			},
			want: map[string][2]string{"rule for state-change": {"warn", "delivers terminated but not stopping, stopped, shutting-down"}},
		},
		{
			name: "RBAC verb missing",
			opts: worldOptions{omit: "create pods/eviction"},
			want: map[string][2]string{"kubernetes permissions": {"fail", "DENIED: create pods/eviction (drain through the Eviction API)"}},
		},
		{
			name: "lease permission missing",
			opts: worldOptions{omit: "update leases"},
			want: map[string][2]string{"kubernetes permissions": {"fail", "DENIED: update coordination.k8s.io leases lifeboat in"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, tt.opts)
			if tt.break_ != nil {
				tt.break_(w)
			}
			r, code := w.check(tt.flags...)
			w.logReport(r)
			wantCode := 0
			var wantBad []string
			for name, sw := range tt.want {
				status, found, fix, ok := r.row(name)
				if !ok {
					t.Errorf("no check %q", name)
					continue
				}
				if status != sw[0] || !strings.Contains(found, sw[1]) {
					t.Errorf("%s: %s %q; want %s containing %q", name, status, found, sw[0], sw[1])
				}
				if fix == "" {
					t.Errorf("%s: no fix given", name)
				}
				if sw[0] == "fail" {
					wantCode = 1
				}
				wantBad = append(wantBad, name)
			}
			// Only what was broken is reported.
			gotBad := append(r.withStatus("fail"), r.withStatus("warn")...)
			slices.Sort(gotBad)
			slices.Sort(wantBad)
			if d := cmp.Diff(wantBad, gotBad); d != "" {
				t.Errorf("checks not ok (-want +got):\n%s", d)
			}
			if code != wantCode {
				t.Errorf("exit code %d, want %d", code, wantCode)
			}
			if tt.name == "wrong detail-type (F3)" {
				out, _, _ := lifeboat(t, w.ctx, append([]string{"check"}, w.flags()...)...)
				saveOutput(t, "broken-detail-type.txt", out)
				checkDocSample(t, "docs/operations.md", out, "### A broken setup: the F3 typo")
			}
		})
	}
}

// saveOutput writes real check output under $LIFEBOAT_CHECK_OUTPUT (if
// set), for docs/operations.md.
func saveOutput(t *testing.T, name, out string) {
	t.Helper()
	t.Logf("lifeboat check:\n%s", out)
	dir := os.Getenv("LIFEBOAT_CHECK_OUTPUT")
	if dir == "" {
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}

// IMDS mode: the token from the metadata mock (IMDSv2 only) and the node of
// this instance; then a --node-name that is another instance's node.
func TestCheckIMDSMode(t *testing.T) {
	w := newWorld(t, worldOptions{})
	instanceID := testenv.RandomInstanceID()
	mock := testenv.StartIMDS(t, testenv.IMDSOptions{IMDSv2Only: true, InstanceID: instanceID})
	self := kube.Node(t, testenv.NodeSpec{InstanceID: instanceID})
	other := kube.Node(t, testenv.NodeSpec{})
	check := func(node string) (report, int) {
		out, stderr, code := lifeboat(t, w.ctx, "check", "--output", "json", "--mode", "imds", "--node-name", node,
			"--imds-endpoint", mock.URL, "--kubeconfig", w.kubeconfig)
		var r report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("check output is not JSON (%v); stderr:\n%s", err, stderr)
		}
		w.logReport(r)
		return r, code
	}
	r, code := check(self.Name)
	var names []string
	for _, c := range r.Checks {
		names = append(names, c.Name+" "+c.Status)
	}
	if d := cmp.Diff([]string{"imds ok", "kubernetes api ok", "kubernetes permissions ok", "node ok", "cluster review ok", "kubelet graceful shutdown ok"}, names); d != "" || code != 0 {
		t.Errorf("exit %d; checks (-want +got):\n%s", code, d)
	}
	// lifeboat's role has no nodes/proxy get: the kubelets are not read,
	// and check says so instead of failing.
	if _, found, _, _ := r.row("kubelet graceful shutdown"); !strings.Contains(found, "not checked: not permitted: grant nodes/proxy get to check this") {
		t.Errorf("kubelet graceful shutdown: %s", found)
	}
	if _, found, _, _ := r.row("imds"); !strings.Contains(found, "IMDSv2 token obtained") || !strings.Contains(found, instanceID) {
		t.Errorf("imds: %s", found)
	}
	r, code = check(other.Name)
	if status, found, _, _ := r.row("node"); status != "fail" || !strings.Contains(found, "instance metadata says this is "+instanceID) || code != 1 {
		t.Errorf("another node: exit %d, %s %s", code, status, found)
	}
}
