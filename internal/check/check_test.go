package check

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"

	"lifeboat.dev/lifeboat/internal/check/pattern"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/route"
	imdssrc "lifeboat.dev/lifeboat/internal/source/imds"
)

// TestSamplesMatchTemplate: every embedded sample loads, and the rules of
// deploy/aws/lifeboat.cfn.json deliver every sample of every kind (the
// template and the doctor agree).
func TestSamplesMatchTemplate(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "aws", "lifeboat.cfn.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tmpl struct {
		Resources map[string]struct {
			Type       string
			Properties struct{ EventPattern json.RawMessage }
		}
	}
	if err := json.Unmarshal(raw, &tmpl); err != nil {
		t.Fatal(err)
	}
	var rules []*pattern.Pattern
	for name, res := range tmpl.Resources {
		if res.Type != "AWS::Events::Rule" {
			continue
		}
		p, err := pattern.Parse(res.Properties.EventPattern)
		if err != nil {
			t.Fatalf("template rule %s: %v", name, err)
		}
		rules = append(rules, p)
		for _, dt := range p.Values("detail-type") {
			if _, ok := route.Lookup(dt); !ok {
				t.Errorf("template rule %s: detail-type %q is not in the route table (internal/route)", name, dt)
			}
		}
	}
	for _, spec := range kindSpecs {
		own, err := pattern.Parse([]byte(spec.pattern))
		if err != nil {
			t.Fatalf("%s: the suggested pattern does not parse: %v", spec.kind, err)
		}
		for _, ref := range append(append([]sampleRef{}, spec.samples...), spec.warm...) {
			s := ref.load()
			if !spec.hasDetailType([]string{fmt.Sprint(s.body["detail-type"])}) {
				t.Errorf("%s sample %s has detail-type %v", spec.kind, ref.file, s.body["detail-type"])
			}
			if ok, _ := own.Match(s.bytes()); !ok {
				t.Errorf("%s: the suggested pattern misses sample %s", spec.kind, ref.name)
			}
			matched := false
			for _, p := range rules {
				if ok, _ := p.Match(s.bytes()); ok {
					matched = true
				}
			}
			if !matched {
				t.Errorf("%s: no rule of the CloudFormation template matches sample %s", spec.kind, ref.name)
			}
		}
	}
}

func TestClosest(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"EC2 Spot Interruption Warning", route.SpotInterruption, true},
		{"EC2 Instance Rebalance Recommendations", route.RebalanceRecommendation, true},
		{"EC2 Instance Terminate Lifecycle Action", route.LifecycleTerminate, true},
		{"ec2 spot instance interruption warning", route.SpotInterruption, true},
		{"AWS Health Events", route.Health, true},
		{"Object Created", "", false},
	}
	for _, tt := range tests {
		got, ok := closest(tt.in, knownDetailTypes)
		if ok != tt.ok || ok && got != tt.want {
			t.Errorf("closest(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	if d := levenshtein("kitten", "sitting"); d != 3 {
		t.Errorf("levenshtein = %d, want 3", d)
	}
}

func TestQueuePolicy(t *testing.T) {
	const arn = "arn:aws:sqs:us-east-1:123456789012:lifeboat"
	tests := []struct {
		name, doc  string
		ok, denied bool
		cond       string
	}{
		{"template", `{"Statement":[{"Effect":"Allow","Principal":{"Service":"events.amazonaws.com"},"Action":"sqs:SendMessage","Resource":"` + arn + `","Condition":{"ArnEquals":{"aws:SourceArn":["arn:aws:events:us-east-1:123456789012:rule/lifeboat-SpotInterruptionRule-1"]},"StringEquals":{"aws:SourceAccount":"123456789012"}}}]}`, true, false, "aws:SourceAccount, aws:SourceArn"},
		{"unscoped", `{"Statement":[{"Effect":"Allow","Principal":{"Service":["events.amazonaws.com","sqs.amazonaws.com"]},"Action":"sqs:SendMessage","Resource":"` + arn + `"}]}`, true, false, ""},
		{"single statement object", `{"Statement":{"Effect":"Allow","Principal":{"Service":"events.amazonaws.com"},"Action":["sqs:*"],"Resource":"arn:aws:sqs:*:123456789012:*"}}`, true, false, ""},
		{"anyone", `{"Statement":[{"Effect":"Allow","Principal":"*","Action":"sqs:SendMessage"}]}`, true, false, ""},
		{"with a condition", `{"Statement":[{"Effect":"Allow","Principal":{"Service":"events.amazonaws.com"},"Action":"SQS:SendMessage","Resource":"` + arn + `","Condition":{"ArnEquals":{"aws:SourceArn":"arn:aws:events:us-east-1:123456789012:rule/x"}}}]}`, true, false, "aws:SourceArn"},
		{"other service", `{"Statement":[{"Effect":"Allow","Principal":{"Service":"sns.amazonaws.com"},"Action":"sqs:SendMessage","Resource":"` + arn + `"}]}`, false, false, ""},
		{"other queue", `{"Statement":[{"Effect":"Allow","Principal":{"Service":"events.amazonaws.com"},"Action":"sqs:SendMessage","Resource":"arn:aws:sqs:us-east-1:123456789012:other"}]}`, false, false, ""},
		{"other action", `{"Statement":[{"Effect":"Allow","Principal":{"Service":"events.amazonaws.com"},"Action":"sqs:ReceiveMessage","Resource":"` + arn + `"}]}`, false, false, ""},
		{"denied", `{"Statement":[{"Effect":"Allow","Principal":"*","Action":"sqs:*"},{"Effect":"Deny","Principal":{"Service":"events.amazonaws.com"},"Action":"sqs:SendMessage"}]}`, true, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := parsePolicy(tt.doc)
			if err != nil {
				t.Fatal(err)
			}
			ok, cond, denied := p.allowsSend("events.amazonaws.com", arn)
			if ok != tt.ok || denied != tt.denied || cond != tt.cond {
				t.Errorf("allowsSend = %v, %q, %v; want %v, %q, %v", ok, cond, denied, tt.ok, tt.cond, tt.denied)
			}
		})
	}
}

// fakeAWS is every AWS API check calls, answering from its fields; deny
// names operations that answer AccessDenied.
type fakeAWS struct {
	attrs   map[string]string
	rules   []ebtypes.Rule
	targets map[string][]ebtypes.Target
	groups  []astypes.AutoScalingGroup
	hooks   map[string][]astypes.LifecycleHook
	deny    map[string]bool
}

func (f *fakeAWS) err(op string) error {
	if f.deny[op] {
		return &smithy.GenericAPIError{Code: "AccessDenied", Message: "User: arn:aws:sts::123456789012:assumed-role/lifeboat is not authorized to perform: " + op}
	}
	return nil
}

func (f *fakeAWS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	if err := f.err("sqs:GetQueueAttributes"); err != nil {
		return nil, err
	}
	return &sqs.GetQueueAttributesOutput{Attributes: f.attrs}, nil
}

func (f *fakeAWS) DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	if err := f.err("sqs:DeleteMessage"); err != nil {
		return nil, err
	}
	return nil, &smithy.GenericAPIError{Code: "ReceiptHandleIsInvalid", Message: "The input receipt handle is invalid."}
}

func (f *fakeAWS) ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	if err := f.err("sqs:ChangeMessageVisibility"); err != nil {
		return nil, err
	}
	return nil, &smithy.GenericAPIError{Code: "ReceiptHandleIsInvalid", Message: "The input receipt handle is invalid."}
}

func (f *fakeAWS) ListRules(context.Context, *eventbridge.ListRulesInput, ...func(*eventbridge.Options)) (*eventbridge.ListRulesOutput, error) {
	if err := f.err("events:ListRules"); err != nil {
		return nil, err
	}
	return &eventbridge.ListRulesOutput{Rules: f.rules}, nil
}

func (f *fakeAWS) ListTargetsByRule(_ context.Context, in *eventbridge.ListTargetsByRuleInput, _ ...func(*eventbridge.Options)) (*eventbridge.ListTargetsByRuleOutput, error) {
	if err := f.err("events:ListTargetsByRule"); err != nil {
		return nil, err
	}
	return &eventbridge.ListTargetsByRuleOutput{Targets: f.targets[aws.ToString(in.Rule)]}, nil
}

func (f *fakeAWS) DescribeAutoScalingGroups(context.Context, *autoscaling.DescribeAutoScalingGroupsInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error) {
	if err := f.err("autoscaling:DescribeAutoScalingGroups"); err != nil {
		return nil, err
	}
	return &autoscaling.DescribeAutoScalingGroupsOutput{AutoScalingGroups: f.groups}, nil
}

func (f *fakeAWS) DescribeLifecycleHooks(_ context.Context, in *autoscaling.DescribeLifecycleHooksInput, _ ...func(*autoscaling.Options)) (*autoscaling.DescribeLifecycleHooksOutput, error) {
	if err := f.err("autoscaling:DescribeLifecycleHooks"); err != nil {
		return nil, err
	}
	return &autoscaling.DescribeLifecycleHooksOutput{LifecycleHooks: f.hooks[aws.ToString(in.AutoScalingGroupName)]}, nil
}

func (f *fakeAWS) RecordLifecycleActionHeartbeat(context.Context, *autoscaling.RecordLifecycleActionHeartbeatInput, ...func(*autoscaling.Options)) (*autoscaling.RecordLifecycleActionHeartbeatOutput, error) {
	if err := f.err("autoscaling:RecordLifecycleActionHeartbeat"); err != nil {
		return nil, err
	}
	return nil, &smithy.GenericAPIError{Code: "ValidationError", Message: "No active Lifecycle Action found with instance ID i-00000000000000000"}
}

func (f *fakeAWS) CompleteLifecycleAction(context.Context, *autoscaling.CompleteLifecycleActionInput, ...func(*autoscaling.Options)) (*autoscaling.CompleteLifecycleActionOutput, error) {
	if err := f.err("autoscaling:CompleteLifecycleAction"); err != nil {
		return nil, err
	}
	return nil, &smithy.GenericAPIError{Code: "ValidationError", Message: "No active Lifecycle Action found with instance ID i-00000000000000000"}
}

func (f *fakeAWS) SetInstanceProtection(context.Context, *autoscaling.SetInstanceProtectionInput, ...func(*autoscaling.Options)) (*autoscaling.SetInstanceProtectionOutput, error) {
	if err := f.err("autoscaling:SetInstanceProtection"); err != nil {
		return nil, err
	}
	return nil, &smithy.GenericAPIError{Code: "ValidationError", Message: "The instance i-00000000000000000 is not part of Auto Scaling group lifeboat-check-probe."}
}

func (f *fakeAWS) DescribeAutoScalingInstances(context.Context, *autoscaling.DescribeAutoScalingInstancesInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingInstancesOutput, error) {
	if err := f.err("autoscaling:DescribeAutoScalingInstances"); err != nil {
		return nil, err
	}
	return &autoscaling.DescribeAutoScalingInstancesOutput{}, nil
}

func (f *fakeAWS) GetCallerIdentity(context.Context, *sts.GetCallerIdentityInput, ...func(*sts.Options)) (*sts.GetCallerIdentityOutput, error) {
	if err := f.err("sts:GetCallerIdentity"); err != nil {
		return nil, err
	}
	return &sts.GetCallerIdentityOutput{Account: aws.String("123456789012"), Arn: aws.String("arn:aws:sts::123456789012:assumed-role/lifeboat/pod")}, nil
}

func (f *fakeAWS) DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	if f.deny["ec2:DescribeInstances"] {
		return nil, &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation."}
	}
	return nil, &smithy.GenericAPIError{Code: "DryRunOperation", Message: "Request would have succeeded, but DryRun flag is set."}
}

// DescribeTargetGroups: the account has no target group; DescribeTargetHealth
// is then probed with one that cannot exist.
func (f *fakeAWS) DescribeTargetGroups(context.Context, *elbv2.DescribeTargetGroupsInput, ...func(*elbv2.Options)) (*elbv2.DescribeTargetGroupsOutput, error) {
	if err := f.err("elasticloadbalancing:DescribeTargetGroups"); err != nil {
		return nil, err
	}
	return &elbv2.DescribeTargetGroupsOutput{}, nil
}

func (f *fakeAWS) DescribeTargetHealth(_ context.Context, in *elbv2.DescribeTargetHealthInput, _ ...func(*elbv2.Options)) (*elbv2.DescribeTargetHealthOutput, error) {
	if err := f.err("elasticloadbalancing:DescribeTargetHealth"); err != nil {
		return nil, err
	}
	return nil, &smithy.GenericAPIError{Code: "TargetGroupNotFound", Message: "One or more target groups not found: " + aws.ToString(in.TargetGroupArn)}
}

func (f *fakeAWS) DescribeTags(context.Context, *ec2.DescribeTagsInput, ...func(*ec2.Options)) (*ec2.DescribeTagsOutput, error) {
	if f.deny["ec2:DescribeTags"] {
		return nil, &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation."}
	}
	return nil, &smithy.GenericAPIError{Code: "DryRunOperation", Message: "Request would have succeeded, but DryRun flag is set."}
}

const fakeQueueARN = "arn:aws:sqs:us-east-1:123456789012:lifeboat"

// healthyAWS is the template's setup with one group of cluster "c".
func healthyAWS() *fakeAWS {
	f := &fakeAWS{
		attrs: map[string]string{"QueueArn": fakeQueueARN, "MessageRetentionPeriod": "300", "SqsManagedSseEnabled": "true",
			"Policy": `{"Statement":[{"Effect":"Allow","Principal":{"Service":"events.amazonaws.com"},"Action":"sqs:SendMessage","Resource":"` + fakeQueueARN + `"}]}`},
		targets: map[string][]ebtypes.Target{},
		groups: []astypes.AutoScalingGroup{{AutoScalingGroupName: aws.String("g"), AutoScalingGroupARN: aws.String("arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:x:autoScalingGroupName/g"),
			Tags: []astypes.TagDescription{{Key: aws.String("kubernetes.io/cluster/c"), Value: aws.String("owned")}}}},
		hooks: map[string][]astypes.LifecycleHook{"g": {{LifecycleHookName: aws.String("t"), LifecycleTransition: aws.String("autoscaling:EC2_INSTANCE_TERMINATING"),
			HeartbeatTimeout: aws.Int32(300), GlobalTimeout: aws.Int32(30000), DefaultResult: aws.String("CONTINUE")}}},
	}
	for _, spec := range kindSpecs {
		name := "r-" + string(spec.kind)
		f.rules = append(f.rules, ebtypes.Rule{Name: aws.String(name), State: ebtypes.RuleStateEnabled, EventPattern: aws.String(spec.pattern)})
		f.targets[name] = []ebtypes.Target{{Id: aws.String("lifeboat"), Arn: aws.String(fakeQueueARN)}}
	}
	return f
}

func queueConfig(t *testing.T, extra ...string) config.Config {
	t.Helper()
	cfg, err := config.Load(append([]string{"--queue-url", "https://sqs.us-east-1.amazonaws.com/123456789012/lifeboat", "--cluster-name", "c", "--pod-namespace", "kube-system"}, extra...), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func runFake(t *testing.T, f *fakeAWS, cfg config.Config) Report {
	t.Helper()
	return Run(context.Background(), cfg, Clients{SQS: f, Events: f, AutoScaling: f, STS: f, EC2: f, ELB: f})
}

func result(t *testing.T, r Report, name string) Result {
	t.Helper()
	for _, res := range r.Results {
		if res.Name == name {
			return res
		}
	}
	t.Fatalf("no check %q in %+v", name, r.Results)
	return Result{}
}

// Permissions are probed without side effects and denied ones are listed;
// moto enforces no IAM, so this is tested with a fake.
func TestPermissions(t *testing.T) {
	tests := []struct {
		name   string
		deny   []string
		extra  []string
		status Status
		want   []string
	}{
		{"all allowed", nil, []string{"--private-dns-lookup"}, OK,
			[]string{"allowed: sqs:GetQueueAttributes, events:ListRules", "ec2:DescribeInstances", "not probed: sqs:ReceiveMessage"}},
		{"run permission denied", []string{"sqs:DeleteMessage", "autoscaling:CompleteLifecycleAction"}, nil, Fail,
			[]string{"DENIED (lifeboat run needs them): sqs:DeleteMessage, autoscaling:CompleteLifecycleAction"}},
		{"ec2 dry run denied", []string{"ec2:DescribeInstances"}, []string{"--private-dns-lookup"}, Fail,
			[]string{"DENIED (lifeboat run needs them): ec2:DescribeInstances"}},
		{"out-of-service taint denied", []string{"ec2:DescribeInstances"}, []string{"--out-of-service-taint"}, Fail,
			[]string{"DENIED (lifeboat run needs them): ec2:DescribeInstances"}},
		{"ghost node deletion denied", []string{"ec2:DescribeInstances"}, []string{"--delete-ghost-nodes"}, Fail,
			[]string{"DENIED (lifeboat run needs them): ec2:DescribeInstances"}},
		{"managed tag allowed", nil, []string{"--managed-tag", "team/lb"}, OK, []string{"ec2:DescribeTags"}},
		{"managed tag dry run denied", []string{"ec2:DescribeTags"}, []string{"--managed-tag", "team/lb"}, Fail,
			[]string{"DENIED (lifeboat run needs them): ec2:DescribeTags"}},
		{"scale-in protection allowed", nil, []string{"--scale-in-protection"}, OK, []string{"autoscaling:DescribeAutoScalingInstances, autoscaling:SetInstanceProtection"}},
		{"scale-in protection denied", []string{"autoscaling:SetInstanceProtection"}, []string{"--scale-in-protection"}, Fail,
			[]string{"DENIED (lifeboat run needs them): autoscaling:SetInstanceProtection"}},
		{"load balancer reads allowed", nil, []string{"--wait-for-load-balancers"}, OK,
			[]string{"elasticloadbalancing:DescribeTargetGroups, elasticloadbalancing:DescribeTargetHealth"}},
		{"load balancer reads denied", []string{"elasticloadbalancing:DescribeTargetHealth"}, []string{"--wait-for-load-balancers"}, Fail,
			[]string{"DENIED (lifeboat run needs them): elasticloadbalancing:DescribeTargetHealth"}},
		{"check permission denied", []string{"events:ListRules"}, nil, Warn,
			[]string{"denied (only lifeboat check needs them): events:ListRules"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := healthyAWS()
			f.deny = map[string]bool{}
			for _, d := range tt.deny {
				f.deny[d] = true
			}
			res := result(t, runFake(t, f, queueConfig(t, tt.extra...)), "aws permissions")
			if res.Status != tt.status {
				t.Errorf("status %s, want %s: %s", res.Status, tt.status, res.Found)
			}
			for _, w := range tt.want {
				if !strings.Contains(res.Found, w) {
					t.Errorf("found %q does not contain %q", res.Found, w)
				}
			}
			if tt.status != OK && !strings.Contains(res.Fix, "IAM policy") {
				t.Errorf("fix %q", res.Fix)
			}
		})
	}
}

func TestFakeHealthyAndReport(t *testing.T) {
	r := runFake(t, healthyAWS(), queueConfig(t))
	for _, res := range r.Results {
		if res.Status != OK && res.Name != "kubernetes api" {
			t.Errorf("%s: %s %s", res.Name, res.Status, res.Found)
		}
	}
	// No Kubernetes client: the one failure, with a fix.
	if k := result(t, r, "kubernetes api"); k.Status != Fail || k.Fix == "" {
		t.Errorf("kubernetes api = %+v", k)
	}
	if !r.Failed() {
		t.Error("Failed() = false with a failing check")
	}
	var table, js bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	if !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[len(lines)-1], "checks:") || !strings.Contains(table.String(), "fix: check --kubeconfig") {
		t.Errorf("table:\n%s", table.String())
	}
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var decoded struct {
		Checks  []Result
		Summary map[Status]int
	}
	if err := json.Unmarshal(js.Bytes(), &decoded); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(r.Results, decoded.Checks); d != "" {
		t.Errorf("JSON checks (-want +got):\n%s", d)
	}
	if decoded.Summary[Fail] != 1 || decoded.Summary[OK] != len(r.Results)-1 {
		t.Errorf("summary %v", decoded.Summary)
	}
}

// A group whose terminate hook notifies the queue directly needs no
// terminate rule; a hook notifying SNS needs the queue policy to allow SNS.
func TestDirectAndSNSHooks(t *testing.T) {
	f := healthyAWS()
	var rules []ebtypes.Rule
	for _, r := range f.rules {
		if aws.ToString(r.Name) != "r-lifecycle-terminate" {
			rules = append(rules, r)
		}
	}
	f.rules = rules
	f.hooks["g"][0].NotificationTargetARN = aws.String(fakeQueueARN)
	r := runFake(t, f, queueConfig(t))
	if res := result(t, r, "rule for lifecycle-terminate"); res.Status != OK || !strings.Contains(res.Found, "notify the queue directly") {
		t.Errorf("terminate rule: %+v", res)
	}
	if res := result(t, r, "asg g hook t"); res.Status != OK || !strings.Contains(res.Found, "reaches the queue directly") {
		t.Errorf("hook: %+v", res)
	}

	f.hooks["g"][0].NotificationTargetARN = aws.String("arn:aws:sns:us-east-1:123456789012:lifecycle")
	r = runFake(t, f, queueConfig(t))
	if res := result(t, r, "asg g hook t"); res.Status != Warn || !strings.Contains(res.Found, "SNS topic") {
		t.Errorf("hook: %+v", res)
	}
	if res := result(t, r, "queue policy for sns"); res.Status != Fail {
		t.Errorf("sns policy: %+v", res)
	}
}

func TestRuleWithInputTransformer(t *testing.T) {
	f := healthyAWS()
	f.targets["r-spot-interruption"][0].InputPath = aws.String("$.detail")
	res := result(t, runFake(t, f, queueConfig(t)), "rule for spot-interruption")
	if res.Status != Fail || !strings.Contains(res.Found, "transforms the event") {
		t.Errorf("%+v", res)
	}
}

// IMDS: a token PUT that never gets an answer while GETs do is the hop
// limit; the metadata mock cannot drop a PUT's answer, so these are
// httptest servers (the healthy case runs against the mock in test/check).
func TestIMDS(t *testing.T) {
	metadata := func(requireToken bool, put func(w http.ResponseWriter)) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
				put(w)
			case r.URL.Path == "/latest/meta-data/instance-id":
				if requireToken && r.Header.Get("X-aws-ec2-metadata-token") != "tok" {
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				_, _ = w.Write([]byte("i-0123456789abcdef0"))
			default:
				http.NotFound(w, r)
			}
		}))
	}
	dropPut := func(w http.ResponseWriter) { // the answer dies on the way (hop limit 1)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}
	goodPut := func(w http.ResponseWriter) { _, _ = w.Write([]byte("tok")) }
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	tests := []struct {
		name     string
		endpoint string
		allowV1  bool
		status   Status
		want     string
	}{
		{"IMDSv2", metadata(true, goodPut).URL, false, OK, "this is instance i-0123456789abcdef0"},
		{"hop limit, tokens required", metadata(true, dropPut).URL, false, Fail, "hop limit is probably 1"},
		{"hop limit, v1 answers", metadata(false, dropPut).URL, false, Fail, "IMDSv1 answers (instance i-0123456789abcdef0): the PUT response hop limit is probably 1"},
		{"hop limit, v1 allowed", metadata(false, dropPut).URL, true, Warn, "hop limit is probably 1"},
		{"unreachable", closed.URL, false, Fail, "unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"--mode", "imds", "--node-name", "n", "--imds-endpoint", tt.endpoint}
			if tt.allowV1 {
				args = append(args, "--imds-allow-v1")
			}
			cfg, err := config.Load(args, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			r := Run(context.Background(), cfg, Clients{IMDS: imdssrc.NewClient(cfg.IMDSEndpoint, cfg.IMDSAllowV1)})
			res := result(t, r, "imds")
			if res.Status != tt.status || !strings.Contains(res.Found, tt.want) {
				t.Errorf("imds = %s %q; want %s containing %q", res.Status, res.Found, tt.status, tt.want)
			}
			if tt.status != OK && res.Fix == "" {
				t.Error("no fix")
			}
			if tt.status != OK && strings.Contains(tt.want, "hop limit") && !strings.Contains(res.Fix, "useHostNetwork=true") {
				t.Errorf("fix %q does not say to run on the host network", res.Fix)
			}
		})
	}
}

// A group without a terminate hook does not make the terminate rule
// "not needed": the rule is still required (and the group fails).
func TestNoHookStillNeedsTerminateRule(t *testing.T) {
	f := healthyAWS()
	f.hooks["g"] = nil
	var rules []ebtypes.Rule
	for _, r := range f.rules {
		if aws.ToString(r.Name) != "r-lifecycle-terminate" {
			rules = append(rules, r)
		}
	}
	f.rules = rules
	r := runFake(t, f, queueConfig(t))
	if res := result(t, r, "rule for lifecycle-terminate"); res.Status != Fail {
		t.Errorf("terminate rule: %+v", res)
	}
	if res := result(t, r, "asg g"); res.Status != Fail || !strings.Contains(res.Found, "no terminate lifecycle hook") {
		t.Errorf("group: %+v", res)
	}
}
