package fault

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"lifeboat.dev/lifeboat/internal/route"
	"lifeboat.dev/lifeboat/test/testenv"
)

const (
	launching   = "autoscaling:EC2_INSTANCE_LAUNCHING"
	terminating = "autoscaling:EC2_INSTANCE_TERMINATING"
)

// world is one test's AWS side and lifeboat (sc, a testenv.Scenario): a
// queue stack in moto, an Auto Scaling simulator whose instances become
// kwok nodes, fault proxies in front of SQS and Auto Scaling (rate 0 unless
// configured: they count the requests), and lifeboat running against the
// proxies.
type world struct {
	t   *testing.T
	ctx context.Context
	*testenv.Scenario
	// sqsProxy and asProxy stand between lifeboat and moto's SQS and the
	// simulator.
	sqsProxy, asProxy *testenv.FaultProxy
	lb                *testenv.Lifeboat
	// lastKill is when the test last killed lifeboat (zero: never).
	lastKill time.Time
}

type worldOptions struct {
	// flags are extra lifeboat flags (after the defaults, so they win).
	flags []string
	// kubeconfig replaces the admin kubeconfig.
	kubeconfig string
	// noLifeboat leaves lifeboat to the test (startLifeboat).
	noLifeboat bool
	// sqsFaults and asFaults configure the proxies (Target and Protocol
	// are filled in).
	sqsFaults, asFaults testenv.FaultProxyOptions
	// timeout bounds the whole test; default 4 minutes.
	timeout time.Duration
}

func newWorld(t *testing.T, o worldOptions) *world {
	t.Helper()
	sc := testenv.NewScenario(t, testenv.ScenarioOptions{
		Kube: kube, Moto: moto, LifeboatBin: lifeboatBin,
		ClusterName: clusterName, Prefix: "f", GroupLabel: "fault.lifeboat.io/group",
		Timeout: o.timeout, GroupMaxSize: 20, JoinTimeout: 60 * time.Second,
	})
	w := &world{t: t, ctx: sc.Ctx, Scenario: sc}
	var err error
	o.sqsFaults.Target, o.sqsFaults.Protocol = moto.Endpoint, testenv.ProtocolJSON
	o.asFaults.Target, o.asFaults.Protocol = sc.Sim.Endpoint(), testenv.ProtocolQuery
	if w.sqsProxy, err = testenv.StartFaultProxy(o.sqsFaults); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.sqsProxy.Close() })
	if w.asProxy, err = testenv.StartFaultProxy(o.asFaults); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.asProxy.Close() })
	if !o.noLifeboat {
		w.startLifeboat(o.kubeconfig, o.flags...)
	}
	return w
}

// startLifeboat starts lifeboat against the proxies, with a short
// visibility timeout so that a message held by a killed process comes back
// within seconds.
func (w *world) startLifeboat(kubeconfig string, extra ...string) {
	w.t.Helper()
	w.lb = w.StartLifeboat(testenv.ScenarioLifeboat{
		SQSEndpoint: w.sqsProxy.URL(), AutoScalingEndpoint: w.asProxy.URL(), Kubeconfig: kubeconfig,
		Args: append([]string{"--visibility-timeout", "10s"}, extra...),
	})
}

// restart restarts lifeboat (after a kill) and fails the test if it cannot.
func (w *world) restart() {
	w.t.Helper()
	if err := w.lb.Restart(w.ctx); err != nil {
		w.t.Fatalf("restarting lifeboat: %v", err)
	}
}

// terminate terminates an instance through Auto Scaling (decrementing the
// desired capacity): its terminate lifecycle actions start.
func (w *world) terminate(instanceID string) {
	w.t.Helper()
	if _, err := w.AS.TerminateInstanceInAutoScalingGroup(w.ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: aws.String(instanceID), ShouldDecrementDesiredCapacity: aws.Bool(true),
	}); err != nil {
		w.t.Fatalf("terminating %s: %v", instanceID, err)
	}
}

// spot publishes a Spot interruption warning for an instance.
func (w *world) spot(instanceID string, sent time.Time) {
	w.t.Helper()
	w.PutEvent(route.SourceEC2, route.SpotInterruption, sent, map[string]string{"instance-id": instanceID, "instance-action": "terminate"})
}

// send puts a raw body on the queue.
func (w *world) send(body string) {
	w.t.Helper()
	if _, err := w.SQS.SendMessage(w.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(w.Stack.QueueURL), MessageBody: aws.String(body)}); err != nil {
		w.t.Fatalf("sending a message: %v", err)
	}
}

// pods returns the pods bound to a node (terminating ones included).
func (w *world) pods(node string) []corev1.Pod {
	w.t.Helper()
	list, err := kube.Client.CoreV1().Pods(metav1.NamespaceAll).List(w.ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return list.Items
}

// lifeboatMarks lists what lifeboat leaves on a node it touched.
func lifeboatMarks(n *corev1.Node) []string {
	var out []string
	if n.Spec.Unschedulable {
		out = append(out, "unschedulable")
	}
	for _, t := range n.Spec.Taints {
		if strings.HasPrefix(t.Key, "lifeboat.io/") {
			out = append(out, "taint "+t.Key)
		}
	}
	for k := range n.Annotations {
		if strings.HasPrefix(k, "lifeboat.io/") {
			out = append(out, "annotation "+k)
		}
	}
	return out
}
