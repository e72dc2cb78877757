package awssim_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

// moto is the one moto_server of this package's tests, started by TestMain
// and reset at the start of every test; tests therefore do not run in
// parallel.
var moto *testenv.Moto

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) (code int) {
	tb := &mainTB{}
	defer tb.cleanup()
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(mainFatal); !ok {
				panic(r)
			}
			tb.failed = true
			code = 1
		}
	}()
	logDir, err := os.MkdirTemp("", "awssim-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tb.Cleanup(func() {
		if !tb.failed {
			os.RemoveAll(logDir)
		}
	})
	moto = testenv.StartMoto(tb, logDir)
	code = m.Run()
	return code
}

// mainTB lets TestMain use testenv.StartMoto, which takes a testing.TB: it
// implements what StartMoto uses (Helper, Fatal, Cleanup, Failed, Logf).
// The embedded nil TB makes the type satisfy the interface; calling any
// other method panics.
type mainTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
	failed   bool
}

type mainFatal struct{}

func (tb *mainTB) Helper()                           {}
func (tb *mainTB) Failed() bool                      { return tb.failed }
func (tb *mainTB) Logf(format string, args ...any)   { fmt.Fprintf(os.Stderr, format+"\n", args...) }
func (tb *mainTB) Log(args ...any)                   { fmt.Fprintln(os.Stderr, args...) }
func (tb *mainTB) Fatal(args ...any)                 { tb.Log(args...); tb.failed = true; panic(mainFatal{}) }
func (tb *mainTB) Fatalf(format string, args ...any) { tb.Fatal(fmt.Sprintf(format, args...)) }
func (tb *mainTB) Cleanup(f func()) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.cleanups = append(tb.cleanups, f)
}

func (tb *mainTB) cleanup() {
	for i := len(tb.cleanups) - 1; i >= 0; i-- {
		tb.cleanups[i]()
	}
}

// env is one test's simulator and clients.
type env struct {
	sim *awssim.Server
	as  *autoscaling.Client
	ec2 *ec2.Client
	eb  *eventbridge.Client
	sqs *sqs.Client

	mu      sync.Mutex
	running []string // OnInstanceRunning, in call order
	goneIDs []string // OnInstanceGone, in call order
}

// newEnv resets moto and starts a simulator with opts (MotoEndpoint and
// callbacks are filled in; MinHeartbeatTimeout defaults to 1 s).
func newEnv(t *testing.T, opts awssim.Options) *env {
	t.Helper()
	ctx := t.Context()
	if err := moto.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.SetAWSEnv(t)
	e := &env{}
	opts.MotoEndpoint = moto.Endpoint
	if opts.MinHeartbeatTimeout == 0 {
		opts.MinHeartbeatTimeout = time.Second
	}
	opts.OnInstanceRunning = func(_ context.Context, in awssim.Instance) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.running = append(e.running, in.ID)
	}
	opts.OnInstanceGone = func(_ context.Context, in awssim.Instance) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.goneIDs = append(e.goneIDs, in.ID)
	}
	sim, err := awssim.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(context.Background(), "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sim.Close(); err != nil {
			t.Error(err)
		}
		if err := sim.Err(); err != nil {
			t.Errorf("simulator background errors: %v", err)
		}
	})
	e.sim = sim
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.as = autoscaling.NewFromConfig(cfg, func(o *autoscaling.Options) { o.BaseEndpoint = aws.String(sim.Endpoint()) })
	e.ec2 = ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) })
	e.eb = eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) })
	e.sqs = sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) })
	return e
}

func (e *env) callbacks() (running, gone []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.running...), append([]string(nil), e.goneIDs...)
}

// createGroup creates a group with a (never resolved) launch template.
func (e *env) createGroup(t *testing.T, name string, minSize, maxSize, desired int32, hooks ...astypes.LifecycleHookSpecification) {
	t.Helper()
	_, err := e.as.CreateAutoScalingGroup(t.Context(), &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName:           aws.String(name),
		LaunchTemplate:                 &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String("nodes"), Version: aws.String("$Latest")},
		MinSize:                        aws.Int32(minSize),
		MaxSize:                        aws.Int32(maxSize),
		DesiredCapacity:                aws.Int32(desired),
		LifecycleHookSpecificationList: hooks,
	})
	if err != nil {
		t.Fatalf("CreateAutoScalingGroup: %v", err)
	}
}

func (e *env) putHook(t *testing.T, group, name, transition string, heartbeat int32, defaultResult string) {
	t.Helper()
	_, err := e.as.PutLifecycleHook(t.Context(), &autoscaling.PutLifecycleHookInput{
		AutoScalingGroupName: aws.String(group), LifecycleHookName: aws.String(name),
		LifecycleTransition: aws.String(transition), HeartbeatTimeout: aws.Int32(heartbeat),
		DefaultResult: aws.String(defaultResult),
	})
	if err != nil {
		t.Fatalf("PutLifecycleHook: %v", err)
	}
}

func (e *env) setDesired(t *testing.T, group string, n int32) {
	t.Helper()
	if _, err := e.as.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(n)}); err != nil {
		t.Fatalf("SetDesiredCapacity(%d): %v", n, err)
	}
}

// states returns each live instance's lifecycle state, from
// DescribeAutoScalingInstances.
func (e *env) states(t *testing.T) map[string]astypes.LifecycleState {
	t.Helper()
	out := map[string]astypes.LifecycleState{}
	p := autoscaling.NewDescribeAutoScalingInstancesPaginator(e.as, &autoscaling.DescribeAutoScalingInstancesInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatalf("DescribeAutoScalingInstances: %v", err)
		}
		for _, in := range page.AutoScalingInstances {
			out[aws.ToString(in.InstanceId)] = astypes.LifecycleState(aws.ToString(in.LifecycleState))
		}
	}
	return out
}

// flush waits for the simulator's announcements and EC2 calls to reach
// moto (they leave after the API call that caused them returned).
func (e *env) flush(t *testing.T) {
	t.Helper()
	if !e.sim.Flush(10 * time.Second) {
		t.Fatal("the simulator's announcements did not reach moto within 10 s")
	}
}

// ec2State returns the instance's state in moto's EC2.
func (e *env) ec2State(t *testing.T, id string) string {
	t.Helper()
	e.flush(t)
	out, err := e.ec2.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatalf("DescribeInstances(%s): %v", id, err)
	}
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			return string(in.State.Name)
		}
	}
	t.Fatalf("instance %s not found in EC2", id)
	return ""
}

// activeActions returns the simulator's active lifecycle actions.
func (e *env) activeActions() []awssim.Action {
	var out []awssim.Action
	for _, a := range e.sim.Actions() {
		if a.Active() {
			out = append(out, a)
		}
	}
	return out
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitActions waits until exactly n lifecycle actions are active and
// returns them.
func (e *env) waitActions(t *testing.T, n int) []awssim.Action {
	t.Helper()
	var got []awssim.Action
	waitFor(t, 5*time.Second, fmt.Sprintf("%d active lifecycle actions", n), func() bool {
		got = e.activeActions()
		return len(got) == n
	})
	return got
}

func (e *env) complete(t *testing.T, a awssim.Action, result string) {
	t.Helper()
	_, err := e.as.CompleteLifecycleAction(t.Context(), &autoscaling.CompleteLifecycleActionInput{
		AutoScalingGroupName: aws.String(a.GroupName), LifecycleHookName: aws.String(a.HookName),
		LifecycleActionToken: aws.String(a.Token), LifecycleActionResult: aws.String(result),
	})
	if err != nil {
		t.Fatalf("CompleteLifecycleAction(%s): %v", a.Token, err)
	}
}

// queue creates an SQS queue and returns its URL and ARN.
func (e *env) queue(t *testing.T, name string) (url, arn string) {
	t.Helper()
	out, err := e.sqs.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	attrs, err := e.sqs.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatalf("GetQueueAttributes: %v", err)
	}
	return aws.ToString(out.QueueUrl), attrs.Attributes["QueueArn"]
}

// rule creates an EventBridge rule on the default bus with pattern, and a
// target that delivers to the queue.
func (e *env) rule(t *testing.T, name, pattern, queueARN string) {
	t.Helper()
	if _, err := e.eb.PutRule(t.Context(), &eventbridge.PutRuleInput{Name: aws.String(name), EventPattern: aws.String(pattern)}); err != nil {
		t.Fatalf("PutRule %s: %v", name, err)
	}
	if _, err := e.eb.PutTargets(t.Context(), &eventbridge.PutTargetsInput{Rule: aws.String(name), Targets: []ebtypes.Target{{Id: aws.String("queue"), Arn: aws.String(queueARN)}}}); err != nil {
		t.Fatalf("PutTargets %s: %v", name, err)
	}
}

// drain receives and deletes every message now in the queue.
func (e *env) drain(t *testing.T, url string) []string {
	t.Helper()
	e.flush(t)
	var bodies []string
	for {
		out, err := e.sqs.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 0})
		if err != nil {
			t.Fatalf("ReceiveMessage: %v", err)
		}
		if len(out.Messages) == 0 {
			return bodies
		}
		for _, m := range out.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
			if _, err := e.sqs.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("DeleteMessage: %v", err)
			}
		}
	}
}

// envelope is an EventBridge event as delivered into SQS.
type envelope struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    *string         `json:"account"`
	Time       string          `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

type lifecycleDetail struct {
	LifecycleActionToken string
	AutoScalingGroupName string
	LifecycleHookName    string
	EC2InstanceId        string //nolint:revive // AWS's key
	LifecycleTransition  string
	NotificationMetadata string
	Origin               string
	Destination          string
}

func decodeEnvelope(t *testing.T, body string) envelope {
	t.Helper()
	var env envelope
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	return env
}

// lifecycleEvents decodes the lifecycle-action events among bodies.
func lifecycleEvents(t *testing.T, bodies []string) []lifecycleDetail {
	t.Helper()
	var out []lifecycleDetail
	for _, b := range bodies {
		env := decodeEnvelope(t, b)
		if env.Source != "aws.autoscaling" {
			continue
		}
		var d lifecycleDetail
		if err := json.Unmarshal(env.Detail, &d); err != nil {
			t.Fatalf("decoding detail of %s: %v", b, err)
		}
		out = append(out, d)
	}
	return out
}

// apiError asserts that err is an API error with code and message and an
// HTTP status of 400.
func wantAPIError(t *testing.T, err error, code, message string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s %q", code, message)
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("got %v, want an API error %s", err, code)
	}
	if ae.ErrorCode() != code || (message != "" && ae.ErrorMessage() != message) {
		t.Fatalf("got %s %q, want %s %q", ae.ErrorCode(), ae.ErrorMessage(), code, message)
	}
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusBadRequest {
		t.Fatalf("got %v, want HTTP 400", err)
	}
}

var (
	launching   = event.TransitionLaunching
	terminating = event.TransitionTerminating
)

func hookSpec(name, transition string, heartbeat int32, defaultResult string) astypes.LifecycleHookSpecification {
	return astypes.LifecycleHookSpecification{
		LifecycleHookName: aws.String(name), LifecycleTransition: aws.String(transition),
		HeartbeatTimeout: aws.Int32(heartbeat), DefaultResult: aws.String(defaultResult),
	}
}

func onlyKey[M ~map[K]V, K comparable, V any](t *testing.T, m M) K {
	t.Helper()
	if len(m) != 1 {
		t.Fatalf("got %d entries, want 1: %v", len(m), m)
	}
	for k := range m {
		return k
	}
	panic("unreachable")
}

func joinStates(m map[string]astypes.LifecycleState) string {
	var b strings.Builder
	for k, v := range m {
		fmt.Fprintf(&b, "%s=%s ", k, v)
	}
	return b.String()
}
