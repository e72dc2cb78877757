package e2e

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

// lbOwner stands in for the controller that owns a target group (the AWS
// Load Balancer Controller, the service controller): it deregisters the
// node's instance after the cordon labels the node
// node.kubernetes.io/exclude-from-external-load-balancers, after delay.
type lbOwner struct {
	mu           sync.Mutex
	deregistered time.Time
}

func (o *lbOwner) run(t *testing.T, h *harness, c *elbv2.Client, arn, node, id string, delay time.Duration) {
	go func() {
		for h.Ctx.Err() == nil {
			n, err := kube.Client.CoreV1().Nodes().Get(h.Ctx, node, metav1.GetOptions{})
			if err == nil && n.Labels["node.kubernetes.io/exclude-from-external-load-balancers"] != "" {
				time.Sleep(delay)
				_, err := c.DeregisterTargets(h.Ctx, &elbv2.DeregisterTargetsInput{TargetGroupArn: aws.String(arn),
					Targets: []elbtypes.TargetDescription{{Id: aws.String(id)}}})
				if err != nil && h.Ctx.Err() == nil {
					t.Errorf("the owner's deregistration: %v", err)
				}
				o.mu.Lock()
				o.deregistered = time.Now()
				o.mu.Unlock()
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
}

func (o *lbOwner) at() time.Time { o.mu.Lock(); defer o.mu.Unlock(); return o.deregistered }

// targetStates samples the instance's state in the target group every
// 100 ms ("" when it is no longer listed), so that a test can tell what it
// was when the action was completed (the instance's termination, right
// after, changes it).
type targetStates struct {
	mu      sync.Mutex
	samples []targetSample
}

type targetSample struct {
	at    time.Time
	state string
}

func (s *targetStates) run(t *testing.T, ctx context.Context, c *elbv2.Client, arn, id string) {
	go func() {
		for ctx.Err() == nil {
			at := time.Now()
			out, err := c.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: aws.String(arn)})
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("sampling the target's health: %v", err)
				}
				return
			}
			state := ""
			for _, d := range out.TargetHealthDescriptions {
				if aws.ToString(d.Target.Id) == id {
					state = string(d.TargetHealth.State)
				}
			}
			s.mu.Lock()
			s.samples = append(s.samples, targetSample{at, state})
			s.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
}

// at is the last state sampled at or before t.
func (s *targetStates) at(t time.Time) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.samples) - 1; i >= 0; i-- {
		if !s.samples[i].at.After(t) {
			return s.samples[i].state, true
		}
	}
	return "", false
}

// Issue 26 item 4: a terminate action's CONTINUE waits until no ELBv2
// target group holds the instance. The deregistration delay (draining) is
// the Auto Scaling simulator's ELBv2 extension (moto 5.2 has none: a
// deregistered target is gone at once); a deregistration that simply comes
// late is moto's own ELBv2.
func TestLoadBalancersBeforeContinue(t *testing.T) {
	const (
		exclude = "--exclude-from-load-balancers"
		wait    = "--wait-for-load-balancers"
		never   = -1
	)
	for _, tc := range []struct {
		name  string
		sim   bool          // ELBv2 from the simulator's extension, else moto
		delay int32         // deregistration delay, s (simulator)
		owner time.Duration // the owner deregisters this long after the label; never
		flags []string
		want  string // harm, drained or cut-short
		hook  int32  // heartbeat timeout, s
	}{
		{"harm: without the wait, CONTINUE while the target is healthy: nobody took it out (moto)", false, 0, never, nil, "healthy", 30},
		{"harm: without the wait, CONTINUE while the target drains (simulator)", true, 4, 0, []string{exclude}, "draining", 30},
		{"CONTINUE once the deregistration delay has passed (simulator)", true, 4, 0, []string{exclude, wait}, "drained", 30},
		{"CONTINUE once the owner deregistered the target (moto)", false, 0, 3 * time.Second, []string{exclude, wait}, "drained", 30},
		{"the deadline cuts the wait short (simulator)", true, 0, never, []string{exclude, wait, "--heartbeat-until", "4s", "--deadline-margin", "1s"}, "cut-short", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{noLifeboat: true})
			endpoint := moto.Endpoint
			args := tc.flags
			if tc.sim {
				endpoint = h.Sim.Endpoint()
				args = append([]string{"--aws-endpoint", "elasticloadbalancing=" + endpoint}, args...)
			}
			h.StartLifeboat(testenv.ScenarioLifeboat{Args: args})
			cfg := testenv.MotoAWSConfig()
			lb := elbv2.NewFromConfig(cfg, func(o *elbv2.Options) { o.BaseEndpoint = aws.String(endpoint) })
			vpcs, err := ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) }).DescribeVpcs(h.Ctx, &ec2.DescribeVpcsInput{})
			if err != nil || len(vpcs.Vpcs) == 0 {
				t.Fatalf("moto's default VPC: %v", err)
			}

			group := "elb-" + testenv.UniqueName("g")
			id := h.CreateGroup(group, 1)[0]
			node := h.NodeName(id)
			h.PutHook(group, "drain", terminating, tc.hook, "ABANDON")
			// A pod whose shutdown takes 2 s: the drain takes that long, as
			// the owner deregisters the target at the cordon.
			ns := kube.Namespace(t)
			if _, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Name: testenv.UniqueName("web"), Node: node, ShutdownAfter: 2 * time.Second}); err != nil {
				t.Fatal(err)
			}
			tg, err := lb.CreateTargetGroup(h.Ctx, &elbv2.CreateTargetGroupInput{Name: aws.String(testenv.UniqueName("tg")),
				Protocol: elbtypes.ProtocolEnumTcp, Port: aws.Int32(30080), VpcId: vpcs.Vpcs[0].VpcId, TargetType: elbtypes.TargetTypeEnumInstance})
			if err != nil {
				t.Fatal(err)
			}
			arn := aws.ToString(tg.TargetGroups[0].TargetGroupArn)
			if tc.sim {
				if _, err := lb.ModifyTargetGroupAttributes(h.Ctx, &elbv2.ModifyTargetGroupAttributesInput{TargetGroupArn: aws.String(arn),
					Attributes: []elbtypes.TargetGroupAttribute{{Key: aws.String("deregistration_delay.timeout_seconds"), Value: aws.String(itoa32(tc.delay))}}}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := lb.RegisterTargets(h.Ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: aws.String(arn),
				Targets: []elbtypes.TargetDescription{{Id: aws.String(id)}}}); err != nil {
				t.Fatal(err)
			}
			states := &targetStates{}
			states.run(t, h.Ctx, lb, arn, id)
			owner := &lbOwner{}
			if tc.owner != never {
				owner.run(t, h, lb, arn, node, id, tc.owner)
			}

			if _, err := h.AS.SetDesiredCapacity(h.Ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(0)}); err != nil {
				t.Fatal(err)
			}
			var a awssim.Action
			h.Eventually(30*time.Second, "the terminate action to end", func() bool {
				var ok bool
				a, ok = h.ActionFor(id, terminating)
				return ok && !a.Active()
			})
			state, ok := states.at(a.Completed) // when lifeboat completed the action
			if !ok {
				t.Fatal("no sample of the target's state before CONTINUE")
			}
			if a.CompletedBy != awssim.CompletedByAPI || a.Result != "CONTINUE" {
				t.Fatalf("action ended by %s with %s; want lifeboat's CONTINUE", a.CompletedBy, a.Result)
			}
			dereg := owner.at()
			switch tc.want {
			case "healthy", "draining":
				// The instance goes while the load balancer still sends it
				// requests or holds its connections.
				if state != tc.want {
					t.Errorf("the target was %q at CONTINUE; the harm this case shows is a %s one", state, tc.want)
				}
				t.Logf("without the wait: CONTINUE with the target %s", state)
			case "drained":
				if state != "" {
					t.Errorf("the target group still listed the instance (%s) at CONTINUE", state)
				}
				if dereg.IsZero() {
					t.Fatal("CONTINUE before the owner deregistered the target")
				}
				gone := dereg.Add(time.Duration(tc.delay) * time.Second)
				if a.Completed.Before(gone) {
					t.Errorf("CONTINUE at %v, before the target was gone at %v", a.Completed, gone)
				}
				// One poll (5 s) and the completion.
				if lag := a.Completed.Sub(gone); lag > 7*time.Second {
					t.Errorf("CONTINUE %v after the target was gone; want ≤ 7 s", lag)
				}
				t.Logf("deregistered -> gone %ds -> CONTINUE %v later", tc.delay, a.Completed.Sub(gone).Round(time.Millisecond))
				h.Eventually(5*time.Second, "a LoadBalancersDrained event", func() bool { return h.NodeEvents(node, "LoadBalancersDrained") > 0 })
				if h.NodeEvents(node, "WaitingForLoadBalancers") == 0 {
					t.Error("no WaitingForLoadBalancers event")
				}
				if v := h.Metric("lifeboat_load_balancer_waits_total", map[string]string{"result": "drained"}); v != 1 {
					t.Errorf("lifeboat_load_balancer_waits_total{result=drained} = %v, want 1", v)
				}
			case "cut-short":
				if state != "healthy" {
					t.Errorf("the target was %q at CONTINUE, want still healthy (nobody took it out)", state)
				}
				h.Eventually(5*time.Second, "a LoadBalancersNotDrained warning", func() bool { return h.NodeEvents(node, "LoadBalancersNotDrained") > 0 })
				if v := h.Metric("lifeboat_load_balancer_waits_total", map[string]string{"result": "cut-short"}); v != 1 {
					t.Errorf("lifeboat_load_balancer_waits_total{result=cut-short} = %v, want 1", v)
				}
				if !strings.Contains(h.Lifeboat.Process().Tail(400), id+":30080 healthy") {
					t.Errorf("lifeboat's log does not name the target %s:30080 healthy", id)
				}
			}
		})
	}
}

func itoa32(n int32) string { return strconv.Itoa(int(n)) }
