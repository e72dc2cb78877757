package check

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
)

type sqsAPI interface {
	GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

type eventsAPI interface {
	ListRules(context.Context, *eventbridge.ListRulesInput, ...func(*eventbridge.Options)) (*eventbridge.ListRulesOutput, error)
	ListTargetsByRule(context.Context, *eventbridge.ListTargetsByRuleInput, ...func(*eventbridge.Options)) (*eventbridge.ListTargetsByRuleOutput, error)
}

type autoscalingAPI interface {
	DescribeAutoScalingGroups(context.Context, *autoscaling.DescribeAutoScalingGroupsInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error)
	DescribeLifecycleHooks(context.Context, *autoscaling.DescribeLifecycleHooksInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeLifecycleHooksOutput, error)
	RecordLifecycleActionHeartbeat(context.Context, *autoscaling.RecordLifecycleActionHeartbeatInput, ...func(*autoscaling.Options)) (*autoscaling.RecordLifecycleActionHeartbeatOutput, error)
	CompleteLifecycleAction(context.Context, *autoscaling.CompleteLifecycleActionInput, ...func(*autoscaling.Options)) (*autoscaling.CompleteLifecycleActionOutput, error)
	SetInstanceProtection(context.Context, *autoscaling.SetInstanceProtectionInput, ...func(*autoscaling.Options)) (*autoscaling.SetInstanceProtectionOutput, error)
	DescribeAutoScalingInstances(context.Context, *autoscaling.DescribeAutoScalingInstancesInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingInstancesOutput, error)
}

type stsAPI interface {
	GetCallerIdentity(context.Context, *sts.GetCallerIdentityInput, ...func(*sts.Options)) (*sts.GetCallerIdentityOutput, error)
}

type ec2API interface {
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	DescribeTags(context.Context, *ec2.DescribeTagsInput, ...func(*ec2.Options)) (*ec2.DescribeTagsOutput, error)
}

type elbAPI interface {
	DescribeTargetGroups(context.Context, *elbv2.DescribeTargetGroupsInput, ...func(*elbv2.Options)) (*elbv2.DescribeTargetGroupsOutput, error)
	DescribeTargetHealth(context.Context, *elbv2.DescribeTargetHealthInput, ...func(*elbv2.Options)) (*elbv2.DescribeTargetHealthOutput, error)
}

var (
	_ elbAPI         = (*elbv2.Client)(nil)
	_ sqsAPI         = (*sqs.Client)(nil)
	_ eventsAPI      = (*eventbridge.Client)(nil)
	_ autoscalingAPI = (*autoscaling.Client)(nil)
	_ stsAPI         = (*sts.Client)(nil)
	_ ec2API         = (*ec2.Client)(nil)
)

// Probe identifiers: nothing can have them, so a probe changes nothing.
const (
	probeReceiptHandle = "lifeboat-check-probe"
	probeInstanceID    = "i-00000000000000000"
	probeHook          = "lifeboat-check-probe"
	probeTargetGroup   = "arn:aws:elasticloadbalancing:us-east-1:000000000000:targetgroup/lifeboat-check-probe/0000000000000000"
)

// verdict is what a call said about a permission.
type verdict int

const (
	notTried verdict = iota
	allowed
	denied
	unknown
)

// permission is one IAM action lifeboat uses.
type permission struct {
	action string
	// runtime: `lifeboat run` needs it (else only `lifeboat check` does).
	runtime bool
	// why it is not probed, when it cannot be without side effects.
	notProbed string
	verdict   verdict
	err       string
}

type permissions struct {
	list []*permission
}

func newPermissions() *permissions { return &permissions{} }

// need declares an action lifeboat uses.
func (p *permissions) need(action string, runtime bool, notProbed string) {
	if p.find(action) == nil {
		p.list = append(p.list, &permission{action: action, runtime: runtime, notProbed: notProbed})
	}
}

func (p *permissions) find(action string) *permission {
	for _, x := range p.list {
		if x.action == action {
			return x
		}
	}
	return nil
}

// record classifies the error of a call made with action and returns
// whether it was denied. A call AWS answered with another API error (a
// validation error, an unknown queue) passed authorization.
func (p *permissions) record(action string, err error) bool {
	x := p.find(action)
	if x == nil {
		p.need(action, false, "")
		x = p.find(action)
	}
	v := allowed
	switch {
	case err == nil:
	case isAccessDenied(err):
		v, x.err = denied, apiMessage(err)
	default:
		var ae smithy.APIError
		if !errors.As(err, &ae) || isNotFound(err) {
			v, x.err = unknown, apiMessage(err)
		}
	}
	// The strongest verdict wins: one denial is a denial.
	if v == denied || x.verdict == notTried || x.verdict == unknown {
		x.verdict = v
	}
	return v == denied
}

func isAccessDenied(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "AuthorizationError", "NotAuthorized",
		"InvalidClientTokenId", "UnrecognizedClientException", "ExpiredToken", "ExpiredTokenException", "SignatureDoesNotMatch":
		return true
	}
	return strings.Contains(ae.ErrorCode(), "AccessDenied")
}

func isNotFound(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	c := ae.ErrorCode()
	return strings.Contains(c, "NonExistentQueue") || strings.Contains(c, "QueueDoesNotExist") || strings.Contains(c, "NotFound")
}

// apiMessage is an error without the SDK's operation noise.
func apiMessage(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode() + ": " + ae.ErrorMessage()
	}
	return err.Error()
}

// identity checks the AWS credentials.
func (r *run) identity(ctx context.Context) {
	if r.c.STS == nil {
		return
	}
	out, err := r.c.STS.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		r.add("aws identity", Fail, "no usable AWS credentials: "+apiMessage(err),
			"give the pod an IAM role (IRSA or EKS Pod Identity) or set AWS credentials for the SDK's default chain; check --region and --aws-endpoint")
		return
	}
	r.account = aws.ToString(out.Account)
	r.add("aws identity", OK, fmt.Sprintf("%s (account %s)", aws.ToString(out.Arn), r.account), "")
}

// probePermissions tries, without side effects, the calls of `lifeboat
// run` that the other checks did not make.
func (r *run) probePermissions(ctx context.Context) {
	p := r.perms
	p.need("sqs:ReceiveMessage", true, "receiving would take messages from lifeboat")
	p.need("sqs:DeleteMessage", true, "")
	p.need("sqs:ChangeMessageVisibility", true, "")
	if r.c.SQS != nil && r.cfg.QueueURL != "" {
		_, err := r.c.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(r.cfg.QueueURL), ReceiptHandle: aws.String(probeReceiptHandle)})
		p.record("sqs:DeleteMessage", err)
		_, err = r.c.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(r.cfg.QueueURL),
			ReceiptHandle: aws.String(probeReceiptHandle), VisibilityTimeout: 0})
		p.record("sqs:ChangeMessageVisibility", err)
	}
	group := "lifeboat-check-probe"
	if len(r.groups) > 0 {
		group = r.groups[0].name // resource-scoped policies name real groups
	}
	if r.cfg.CompleteLifecycle && r.c.AutoScaling != nil {
		p.need("autoscaling:RecordLifecycleActionHeartbeat", true, "")
		p.need("autoscaling:CompleteLifecycleAction", true, "")
		_, err := r.c.AutoScaling.RecordLifecycleActionHeartbeat(ctx, &autoscaling.RecordLifecycleActionHeartbeatInput{
			AutoScalingGroupName: aws.String(group), LifecycleHookName: aws.String(probeHook), InstanceId: aws.String(probeInstanceID)})
		p.record("autoscaling:RecordLifecycleActionHeartbeat", err)
		_, err = r.c.AutoScaling.CompleteLifecycleAction(ctx, &autoscaling.CompleteLifecycleActionInput{
			AutoScalingGroupName: aws.String(group), LifecycleHookName: aws.String(probeHook), InstanceId: aws.String(probeInstanceID),
			LifecycleActionResult: aws.String("CONTINUE")})
		p.record("autoscaling:CompleteLifecycleAction", err)
	}
	if r.cfg.ScaleInProtection && r.c.AutoScaling != nil {
		// The probe instance is in no group: AWS refuses the change after
		// authorizing it, so nothing is protected or lifted.
		p.need("autoscaling:DescribeAutoScalingInstances", true, "")
		p.need("autoscaling:SetInstanceProtection", true, "")
		_, err := r.c.AutoScaling.DescribeAutoScalingInstances(ctx, &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: []string{probeInstanceID}})
		p.record("autoscaling:DescribeAutoScalingInstances", err)
		_, err = r.c.AutoScaling.SetInstanceProtection(ctx, &autoscaling.SetInstanceProtectionInput{
			AutoScalingGroupName: aws.String(group), InstanceIds: []string{probeInstanceID}, ProtectedFromScaleIn: aws.Bool(false)})
		p.record("autoscaling:SetInstanceProtection", err)
	}
	if (r.cfg.PrivateDNSLookup || r.cfg.OutOfServiceTaint || r.cfg.DeleteGhostNodes) && r.c.EC2 != nil {
		p.need("ec2:DescribeInstances", true, "")
		_, err := r.c.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{DryRun: aws.Bool(true)})
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "DryRunOperation" {
			err = nil
		}
		p.record("ec2:DescribeInstances", err)
	}
	if r.cfg.WaitForLoadBalancers && r.c.ELB != nil {
		r.probeLoadBalancers(ctx)
	}
	if r.cfg.ManagedTag != "" && r.c.EC2 != nil {
		p.need("ec2:DescribeTags", true, "")
		_, err := r.c.EC2.DescribeTags(ctx, &ec2.DescribeTagsInput{DryRun: aws.Bool(true)})
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "DryRunOperation" {
			err = nil
		}
		p.record("ec2:DescribeTags", err)
	}
}

// probeLoadBalancers reads (--wait-for-load-balancers): one page of one
// target group, and the health of that group, or of one that cannot exist
// when there is none (IAM authorizes a call before ELBv2 looks the group
// up, so TargetGroupNotFound means allowed).
func (r *run) probeLoadBalancers(ctx context.Context) {
	p := r.perms
	p.need("elasticloadbalancing:DescribeTargetGroups", true, "")
	p.need("elasticloadbalancing:DescribeTargetHealth", true, "")
	arn := probeTargetGroup
	out, err := r.c.ELB.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{PageSize: aws.Int32(1)})
	p.record("elasticloadbalancing:DescribeTargetGroups", err)
	if err == nil && len(out.TargetGroups) > 0 {
		arn = aws.ToString(out.TargetGroups[0].TargetGroupArn)
	}
	_, err = r.c.ELB.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: aws.String(arn)})
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "TargetGroupNotFound" {
		err = nil
	}
	p.record("elasticloadbalancing:DescribeTargetHealth", err)
}

// permissionsResult summarizes every permission seen.
func (r *run) permissionsResult() {
	var ok, runtimeDenied, checkDenied, unknowns, skipped []string
	for _, x := range r.perms.list {
		switch {
		case x.verdict == allowed:
			ok = append(ok, x.action)
		case x.verdict == denied && x.runtime:
			runtimeDenied = append(runtimeDenied, x.action)
		case x.verdict == denied:
			checkDenied = append(checkDenied, x.action)
		case x.verdict == unknown:
			unknowns = append(unknowns, x.action+" ("+x.err+")")
		case x.notProbed != "":
			skipped = append(skipped, x.action+" ("+x.notProbed+")")
		}
	}
	parts := []string{fmt.Sprintf("allowed: %s", listOrNone(ok))}
	if len(runtimeDenied) > 0 {
		parts = append(parts, "DENIED (lifeboat run needs them): "+strings.Join(runtimeDenied, ", "))
	}
	if len(checkDenied) > 0 {
		parts = append(parts, "denied (only lifeboat check needs them): "+strings.Join(checkDenied, ", "))
	}
	if len(unknowns) > 0 {
		parts = append(parts, "could not tell: "+strings.Join(unknowns, ", "))
	}
	if len(skipped) > 0 {
		parts = append(parts, "not probed: "+strings.Join(skipped, ", "))
	}
	found := strings.Join(parts, "; ")
	missing := append(slices.Clone(runtimeDenied), checkDenied...)
	fix := ""
	if len(missing) > 0 {
		fix = "allow " + strings.Join(missing, ", ") + " in the IAM policy of lifeboat's role (deploy/aws/lifeboat.cfn.json, LifeboatPolicy, has every action)"
	}
	switch {
	case len(runtimeDenied) > 0:
		r.add("aws permissions", Fail, found, fix)
	case len(checkDenied) > 0 || len(unknowns) > 0:
		r.add("aws permissions", Warn, found, fix)
	default:
		r.add("aws permissions", OK, found, "")
	}
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}
