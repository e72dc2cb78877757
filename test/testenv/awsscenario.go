package testenv

import (
	"context"
	"encoding/json"
	"errors"
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
)

// ScenarioOptions configure NewScenario.
type ScenarioOptions struct {
	// Kube is the Kubernetes testbed the instances join as kwok nodes.
	Kube *Env
	// Moto provides SQS, EC2 and EventBridge.
	Moto *Moto
	// ResetMoto clears moto's state before the queue stack is created.
	ResetMoto bool
	// LifeboatBin is the lifeboat binary StartLifeboat runs.
	LifeboatBin string
	// ClusterName tags the groups CreateGroup makes and is lifeboat's
	// --cluster-name.
	ClusterName string
	// Prefix starts the names of the queue stack's queue and rules; a
	// random suffix is added.
	Prefix string
	// GroupLabel is the node label that carries an instance's group name.
	GroupLabel string
	// Timeout bounds Ctx; default 4 minutes.
	Timeout time.Duration
	// GroupMaxSize is the maximum size of the groups CreateGroup makes;
	// default 10.
	GroupMaxSize int32
	// JoinTimeout bounds CreateGroup's wait for the nodes; default 30 s.
	JoinTimeout time.Duration
	// Join, when set, is asked about each instance that starts running
	// outside a warm pool: whether its node joins the cluster, and after
	// what delay (boot time). Default: every node joins at once.
	Join func(inst awssim.Instance) (delay time.Duration, ok bool)
	// Machines, when set, backs the instances with real nodes (RealMachines)
	// instead of kwok nodes: an instance that starts running boots one, an
	// instance that stops or is terminated is powered off.
	Machines Machines
}

// Machines boots and powers off the nodes behind instances.
type Machines interface {
	// Boot starts the node of inst with labels and returns once it is
	// Ready, with the time it was first seen Ready.
	Boot(ctx context.Context, inst awssim.Instance, labels map[string]string) (time.Time, error)
	// PowerOff ends the node of inst at once, as a power-off would.
	PowerOff(inst awssim.Instance)
}

// Scenario is one test's AWS side of queue mode: a queue stack created in
// moto from the CloudFormation template, an Auto Scaling simulator whose
// running instances become kwok nodes (and whose terminated instances lose
// them, as with the cloud controller), clients for both, and optionally
// lifeboat (StartLifeboat). Its helpers fail the test on error.
type Scenario struct {
	// T is the test; Ctx ends with it or after ScenarioOptions.Timeout.
	T   *testing.T
	Ctx context.Context
	// Kube is ScenarioOptions.Kube.
	Kube *Env
	// Stack is the queue and its rules.
	Stack *QueueStack
	// Sim is the Auto Scaling simulator.
	Sim *awssim.Server
	// AS talks to the simulator; EB and SQS to moto.
	AS  *autoscaling.Client
	EB  *eventbridge.Client
	SQS *sqs.Client
	// Lifeboat is set by StartLifeboat.
	Lifeboat *Lifeboat

	o     ScenarioOptions
	mu    sync.Mutex
	nodes map[string]string    // instance ID -> node name
	ready map[string]time.Time // instance ID -> when its node was created
}

// NewScenario creates the queue stack and starts the simulator. Everything
// is torn down, and the nodes of the scenario's instances deleted, in t's
// cleanup.
func NewScenario(t *testing.T, o ScenarioOptions) *Scenario {
	t.Helper()
	if o.Timeout == 0 {
		o.Timeout = 4 * time.Minute
	}
	if o.GroupMaxSize == 0 {
		o.GroupMaxSize = 10
	}
	if o.JoinTimeout == 0 {
		o.JoinTimeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	t.Cleanup(cancel)
	if o.ResetMoto {
		if err := o.Moto.Reset(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s := &Scenario{T: t, Ctx: ctx, Kube: o.Kube, o: o, nodes: map[string]string{}, ready: map[string]time.Time{}}
	var err error
	s.Stack, err = CreateQueueStack(ctx, o.Moto.Endpoint, strings.ToLower(UniqueName(o.Prefix)))
	if err != nil {
		t.Fatal(err)
	}
	s.Sim, err = awssim.New(awssim.Options{
		MotoEndpoint:        o.Moto.Endpoint,
		MinHeartbeatTimeout: time.Second,
		OnInstanceRunning:   s.instanceRunning,
		OnInstanceGone:      s.instanceGone,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sim.Start(ctx, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Sim.Close()
		if err := s.Sim.Err(); err != nil {
			t.Errorf("auto scaling simulator: %v", err)
		}
	})
	cfg := MotoAWSConfig()
	s.AS = autoscaling.NewFromConfig(cfg, func(c *autoscaling.Options) { c.BaseEndpoint = aws.String(s.Sim.Endpoint()) })
	s.EB = eventbridge.NewFromConfig(cfg, func(c *eventbridge.Options) { c.BaseEndpoint = aws.String(o.Moto.Endpoint) })
	s.SQS = sqs.NewFromConfig(cfg, func(c *sqs.Options) { c.BaseEndpoint = aws.String(o.Moto.Endpoint) })
	t.Cleanup(s.deleteNodes)
	return s
}

// ScenarioLifeboat configures Scenario.StartLifeboat.
type ScenarioLifeboat struct {
	// SQSEndpoint and AutoScalingEndpoint replace moto's SQS and the
	// simulator, to put a proxy in between.
	SQSEndpoint, AutoScalingEndpoint string
	// Kubeconfig replaces the testbed's admin kubeconfig.
	Kubeconfig string
	// Args follow the defaults, so they win.
	Args []string
	// Env is added to lifeboat's environment (e.g. aws-node-termination-
	// handler's variables; the flags above win over them).
	Env []string
}

// StartLifeboat starts lifeboat in queue mode on the scenario's queue, in
// region us-east-1 with ScenarioOptions.ClusterName, no leader election, a
// 500 ms eviction backoff and debug logs, then o.Args. It sets s.Lifeboat,
// stops lifeboat in t's cleanup and prints its last log lines when t
// failed.
func (s *Scenario) StartLifeboat(o ScenarioLifeboat) *Lifeboat {
	s.T.Helper()
	if o.SQSEndpoint == "" {
		o.SQSEndpoint = s.o.Moto.Endpoint
	}
	if o.AutoScalingEndpoint == "" {
		o.AutoScalingEndpoint = s.Sim.Endpoint()
	}
	if o.Kubeconfig == "" {
		o.Kubeconfig = s.Kube.Kubeconfig
	}
	moto := s.o.Moto.Endpoint
	args := append([]string{
		"--queue-url", s.Stack.QueueURL,
		// ELBv2 is moto's; a test that needs the deregistration delay
		// names the simulator's (awssim's elbv2.go) in its Args.
		"--aws-endpoint", "sqs=" + o.SQSEndpoint + ",autoscaling=" + o.AutoScalingEndpoint + ",ec2=" + moto + ",eventbridge=" + moto + ",sts=" + moto + ",elasticloadbalancing=" + moto,
		"--region", "us-east-1",
		"--kubeconfig", o.Kubeconfig,
		"--leader-elect=false",
		"--cluster-name", s.o.ClusterName,
		"--eviction-backoff", "500ms",
		"--log-level", "debug",
	}, o.Args...)
	lb, err := StartLifeboat(s.Ctx, LifeboatOptions{Bin: s.o.LifeboatBin, Args: args, Env: o.Env, Dir: s.T.TempDir()})
	if err != nil {
		s.T.Fatal(err)
	}
	s.Lifeboat = lb
	s.T.Cleanup(func() {
		lb.Stop()
		if s.T.Failed() {
			lines := lb.Logs()
			if len(lines) > 300 {
				lines = lines[len(lines)-300:]
			}
			s.T.Logf("---- lifeboat logs (%d runs), last %d lines ----\n%s", lb.Runs(), len(lines), strings.Join(lines, "\n"))
		}
	})
	return lb
}

// instanceRunning makes the instance a kwok node, as a real instance joins
// the cluster when it boots (not while it sits in the warm pool).
func (s *Scenario) instanceRunning(ctx context.Context, inst awssim.Instance) {
	if inst.InWarmPool {
		return
	}
	var delay time.Duration
	if s.o.Join != nil {
		var ok bool
		if delay, ok = s.o.Join(inst); !ok {
			return
		}
	}
	go func() { // boot time must not hold up the simulator's callback loop
		if delay > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
		}
		if m := s.o.Machines; m != nil {
			ready, err := m.Boot(ctx, inst, map[string]string{s.o.GroupLabel: inst.GroupName})
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, ErrPoweredOff) {
					s.T.Errorf("booting the node of %s: %v", inst.ID, err)
				}
				return
			}
			s.mu.Lock()
			s.ready[inst.ID] = ready
			s.nodes[inst.ID] = inst.PrivateDNSName
			s.mu.Unlock()
			return
		}
		// The node is Ready from the moment it is created; lifeboat can see
		// it (through its watch), and act, before CreateNode returns here,
		// so the time is taken and recorded before the request.
		s.mu.Lock()
		s.ready[inst.ID] = time.Now()
		s.mu.Unlock()
		n, err := s.Kube.CreateNode(ctx, NodeSpec{Name: inst.PrivateDNSName, InstanceID: inst.ID, AZ: inst.AvailabilityZone,
			Labels: map[string]string{s.o.GroupLabel: inst.GroupName}})
		s.mu.Lock()
		defer s.mu.Unlock()
		if n == nil {
			delete(s.ready, inst.ID) // not created by this call
		}
		if err != nil && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil {
			s.T.Errorf("creating node for %s: %v", inst.ID, err)
			return
		}
		s.nodes[inst.ID] = inst.PrivateDNSName
	}()
}

// instanceGone removes the node of a terminated instance, as the cloud
// controller would.
func (s *Scenario) instanceGone(ctx context.Context, inst awssim.Instance) {
	if m := s.o.Machines; m != nil {
		m.PowerOff(inst)
	}
	s.mu.Lock()
	name, ok := s.nodes[inst.ID]
	s.mu.Unlock()
	if ok && inst.EC2State == "terminated" {
		_ = s.Kube.DeleteNode(ctx, name)
	}
}

func (s *Scenario) deleteNodes() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range s.nodes {
		_ = s.Kube.DeleteNode(context.Background(), name)
	}
}

// NodeName returns the node of an instance, or "" before it joined.
func (s *Scenario) NodeName(instanceID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodes[instanceID]
}

// ReadyAt returns when the node of an instance was created (it is Ready
// from then on), taken just before the create request; zero when the
// scenario did not create it.
func (s *Scenario) ReadyAt(instanceID string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready[instanceID]
}

// CreateGroup creates an Auto Scaling group of the cluster with desired
// instances and waits until each is InService with a node (an instance that
// ScenarioOptions.Join keeps out never counts). It returns their IDs.
func (s *Scenario) CreateGroup(name string, desired int32) []string {
	s.T.Helper()
	_, err := s.AS.CreateAutoScalingGroup(s.Ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String(name), MinSize: aws.Int32(0), MaxSize: aws.Int32(s.o.GroupMaxSize), DesiredCapacity: aws.Int32(desired),
		AvailabilityZones: []string{"us-east-1a"},
		LaunchTemplate:    &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String("lt"), Version: aws.String("$Latest")},
		Tags: []astypes.Tag{{Key: aws.String("kubernetes.io/cluster/" + s.o.ClusterName), Value: aws.String("owned"),
			PropagateAtLaunch: aws.Bool(true)}},
	})
	if err != nil {
		s.T.Fatalf("creating group %s: %v", name, err)
	}
	var ids []string
	s.Eventually(s.o.JoinTimeout, fmt.Sprintf("%d instances of %s in service with nodes", desired, name), func() bool {
		ids = ids[:0]
		for _, in := range s.Sim.Instances() {
			if in.GroupName == name && in.LifecycleState == astypes.LifecycleStateInService && s.NodeName(in.ID) != "" {
				ids = append(ids, in.ID)
			}
		}
		return len(ids) == int(desired)
	})
	return ids
}

// PutHook puts a lifecycle hook on a group.
func (s *Scenario) PutHook(group, name, transition string, timeout int32, defaultResult string) {
	s.T.Helper()
	_, err := s.AS.PutLifecycleHook(s.Ctx, &autoscaling.PutLifecycleHookInput{
		AutoScalingGroupName: aws.String(group), LifecycleHookName: aws.String(name),
		LifecycleTransition: aws.String(transition), HeartbeatTimeout: aws.Int32(timeout), DefaultResult: aws.String(defaultResult),
	})
	if err != nil {
		s.T.Fatalf("putting hook %s: %v", name, err)
	}
}

// PutEvent publishes an event on moto's default bus, as AWS would; the
// stack's rules deliver it to the queue.
func (s *Scenario) PutEvent(source, detailType string, when time.Time, detail any) {
	s.T.Helper()
	b, err := json.Marshal(detail)
	if err != nil {
		s.T.Fatal(err)
	}
	out, err := s.EB.PutEvents(s.Ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		Source: aws.String(source), DetailType: aws.String(detailType), Detail: aws.String(string(b)), Time: aws.Time(when),
	}}})
	if err != nil {
		s.T.Fatalf("putting event %s: %v", detailType, err)
	}
	if out.FailedEntryCount > 0 {
		s.T.Fatalf("putting event %s: %d failed", detailType, out.FailedEntryCount)
	}
}

// Node returns a node; it fails the test when the node does not exist.
func (s *Scenario) Node(name string) *corev1.Node {
	s.T.Helper()
	n, err := s.Kube.Client.CoreV1().Nodes().Get(s.Ctx, name, metav1.GetOptions{})
	if err != nil {
		s.T.Fatalf("getting node %s: %v", name, err)
	}
	return n
}

// LookupNode returns a node and true, or false when it does not exist.
func (s *Scenario) LookupNode(name string) (*corev1.Node, bool) {
	s.T.Helper()
	n, err := s.Kube.Client.CoreV1().Nodes().Get(s.Ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		s.T.Fatalf("getting node %s: %v", name, err)
	}
	return n, true
}

// NodeEvents counts the Kubernetes Events with reason on the node (their
// count field included: the recorder aggregates repeats).
func (s *Scenario) NodeEvents(node, reason string) int {
	s.T.Helper()
	list, err := s.Kube.Client.CoreV1().Events(metav1.NamespaceDefault).List(s.Ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": node, "reason": reason}.String(),
	})
	if err != nil {
		s.T.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		n += max(int(e.Count), 1)
	}
	return n
}

// Eventually polls cond every 50 ms until it holds; it fails the test after
// d or when Ctx ends.
func (s *Scenario) Eventually(d time.Duration, what string, cond func() bool) {
	s.T.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			s.T.Fatalf("timed out after %v waiting for %s", d, what)
		}
		select {
		case <-s.Ctx.Done():
			s.T.Fatalf("waiting for %s: %v", what, s.Ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// ActionFor returns the last lifecycle action of an instance for a
// transition.
func (s *Scenario) ActionFor(instanceID, transition string) (awssim.Action, bool) {
	var found awssim.Action
	ok := false
	for _, a := range s.Sim.Actions() {
		if a.InstanceID == instanceID && a.Transition == transition {
			found, ok = a, true
		}
	}
	return found, ok
}

// QueueCounts returns the messages waiting in the queue and in flight.
func (s *Scenario) QueueCounts() (visible, inFlight int) {
	s.T.Helper()
	out, err := s.SQS.GetQueueAttributes(s.Ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(s.Stack.QueueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		s.T.Fatal(err)
	}
	visible, _ = strconv.Atoi(out.Attributes["ApproximateNumberOfMessages"])
	inFlight, _ = strconv.Atoi(out.Attributes["ApproximateNumberOfMessagesNotVisible"])
	return visible, inFlight
}

// QueueEmpty reports whether the queue holds no message, waiting or in
// flight.
func (s *Scenario) QueueEmpty() bool {
	s.T.Helper()
	v, f := s.QueueCounts()
	return v == 0 && f == 0
}

// Metric reads one of lifeboat's metrics (current run), summed over the
// samples whose labels include every given label. Lifeboat must have been
// started with StartLifeboat.
func (s *Scenario) Metric(name string, labels map[string]string) float64 {
	s.T.Helper()
	v, err := s.Lifeboat.Metric(s.Ctx, name, labels)
	if err != nil {
		s.T.Fatal(err)
	}
	return v
}
