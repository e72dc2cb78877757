package realnode

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

const (
	clusterName = "realnode"
	groupLabel  = "realnode.lifeboat.io/group"
)

// world is one queue-mode scenario on real nodes: the queue stack in moto,
// the Auto Scaling simulator whose instances boot real kubelets and are
// powered off when they stop or terminate, a namespace and a directory for
// the workloads' records, and lifeboat unless the scenario shows the harm
// without it.
type world struct {
	*testenv.Scenario
	machines *testenv.RealMachines
	ns       string
	records  string
}

type worldOptions struct {
	// lifeboat starts lifeboat (queue mode) with flags.
	lifeboat bool
	flags    []string
	// bootDelay is how long an instance boots before its kubelet starts.
	bootDelay time.Duration
	// join, when set, is testenv.ScenarioOptions.Join: whether and after
	// what delay an instance's node boots, per instance.
	join func(inst awssim.Instance) (delay time.Duration, ok bool)
	// timeout bounds the world's context; default 3 minutes.
	timeout time.Duration
}

func newWorld(t *testing.T, o worldOptions) *world {
	t.Helper()
	if o.timeout == 0 {
		o.timeout = 3 * time.Minute
	}
	w := &world{machines: &testenv.RealMachines{Env: suite.Kube, Images: suite.Images, BootDelay: o.bootDelay}}
	t.Cleanup(w.machines.Close)
	w.Scenario = testenv.NewScenario(t, testenv.ScenarioOptions{
		Kube: suite.Kube, Moto: suite.Moto, ResetMoto: true, LifeboatBin: suite.Lifeboat,
		ClusterName: clusterName, Prefix: "rn", GroupLabel: groupLabel,
		GroupMaxSize: 4, JoinTimeout: 60 * time.Second, Timeout: o.timeout,
		Machines: w.machines, Join: o.join,
	})
	w.ns = suite.Kube.Namespace(t)
	w.records = t.TempDir()
	if o.lifeboat {
		w.StartLifeboat(testenv.ScenarioLifeboat{Args: o.flags})
	}
	return w
}

// workload returns the spec of a workload pod on the node of an instance.
func (w *world) workload(name, instanceID string, preStop, shutdown, grace time.Duration) testenv.WorkloadSpec {
	return testenv.WorkloadSpec{Namespace: w.ns, Name: name, Node: w.NodeName(instanceID), RecordDir: w.records,
		PreStop: preStop, Shutdown: shutdown, Grace: grace}
}

// terminate terminates an instance through the simulator (decrementing the
// group, so no replacement boots); its node is powered off.
func (w *world) terminate(instanceID string) {
	w.T.Helper()
	_, err := w.AS.TerminateInstanceInAutoScalingGroup(w.Ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: aws.String(instanceID), ShouldDecrementDesiredCapacity: aws.Bool(true)})
	if err != nil {
		w.T.Fatalf("terminating %s: %v", instanceID, err)
	}
	w.Eventually(10*time.Second, "the node of "+instanceID+" powered off", func() bool {
		_, ok := w.machines.PoweredOff(instanceID)
		return ok
	})
}

// breakSpotRule replaces the Spot rule's pattern by the one from the field
// report, whose detail-type has a typo (F3): it matches nothing AWS sends.
func (w *world) breakSpotRule() {
	w.T.Helper()
	for _, name := range w.Stack.Rules {
		out, err := w.EB.DescribeRule(w.Ctx, &eventbridge.DescribeRuleInput{Name: aws.String(name)})
		if err != nil {
			w.T.Fatal(err)
		}
		pattern := aws.ToString(out.EventPattern)
		if !strings.Contains(pattern, "EC2 Spot Instance Interruption Warning") {
			continue
		}
		pattern = strings.ReplaceAll(pattern, "EC2 Spot Instance Interruption Warning", "EC2 Spot Interruption Warning")
		if _, err := w.EB.PutRule(w.Ctx, &eventbridge.PutRuleInput{Name: aws.String(name), EventPattern: aws.String(pattern), State: ebtypes.RuleStateEnabled}); err != nil {
			w.T.Fatal(err)
		}
		return
	}
	w.T.Fatalf("no rule of the stack matches Spot interruption warnings (%v)", w.Stack.Rules)
}

// check runs `lifeboat check` with the world's flags and returns its
// output.
func (w *world) check() string {
	w.T.Helper()
	moto := suite.Moto.Endpoint
	ctx, cancel := context.WithTimeout(w.Ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, suite.Lifeboat, "check",
		"--queue-url", w.Stack.QueueURL,
		"--aws-endpoint", "sqs="+moto+",ec2="+moto+",eventbridge="+moto+",sts="+moto+",autoscaling="+w.Sim.Endpoint(),
		"--region", "us-east-1", "--kubeconfig", suite.Kube.Kubeconfig, "--cluster-name", clusterName, "--pod-namespace", w.ns)
	cmd.Env = append(cmd.Environ(), testenv.AWSEnv()...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil { // a failed check exits non-zero
		fmt.Fprintf(&out, "\n(lifeboat check: %v)", err)
	}
	return out.String()
}

// assertCutOff checks, from the workload's own record, that it never got
// its shutdown: no preStop, no SIGTERM, the process killed while running.
func assertCutOff(t *testing.T, rec testenv.WorkloadRecord, s testenv.WorkloadSpec) {
	t.Helper()
	if rec.Count(testenv.WorkloadStarted) == 0 {
		t.Fatalf("%s never started (record: %s)", s.Name, rec)
	}
	if n := rec.Count(testenv.WorkloadPreStopBegin); n != 0 {
		t.Errorf("%s: preStop ran (%d times); the harm is that it never does (record: %s)", s.Name, n, rec)
	}
	if rec.Finished() {
		t.Errorf("%s finished its shutdown; the harm is that it is cut off (record: %s)", s.Name, rec)
	}
}
