// Package e2e runs the real lifeboat binary in queue mode against the
// testbed: kube-apiserver, etcd, kube-controller-manager and kwok (package
// testenv), moto for SQS/EC2/EventBridge, and the Auto Scaling simulator
// (package awssim). Tests run one after another: they share one cluster and
// moto's default event bus.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
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

var (
	kube        *testenv.Env
	moto        *testenv.Moto
	lifeboatBin string
)

const clusterName = "e2e"

func TestMain(m *testing.M) {
	os.Exit(testenv.SuiteMain(m, "e2e", testenv.SuiteOptions{Kube: testenv.Options{NoScheduler: true}, Moto: true}, func(s *testenv.Suite) {
		kube, moto, lifeboatBin = s.Kube, s.Moto, s.Lifeboat
	}))
}

// harness is one test's world: a queue stack in moto, an Auto Scaling
// simulator whose instances become kwok nodes, and lifeboat running.
type harness struct {
	t     *testing.T
	ctx   context.Context
	stack *testenv.QueueStack
	sim   *awssim.Server
	as    *autoscaling.Client
	eb    *eventbridge.Client
	proc  *testenv.Process
	// metricsURL is lifeboat's /metrics.
	metricsURL string

	mu sync.Mutex
	// noJoin lists instances that never become nodes; joinDelay delays the
	// node of an instance (boot time).
	noJoin map[string]bool
	// foreignGroups are another cluster's: their instances never join.
	foreignGroups map[string]bool
	joinDelay     time.Duration
	nodes         map[string]string // instance ID -> node name
	gone          map[string]time.Time
	ready         map[string]time.Time // instance ID -> when its node was created (Ready)
}

type harnessOptions struct {
	// flags are extra lifeboat flags.
	flags []string
	// noLifeboat runs the scenario without lifeboat (the "before" pictures).
	noLifeboat bool
}

func newHarness(t *testing.T, o harnessOptions) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	if err := moto.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, ctx: ctx, noJoin: map[string]bool{}, foreignGroups: map[string]bool{}, nodes: map[string]string{}, gone: map[string]time.Time{}, ready: map[string]time.Time{}}
	prefix := strings.ToLower(testenv.UniqueName("lb"))
	var err error
	h.stack, err = testenv.CreateQueueStack(ctx, moto.Endpoint, prefix)
	if err != nil {
		t.Fatal(err)
	}
	h.sim, err = awssim.New(awssim.Options{
		MotoEndpoint:        moto.Endpoint,
		MinHeartbeatTimeout: time.Second,
		OnInstanceRunning:   h.instanceRunning,
		OnInstanceGone:      h.instanceGone,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.sim.Start(ctx, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.sim.Close()
		if err := h.sim.Err(); err != nil {
			t.Errorf("auto scaling simulator: %v", err)
		}
	})
	cfg := testenv.MotoAWSConfig()
	h.as = autoscaling.NewFromConfig(cfg, func(o *autoscaling.Options) { o.BaseEndpoint = aws.String(h.sim.Endpoint()) })
	h.eb = eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) })
	t.Cleanup(h.deleteNodes)
	if !o.noLifeboat {
		h.startLifeboat(o.flags)
	}
	return h
}

func (h *harness) startLifeboat(extra []string) {
	h.t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		h.t.Fatal(err)
	}
	args := append([]string{"run",
		"--queue-url", h.stack.QueueURL,
		"--aws-endpoint", "sqs=" + moto.Endpoint + ",ec2=" + moto.Endpoint + ",eventbridge=" + moto.Endpoint + ",sts=" + moto.Endpoint + ",autoscaling=" + h.sim.Endpoint(),
		"--region", "us-east-1",
		"--kubeconfig", kube.Kubeconfig,
		"--leader-elect=false",
		"--cluster-name", clusterName,
		"--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--eviction-backoff", "500ms",
		"--log-level", "debug",
	}, extra...)
	dir := h.t.TempDir()
	p, err := testenv.StartProcess("lifeboat", lifeboatBin, args, testenv.AWSEnv(), dir)
	if err != nil {
		h.t.Fatal(err)
	}
	h.proc = p
	h.metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	h.t.Cleanup(func() {
		p.Stop()
		if h.t.Failed() {
			h.t.Logf("---- lifeboat log ----\n%s", p.Tail(200))
		}
	})
	if err := testenv.WaitHTTP(h.ctx, p, nil, fmt.Sprintf("http://127.0.0.1:%d/healthz", port)); err != nil {
		h.t.Fatal(err)
	}
}

// instanceRunning makes the instance a kwok node, as a real instance joins
// the cluster when it boots (not while it sits in the warm pool).
func (h *harness) instanceRunning(ctx context.Context, inst awssim.Instance) {
	h.mu.Lock()
	skip := h.noJoin[inst.ID] || inst.InWarmPool || h.foreignGroups[inst.GroupName]
	delay := h.joinDelay
	h.mu.Unlock()
	if skip {
		return
	}
	go func() { // boot time must not hold up the simulator's callback loop
		if delay > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
		}
		// The node is Ready from the moment it is created; lifeboat can see
		// it (through its watch) before CreateNode returns here, so the
		// time is taken before the request.
		readyFrom := time.Now()
		n, err := kube.CreateNode(ctx, testenv.NodeSpec{Name: inst.PrivateDNSName, InstanceID: inst.ID, AZ: inst.AvailabilityZone,
			Labels: map[string]string{"e2e.lifeboat.io/group": inst.GroupName}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			h.t.Errorf("creating node for %s: %v", inst.ID, err)
			return
		}
		h.mu.Lock()
		h.nodes[inst.ID] = inst.PrivateDNSName
		if n != nil {
			h.ready[inst.ID] = readyFrom
		}
		h.mu.Unlock()
	}()
}

// instanceGone records when the instance stopped or terminated and removes
// its node, as the cloud controller would.
func (h *harness) instanceGone(ctx context.Context, inst awssim.Instance) {
	h.mu.Lock()
	h.gone[inst.ID] = time.Now()
	name, ok := h.nodes[inst.ID]
	h.mu.Unlock()
	if ok && inst.EC2State == "terminated" {
		_ = kube.DeleteNode(ctx, name)
	}
}

func (h *harness) deleteNodes() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, name := range h.nodes {
		_ = kube.DeleteNode(context.Background(), name)
	}
}

// createGroup creates an Auto Scaling group of this cluster with desired
// instances and waits until each has a Ready node (unless in noJoin).
func (h *harness) createGroup(name string, desired int32) []string {
	h.t.Helper()
	_, err := h.as.CreateAutoScalingGroup(h.ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String(name), MinSize: aws.Int32(0), MaxSize: aws.Int32(10), DesiredCapacity: aws.Int32(desired),
		AvailabilityZones: []string{"us-east-1a"},
		LaunchTemplate:    &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String("lt"), Version: aws.String("$Latest")},
		Tags: []astypes.Tag{{Key: aws.String("kubernetes.io/cluster/" + clusterName), Value: aws.String("owned"),
			PropagateAtLaunch: aws.Bool(true)}},
	})
	if err != nil {
		h.t.Fatalf("creating group %s: %v", name, err)
	}
	var ids []string
	h.eventually(30*time.Second, fmt.Sprintf("%d instances of %s in service with nodes", desired, name), func() bool {
		ids = ids[:0]
		for _, in := range h.sim.Instances() {
			if in.GroupName == name && in.LifecycleState == astypes.LifecycleStateInService && h.nodeName(in.ID) != "" {
				ids = append(ids, in.ID)
			}
		}
		return len(ids) == int(desired)
	})
	return ids
}

func (h *harness) putHook(group, name, transition string, timeout int32, defaultResult string) {
	h.t.Helper()
	_, err := h.as.PutLifecycleHook(h.ctx, &autoscaling.PutLifecycleHookInput{
		AutoScalingGroupName: aws.String(group), LifecycleHookName: aws.String(name),
		LifecycleTransition: aws.String(transition), HeartbeatTimeout: aws.Int32(timeout), DefaultResult: aws.String(defaultResult),
	})
	if err != nil {
		h.t.Fatalf("putting hook %s: %v", name, err)
	}
}

func (h *harness) nodeName(instanceID string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nodes[instanceID]
}

// putEvent publishes an event on moto's default bus, as AWS would.
func (h *harness) putEvent(source, detailType string, when time.Time, detail any) {
	h.t.Helper()
	b, err := json.Marshal(detail)
	if err != nil {
		h.t.Fatal(err)
	}
	out, err := h.eb.PutEvents(h.ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		Source: aws.String(source), DetailType: aws.String(detailType), Detail: aws.String(string(b)), Time: aws.Time(when),
	}}})
	if err != nil || out.FailedEntryCount > 0 {
		h.t.Fatalf("putting event %s: %v (%d failed)", detailType, err, out.FailedEntryCount)
	}
}

func (h *harness) node(name string) *corev1.Node {
	h.t.Helper()
	n, err := kube.Client.CoreV1().Nodes().Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatalf("getting node %s: %v", name, err)
	}
	return n
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// nodeEvents counts the Kubernetes Events with reason on the node (their
// count field included: the recorder aggregates repeats).
func (h *harness) nodeEvents(node, reason string) int {
	h.t.Helper()
	list, err := kube.Client.CoreV1().Events(metav1.NamespaceDefault).List(h.ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": node, "reason": reason}.String(),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		n += max(int(e.Count), 1)
	}
	return n
}

func (h *harness) podExists(ns, name string) bool {
	_, err := kube.Client.CoreV1().Pods(ns).Get(h.ctx, name, metav1.GetOptions{})
	return err == nil
}

// eventually polls cond until it holds or fails the test after d.
func (h *harness) eventually(d time.Duration, what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		select {
		case <-h.ctx.Done():
			h.t.Fatalf("waiting for %s: %v", what, h.ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// actionFor returns the lifecycle action of an instance for a transition.
func (h *harness) actionFor(instanceID, transition string) (awssim.Action, bool) {
	var found awssim.Action
	ok := false
	for _, a := range h.sim.Actions() {
		if a.InstanceID == instanceID && a.Transition == transition {
			found, ok = a, true
		}
	}
	return found, ok
}

// queueEmpty reports whether the queue holds no message, visible or in flight.
func (h *harness) queueEmpty() bool {
	out, err := sqsClient().GetQueueAttributes(h.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(h.stack.QueueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		h.t.Fatal(err)
	}
	return out.Attributes["ApproximateNumberOfMessages"] == "0" && out.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0"
}

func sqsClient() *sqs.Client {
	return sqs.NewFromConfig(testenv.MotoAWSConfig(), func(o *sqs.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) })
}

// metric sums the samples of a Prometheus metric whose label set contains
// every label given as `name="value"`, scraped from lifeboat's /metrics.
func (h *harness) metric(name string, labels ...string) float64 {
	h.t.Helper()
	resp, err := http.Get(h.metricsURL)
	if err != nil {
		h.t.Fatalf("scraping lifeboat metrics: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}
