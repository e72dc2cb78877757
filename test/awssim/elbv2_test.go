package awssim_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/test/awssim"
)

func elbClient(t *testing.T, endpoint string) *elbv2.Client {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return elbv2.NewFromConfig(cfg, func(o *elbv2.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// health lists a target group's targets as "id:port state".
func health(t *testing.T, c *elbv2.Client, arn string, targets ...elbtypes.TargetDescription) []string {
	t.Helper()
	out, err := c.DescribeTargetHealth(t.Context(), &elbv2.DescribeTargetHealthInput{TargetGroupArn: aws.String(arn), Targets: targets})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, d := range out.TargetHealthDescriptions {
		got = append(got, aws.ToString(d.Target.Id)+":"+itoa(aws.ToInt32(d.Target.Port))+" "+string(d.TargetHealth.State))
	}
	return got
}

func itoa(n int32) string { return fmt.Sprintf("%d", n) }

// The ELBv2 extension's contract, through aws-sdk-go-v2: a deregistered
// target drains for the target group's deregistration delay, then is no
// longer listed (asked for by ID: unused); the same calls against moto
// show what moto models (gone at once), which is why the extension exists.
func TestELBDeregistrationDelay(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	e := newEnv(t, awssim.Options{Clock: clk})
	sim := elbClient(t, e.sim.Endpoint())
	ctx := t.Context()
	create := func(c *elbv2.Client, name string, typ elbtypes.TargetTypeEnum) string {
		t.Helper()
		out, err := c.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: aws.String(name), Protocol: elbtypes.ProtocolEnumTcp,
			Port: aws.Int32(30080), VpcId: aws.String(defaultVPC(t, e)), TargetType: typ})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.TargetGroups[0].TargetGroupArn)
	}
	arn := create(sim, "web", elbtypes.TargetTypeEnumIp)
	if _, err := sim.ModifyTargetGroupAttributes(ctx, &elbv2.ModifyTargetGroupAttributesInput{TargetGroupArn: aws.String(arn),
		Attributes: []elbtypes.TargetGroupAttribute{{Key: aws.String("deregistration_delay.timeout_seconds"), Value: aws.String("3")}}}); err != nil {
		t.Fatal(err)
	}
	a, b := elbtypes.TargetDescription{Id: aws.String("10.0.1.5")}, elbtypes.TargetDescription{Id: aws.String("10.0.1.9"), Port: aws.Int32(8080)}
	if _, err := sim.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: aws.String(arn), Targets: []elbtypes.TargetDescription{a, b}}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"10.0.1.5:30080 healthy", "10.0.1.9:8080 healthy"}, health(t, sim, arn)); d != "" {
		t.Errorf("registered (-want +got):\n%s", d)
	}
	if _, err := sim.DeregisterTargets(ctx, &elbv2.DeregisterTargetsInput{TargetGroupArn: aws.String(arn), Targets: []elbtypes.TargetDescription{a}}); err != nil {
		t.Fatal(err)
	}
	clk.Step(2 * time.Second)
	if d := cmp.Diff([]string{"10.0.1.5:30080 draining", "10.0.1.9:8080 healthy"}, health(t, sim, arn)); d != "" {
		t.Errorf("2 s into a 3 s deregistration delay (-want +got):\n%s", d)
	}
	clk.Step(time.Second)
	if d := cmp.Diff([]string{"10.0.1.9:8080 healthy"}, health(t, sim, arn)); d != "" {
		t.Errorf("after the delay (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"10.0.1.5:30080 unused"}, health(t, sim, arn, a)); d != "" {
		t.Errorf("asked for by ID after the delay (-want +got):\n%s", d)
	}
	// Pages, and a group that does not exist.
	create(sim, "api", elbtypes.TargetTypeEnumInstance)
	var names []string
	p := elbv2.NewDescribeTargetGroupsPaginator(sim, &elbv2.DescribeTargetGroupsInput{PageSize: aws.Int32(1)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range page.TargetGroups {
			names = append(names, aws.ToString(g.TargetGroupName)+"/"+string(g.TargetType))
		}
	}
	if d := cmp.Diff([]string{"web/ip", "api/instance"}, names); d != "" {
		t.Errorf("paged target groups (-want +got):\n%s", d)
	}
	_, err := sim.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: aws.String(arn + "0")})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "TargetGroupNotFound" {
		t.Errorf("a target group that does not exist: %v, want TargetGroupNotFound", err)
	}

	// moto: the same deregistration leaves nothing to drain.
	m := elbClient(t, moto.Endpoint)
	marn := create(m, "web", elbtypes.TargetTypeEnumIp)
	if _, err := m.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: aws.String(marn), Targets: []elbtypes.TargetDescription{a}}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"10.0.1.5:30080 healthy"}, health(t, m, marn)); d != "" {
		t.Errorf("moto, registered (-want +got):\n%s", d)
	}
	if _, err := m.DeregisterTargets(ctx, &elbv2.DeregisterTargetsInput{TargetGroupArn: aws.String(marn), Targets: []elbtypes.TargetDescription{a}}); err != nil {
		t.Fatal(err)
	}
	if got := health(t, m, marn); len(got) != 0 {
		t.Errorf("moto lists %v right after the deregistration; this test says it lists nothing (no deregistration delay)", got)
	}
}

// defaultVPC is moto's default VPC.
func defaultVPC(t *testing.T, e *env) string {
	t.Helper()
	out, err := e.ec2.DescribeVpcs(t.Context(), nil)
	if err != nil || len(out.Vpcs) == 0 {
		t.Fatalf("moto's VPCs: %v %v", out, err)
	}
	return aws.ToString(out.Vpcs[0].VpcId)
}
