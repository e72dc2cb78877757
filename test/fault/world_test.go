package fault

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

const (
	launching   = "autoscaling:EC2_INSTANCE_LAUNCHING"
	terminating = "autoscaling:EC2_INSTANCE_TERMINATING"
)

// world is one test's AWS side and lifeboat: a queue stack in moto, an Auto
// Scaling simulator whose instances become kwok nodes, fault proxies in
// front of SQS and Auto Scaling (rate 0 unless configured: they count the
// requests), and lifeboat running against the proxies.
type world struct {
	t     *testing.T
	ctx   context.Context
	stack *testenv.QueueStack
	sim   *awssim.Server
	as    *autoscaling.Client // the test's own, straight to the simulator
	eb    *eventbridge.Client
	sqs   *sqs.Client
	// sqsProxy and asProxy stand between lifeboat and moto's SQS and the
	// simulator.
	sqsProxy, asProxy *testenv.FaultProxy
	lb                *testenv.Lifeboat

	mu    sync.Mutex
	nodes map[string]string // instance ID -> node name
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
	if o.timeout == 0 {
		o.timeout = 4 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	t.Cleanup(cancel)
	w := &world{t: t, ctx: ctx, nodes: map[string]string{}}
	var err error
	w.stack, err = testenv.CreateQueueStack(ctx, moto.Endpoint, strings.ToLower(testenv.UniqueName("f")))
	if err != nil {
		t.Fatal(err)
	}
	w.sim, err = awssim.New(awssim.Options{
		MotoEndpoint:        moto.Endpoint,
		MinHeartbeatTimeout: time.Second,
		OnInstanceRunning:   w.instanceRunning,
		OnInstanceGone:      w.instanceGone,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.sim.Start(ctx, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = w.sim.Close()
		if err := w.sim.Err(); err != nil {
			t.Errorf("auto scaling simulator: %v", err)
		}
	})
	o.sqsFaults.Target, o.sqsFaults.Protocol = moto.Endpoint, testenv.ProtocolJSON
	o.asFaults.Target, o.asFaults.Protocol = w.sim.Endpoint(), testenv.ProtocolQuery
	if w.sqsProxy, err = testenv.StartFaultProxy(o.sqsFaults); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.sqsProxy.Close() })
	if w.asProxy, err = testenv.StartFaultProxy(o.asFaults); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.asProxy.Close() })
	cfg := testenv.MotoAWSConfig()
	w.as = autoscaling.NewFromConfig(cfg, func(o *autoscaling.Options) { o.BaseEndpoint = aws.String(w.sim.Endpoint()) })
	w.eb = eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) })
	w.sqs = sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) })
	t.Cleanup(w.deleteNodes)
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
	if kubeconfig == "" {
		kubeconfig = kube.Kubeconfig
	}
	args := append([]string{
		"--queue-url", w.stack.QueueURL,
		"--aws-endpoint", "sqs=" + w.sqsProxy.URL() + ",autoscaling=" + w.asProxy.URL() + ",ec2=" + moto.Endpoint + ",eventbridge=" + moto.Endpoint + ",sts=" + moto.Endpoint,
		"--region", "us-east-1",
		"--kubeconfig", kubeconfig,
		"--leader-elect=false",
		"--cluster-name", clusterName,
		"--eviction-backoff", "500ms",
		"--visibility-timeout", "10s",
		"--log-level", "debug",
	}, extra...)
	lb, err := testenv.StartLifeboat(w.ctx, testenv.LifeboatOptions{Bin: lifeboatBin, Args: args, Dir: w.t.TempDir()})
	if err != nil {
		w.t.Fatal(err)
	}
	w.lb = lb
	w.t.Cleanup(func() {
		lb.Stop()
		if w.t.Failed() {
			lines := lb.Logs()
			if len(lines) > 300 {
				lines = lines[len(lines)-300:]
			}
			w.t.Logf("---- lifeboat logs (%d runs), last %d lines ----\n%s", lb.Runs(), len(lines), strings.Join(lines, "\n"))
		}
	})
}

// restart restarts lifeboat (after a kill) and fails the test if it cannot.
func (w *world) restart() {
	w.t.Helper()
	if err := w.lb.Restart(w.ctx); err != nil {
		w.t.Fatalf("restarting lifeboat: %v", err)
	}
}

// instanceRunning makes the instance a kwok node, as a real instance joins
// the cluster when it boots.
func (w *world) instanceRunning(ctx context.Context, inst awssim.Instance) {
	if inst.InWarmPool {
		return
	}
	go func() { // node creation must not hold up the simulator's callbacks
		_, err := kube.CreateNode(ctx, testenv.NodeSpec{Name: inst.PrivateDNSName, InstanceID: inst.ID, AZ: inst.AvailabilityZone,
			Labels: map[string]string{"fault.lifeboat.io/group": inst.GroupName}})
		if err != nil && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil {
			w.t.Errorf("creating node for %s: %v", inst.ID, err)
			return
		}
		w.mu.Lock()
		w.nodes[inst.ID] = inst.PrivateDNSName
		w.mu.Unlock()
	}()
}

// instanceGone removes the node of a terminated instance, as the cloud
// controller would.
func (w *world) instanceGone(ctx context.Context, inst awssim.Instance) {
	w.mu.Lock()
	name, ok := w.nodes[inst.ID]
	w.mu.Unlock()
	if ok && inst.EC2State == "terminated" {
		_ = kube.DeleteNode(ctx, name)
	}
}

func (w *world) deleteNodes() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, name := range w.nodes {
		_ = kube.DeleteNode(context.Background(), name)
	}
}

func (w *world) nodeName(instanceID string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.nodes[instanceID]
}

// createGroup creates an Auto Scaling group of this cluster with n
// instances and waits until each has a Ready node.
func (w *world) createGroup(name string, n int32) []string {
	w.t.Helper()
	_, err := w.as.CreateAutoScalingGroup(w.ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String(name), MinSize: aws.Int32(0), MaxSize: aws.Int32(20), DesiredCapacity: aws.Int32(n),
		AvailabilityZones: []string{"us-east-1a"},
		LaunchTemplate:    &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String("lt"), Version: aws.String("$Latest")},
		Tags: []astypes.Tag{{Key: aws.String("kubernetes.io/cluster/" + clusterName), Value: aws.String("owned"),
			PropagateAtLaunch: aws.Bool(true)}},
	})
	if err != nil {
		w.t.Fatalf("creating group %s: %v", name, err)
	}
	var ids []string
	w.eventually(60*time.Second, fmt.Sprintf("%d instances of %s in service with nodes", n, name), func() bool {
		ids = ids[:0]
		for _, in := range w.sim.Instances() {
			if in.GroupName == name && in.LifecycleState == astypes.LifecycleStateInService && w.nodeName(in.ID) != "" {
				ids = append(ids, in.ID)
			}
		}
		return len(ids) == int(n)
	})
	return ids
}

func (w *world) putHook(group, name, transition string, timeout int32, defaultResult string) {
	w.t.Helper()
	_, err := w.as.PutLifecycleHook(w.ctx, &autoscaling.PutLifecycleHookInput{
		AutoScalingGroupName: aws.String(group), LifecycleHookName: aws.String(name),
		LifecycleTransition: aws.String(transition), HeartbeatTimeout: aws.Int32(timeout), DefaultResult: aws.String(defaultResult),
	})
	if err != nil {
		w.t.Fatalf("putting hook %s: %v", name, err)
	}
}

// terminate terminates an instance through Auto Scaling (decrementing the
// desired capacity): its terminate lifecycle actions start.
func (w *world) terminate(instanceID string) {
	w.t.Helper()
	if _, err := w.as.TerminateInstanceInAutoScalingGroup(w.ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: aws.String(instanceID), ShouldDecrementDesiredCapacity: aws.Bool(true),
	}); err != nil {
		w.t.Fatalf("terminating %s: %v", instanceID, err)
	}
}

// putEvent publishes an event on moto's default bus, as AWS would; the
// stack's rules deliver it to the queue.
func (w *world) putEvent(source, detailType string, when time.Time, detail any) {
	w.t.Helper()
	b, err := json.Marshal(detail)
	if err != nil {
		w.t.Fatal(err)
	}
	out, err := w.eb.PutEvents(w.ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		Source: aws.String(source), DetailType: aws.String(detailType), Detail: aws.String(string(b)), Time: aws.Time(when),
	}}})
	if err != nil || out.FailedEntryCount > 0 {
		w.t.Fatalf("putting event %s: %v", detailType, err)
	}
}

// spot publishes a Spot interruption warning for an instance.
func (w *world) spot(instanceID string, sent time.Time) {
	w.t.Helper()
	w.putEvent("aws.ec2", "EC2 Spot Instance Interruption Warning", sent, map[string]string{"instance-id": instanceID, "instance-action": "terminate"})
}

// send puts a raw body on the queue.
func (w *world) send(body string) {
	w.t.Helper()
	if _, err := w.sqs.SendMessage(w.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(w.stack.QueueURL), MessageBody: aws.String(body)}); err != nil {
		w.t.Fatalf("sending a message: %v", err)
	}
}

// queueCounts returns the messages waiting and in flight.
func (w *world) queueCounts() (visible, inFlight int) {
	w.t.Helper()
	out, err := w.sqs.GetQueueAttributes(w.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(w.stack.QueueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		w.t.Fatal(err)
	}
	visible, _ = strconv.Atoi(out.Attributes["ApproximateNumberOfMessages"])
	inFlight, _ = strconv.Atoi(out.Attributes["ApproximateNumberOfMessagesNotVisible"])
	return visible, inFlight
}

func (w *world) queueEmpty() bool {
	v, f := w.queueCounts()
	return v == 0 && f == 0
}

func (w *world) node(name string) (*corev1.Node, bool) {
	w.t.Helper()
	n, err := kube.Client.CoreV1().Nodes().Get(w.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		w.t.Fatalf("getting node %s: %v", name, err)
	}
	return n, true
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

// eventually polls cond until it holds, or fails the test after d.
func (w *world) eventually(d time.Duration, what string, cond func() bool) {
	w.t.Helper()
	if err := w.wait(d, cond); err != nil {
		w.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// wait polls cond every 50 ms until it holds, d passes or the test's
// context ends.
func (w *world) wait(d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v", d)
		}
		select {
		case <-w.ctx.Done():
			return w.ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// actionFor returns the last lifecycle action of an instance for a transition.
func (w *world) actionFor(instanceID, transition string) (awssim.Action, bool) {
	var found awssim.Action
	ok := false
	for _, a := range w.sim.Actions() {
		if a.InstanceID == instanceID && a.Transition == transition {
			found, ok = a, true
		}
	}
	return found, ok
}

// metric reads one of lifeboat's metrics (current run), summed over the
// samples with the given labels.
func (w *world) metric(name string, labels map[string]string) float64 {
	w.t.Helper()
	v, err := w.lb.Metric(w.ctx, name, labels)
	if err != nil {
		w.t.Fatal(err)
	}
	return v
}

// nodeEvents counts the Kubernetes Events with reason on the node (their
// count field included: the recorder aggregates repeats).
func (w *world) nodeEvents(node, reason string) int {
	w.t.Helper()
	list, err := kube.Client.CoreV1().Events(metav1.NamespaceDefault).List(w.ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": node, "reason": reason}.String(),
	})
	if err != nil {
		w.t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		n += max(int(e.Count), 1)
	}
	return n
}

func metav1GetOptions() metav1.GetOptions { return metav1.GetOptions{} }

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
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
