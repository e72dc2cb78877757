// Package awssim is a wire-compatible simulator of the Amazon EC2 Auto Scaling
// API (AWS query protocol, version 2011-01-01) for lifeboat's tests.
//
// moto implements EC2, EventBridge and SQS well enough, but its Auto Scaling
// has no lifecycle actions and no warm pools, which are exactly what lifeboat
// has to get right. awssim owns the Auto Scaling model (groups, lifecycle
// hooks, lifecycle actions and their timeouts, instance protection, warm
// pools) and uses moto for everything else: instances are run, stopped,
// started and terminated in moto's EC2, lifecycle-action and instance
// state-change events go through moto's EventBridge (so real rules and their
// patterns decide what reaches a queue), and hooks whose notification target
// is an SQS queue get AWS's flat notification body through moto's SQS.
//
// The same endpoint serves a small Elastic Load Balancing v2 model (target
// groups, registrations and their deregistration delay, which moto's ELBv2
// does not model): see elbv2.go.
//
// It is test infrastructure: nothing under internal/ or cmd/ may import it.
// It must not be lenient where AWS is strict: a test that passes against the
// simulator should not fail against AWS because the simulator accepted
// something AWS refuses. Where the simulator deliberately differs from AWS
// (Options.MinHeartbeatTimeout, instant state transitions) the field or
// function says so.
//
// # What is modelled
//
//   - Groups: CreateAutoScalingGroup (with LifecycleHookSpecificationList),
//     UpdateAutoScalingGroup, SetDesiredCapacity, DeleteAutoScalingGroup,
//     DescribeAutoScalingGroups, DescribeAutoScalingInstances,
//     TerminateInstanceInAutoScalingGroup, SetInstanceProtection. The group
//     keeps its desired capacity: instances that leave it (scale-in,
//     abandoned launches, explicit termination without decrement) are
//     replaced, from the warm pool first.
//   - Lifecycle hooks and actions: PutLifecycleHook, DescribeLifecycleHooks
//     (with GlobalTimeout), DeleteLifecycleHook, CompleteLifecycleAction (by
//     token or instance ID), RecordLifecycleActionHeartbeat. An action times
//     out after HeartbeatTimeout with the hook's DefaultResult; a heartbeat
//     restarts that timer; nothing extends an action past its global timeout,
//     min(100 × HeartbeatTimeout, 48 h). Hooks apply to transitions that start
//     after the hook exists: an instance already launched (or already
//     terminating) when a hook is added never gets an action for that
//     transition, and completing one by instance ID answers AWS's
//     "No active Lifecycle Action found with instance ID …". It does get
//     actions for its later transitions (leaving the warm pool, being
//     terminated), which is how failure F1 happens.
//   - Warm pools: PutWarmPool, DescribeWarmPool, DeleteWarmPool with
//     MinSize, MaxGroupPreparedCapacity, PoolState and ReuseOnScaleIn.
//
// How the transitions go (each is instant unless a lifecycle action waits):
//
//   - Launch into the group: RunInstances, Pending, Pending:Wait (launch
//     actions, Origin EC2, Destination AutoScalingGroup), InService.
//   - Launch into the warm pool: Warmed:Pending, Warmed:Pending:Wait (EC2 →
//     WarmPool), then Warmed:Stopped / Warmed:Running / Warmed:Hibernated
//     (stopped in EC2 unless Running). The pool's size is
//     max(MinSize, MaxGroupPreparedCapacity − desired), where
//     MaxGroupPreparedCapacity defaults to the group's MaxSize.
//   - Scale-out takes the oldest warm instance first (started in EC2 if
//     stopped): Pending, Pending:Wait (WarmPool → AutoScalingGroup),
//     InService; the pool is refilled.
//   - Scale-in picks InService instances not protected from scale-in,
//     oldest first (instances still launching are picked once InService;
//     protected ones are never picked, so the group may stay above its
//     desired capacity): Terminating, Terminating:Wait (AutoScalingGroup →
//     EC2), Terminated. With ReuseOnScaleIn the destination is WarmPool and
//     the instance goes back to the pool's state without a second launch
//     action.
//   - TerminateInstanceInAutoScalingGroup always terminates (destination
//     EC2), never returns the instance to the pool.
//   - A warm instance that is terminated (pool shrinking, explicit
//     termination) runs the terminate hooks with Origin WarmPool and
//     Destination EC2 from Warmed:Terminating:Wait. AWS documents no example
//     for this case; the values are the simulator's choice.
//   - ABANDON on a launch action (given, or by default on timeout)
//     terminates the instance at once, without terminate actions, and the
//     group launches a replacement. ABANDON or CONTINUE on a terminate
//     action lets the instance go on. With several hooks for one transition
//     all their actions start together; the instance goes on when all have
//     continued, or as soon as one abandons (the others end with it).
//   - Every lifecycle action is announced on EventBridge; a hook whose
//     NotificationTargetARN is an SQS queue also gets the direct notification
//     (and autoscaling:TEST_NOTIFICATION when the hook is put with that
//     target), as AWS sends both. EC2 state changes (pending, running,
//     stopping, stopped, shutting-down, terminated) are announced as
//     "EC2 Instance State-change Notification". Announcements leave after
//     the request that caused them has been answered (as in AWS, where they
//     arrive a moment later), in order for one instance and in parallel
//     across instances; Flush waits for them. AWS announces an action
//     within about a second; when moto needs longer (bursts of hundreds of
//     actions on a loaded machine), the action does not time out before it
//     was announced and the whole seconds of that delay are added to its
//     deadlines, so moto's lag does not eat the consumer's heartbeat
//     timeout (Action.Announced tells when it left).
//
// # Error messages
//
// These ValidationError texts are AWS's, verbatim: "No active Lifecycle
// Action found with token …" / "… with instance ID …", the SetDesiredCapacity
// bounds, TerminateInstanceInAutoScalingGroup's min-size refusal, the missing
// launch template, AlreadyExists and InvalidAction. Other messages are the
// simulator's own; code under test may match the error code, not their text.
//
// # What is not modelled
//
// Scaling policies, scheduled actions, instance refresh, standby, detach and
// attach, health checks, cooldowns, availability-zone balancing, launch
// templates (they are recorded and echoed, never resolved: every instance is
// run from Options.ImageID and Options.InstanceType), mixed instances,
// scaling-activity history and its "EC2 Instance Launch Successful" style
// events, SNS notification targets (refused with a ValidationError so a test
// cannot silently rely on them), Filters on DescribeAutoScalingGroups
// (refused likewise) and IAM (RoleARN is recorded, never checked).
// Transitions that take minutes in AWS (booting, stopping) are instant.
//
// # Deviations of moto that matter here (moto 5.2)
//
//   - moto accepts PutEvents entries whose Source starts with "aws." (AWS
//     refuses them for callers other than the service itself). The simulator
//     relies on this to publish as aws.autoscaling and aws.ec2.
//   - moto delivers a rule's event to an SQS target with its default input
//     template, which drops the "account" key of the envelope and truncates
//     "time" to whole seconds. Consumers must treat "account" as optional (AWS
//     sends it) and must not depend on sub-second event times. "id",
//     "version", "detail-type", "source", "region", "resources" and "detail"
//     arrive as AWS sends them.
//   - moto does not check the queue policy before a rule delivers to a queue,
//     so a missing events.amazonaws.com permission is not caught here.
//   - moto's StopInstances ignores Hibernate; Warmed:Hibernated instances are
//     plainly stopped in moto's EC2.
package awssim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"k8s.io/utils/clock"
)

// AWS's limits on lifecycle hooks.
const (
	// AWSMinHeartbeatTimeout is the smallest HeartbeatTimeout AWS accepts.
	AWSMinHeartbeatTimeout = 30 * time.Second
	// MaxHeartbeatTimeout is the largest HeartbeatTimeout AWS accepts.
	MaxHeartbeatTimeout = 7200 * time.Second
	// DefaultHeartbeatTimeout is AWS's HeartbeatTimeout when none is given.
	DefaultHeartbeatTimeout = 3600 * time.Second
	// MaxGlobalTimeout caps a lifecycle action's life: the global timeout is
	// min(100 × HeartbeatTimeout, 48 h).
	MaxGlobalTimeout = 48 * time.Hour
)

// Defaults for Options.
const (
	DefaultRegion       = "us-east-1"
	DefaultAccountID    = "123456789012" // moto's default account
	DefaultImageID      = "ami-760aaa0f" // an Amazon Linux AMI moto knows
	DefaultInstanceType = "t3.medium"
)

// Options configure a Server. Only MotoEndpoint is required.
type Options struct {
	// MotoEndpoint is the URL of the moto_server that holds EC2, EventBridge
	// and SQS (testenv.Moto.Endpoint).
	MotoEndpoint string
	// Region and AccountID appear in ARNs and notifications. They must match
	// moto's (defaults DefaultRegion and DefaultAccountID) for queue ARNs to
	// resolve.
	Region    string
	AccountID string
	// Clock drives lifecycle-action timeouts and event times; default the
	// real clock. Tests may pass a k8s.io/utils/clock/testing.FakeClock.
	Clock clock.Clock
	// MinHeartbeatTimeout is the smallest HeartbeatTimeout PutLifecycleHook
	// accepts. Default (zero) is AWS's 30 s. Setting it lower (tests use 1 s)
	// is a simulator-only allowance so that a scenario can exercise hook
	// timeouts in seconds with the real clock; AWS refuses anything below
	// 30 s, so production code and CloudFormation must never rely on it.
	MinHeartbeatTimeout time.Duration
	// ImageID and InstanceType are used for every RunInstances call.
	ImageID      string
	InstanceType string
	// OnInstanceRunning is called when an instance starts running in EC2:
	// at launch (before its launch lifecycle actions, as a real instance
	// boots while in Pending:Wait) and when a stopped warm-pool instance is
	// started to enter service. A test uses it to create the Kubernetes Node.
	//
	// OnInstanceGone is called when a running instance stops (entering a
	// Warmed:Stopped or Warmed:Hibernated pool) or is terminated.
	//
	// Both are called in order from one goroutine owned by the Server, never
	// while the Server holds its lock, so they may call the Server and its
	// API. ctx ends when the Server is closed; callbacks still queued then
	// are dropped.
	OnInstanceRunning func(ctx context.Context, inst Instance)
	OnInstanceGone    func(ctx context.Context, inst Instance)
	// Logger receives failures of background work (timeouts whose moto calls
	// failed); default: discard. Err reports the same failures.
	Logger *slog.Logger
}

// Server is the simulator. It is an http.Handler for the Auto Scaling query
// API; Start also serves it on a listener. All methods are safe for
// concurrent use.
type Server struct {
	opts   Options
	clock  clock.Clock
	log    *slog.Logger
	ec2    *ec2.Client
	events *eventbridge.Client
	sqs    *sqs.Client

	ctx    context.Context // ends at Close; bounds moto calls and callbacks
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{} // pokes the timeout loop after a deadline changed

	handlers map[string]handlerFunc // by Action; read-only after New

	elb elbModel // the ELBv2 extension (elbv2.go), under its own lock

	// mu guards the model and is held for a whole operation, so operations
	// are atomic and ordered. Only RunInstances (whose answer the model
	// needs) and a test notification (which validates a target) reach moto
	// under it; announcements and the other EC2 calls go through outbox.
	mu        sync.Mutex
	groups    map[string]*group
	instances map[string]*instance
	actions   []*action // every action ever started, in start order
	seq       uint64
	bgErrs    []error

	outbox *outbox

	urlMu     sync.Mutex
	queueURLs map[string]string // SQS ARN -> URL

	callsMu sync.Mutex
	calls   map[string]int

	cbMu    sync.Mutex
	cbQueue []func(context.Context)
	cbWake  chan struct{}

	httpMu   sync.Mutex
	httpSrv  *http.Server
	endpoint string
	closed   bool
}

// New returns a Server whose background work (lifecycle-action timeouts,
// callbacks) runs until Close. It makes no network call.
func New(opts Options) (*Server, error) {
	if opts.MotoEndpoint == "" {
		return nil, errors.New("awssim: Options.MotoEndpoint is required")
	}
	if opts.Region == "" {
		opts.Region = DefaultRegion
	}
	if opts.AccountID == "" {
		opts.AccountID = DefaultAccountID
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.MinHeartbeatTimeout == 0 {
		opts.MinHeartbeatTimeout = AWSMinHeartbeatTimeout
	}
	if opts.MinHeartbeatTimeout < time.Second || opts.MinHeartbeatTimeout%time.Second != 0 {
		return nil, fmt.Errorf("awssim: Options.MinHeartbeatTimeout %v must be a whole number of seconds, at least 1 s", opts.MinHeartbeatTimeout)
	}
	if opts.ImageID == "" {
		opts.ImageID = DefaultImageID
	}
	if opts.InstanceType == "" {
		opts.InstanceType = DefaultInstanceType
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cfg := aws.Config{
		Region:      opts.Region,
		Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", ""),
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts:      opts,
		clock:     opts.Clock,
		log:       opts.Logger,
		ec2:       ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(opts.MotoEndpoint) }),
		events:    eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(opts.MotoEndpoint) }),
		sqs:       sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(opts.MotoEndpoint) }),
		ctx:       ctx,
		cancel:    cancel,
		wake:      make(chan struct{}, 1),
		groups:    map[string]*group{},
		instances: map[string]*instance{},
		queueURLs: map[string]string{},
		calls:     map[string]int{},
		cbWake:    make(chan struct{}, 1),
		outbox:    newOutbox(),
	}
	s.handlers = s.handlerTable()
	s.wg.Go(s.timeoutLoop)
	s.wg.Go(s.callbackLoop)
	for i := range outboxLanes {
		s.wg.Go(func() { s.outbox.run(s.ctx, i, s.recordErr) })
	}
	return s, nil
}

// Start serves the API on addr (for example "127.0.0.1:0") until ctx ends
// or Close is called. Endpoint returns the URL to use as the client's
// BaseEndpoint.
func (s *Server) Start(ctx context.Context, addr string) error {
	s.httpMu.Lock()
	defer s.httpMu.Unlock()
	if s.closed {
		return errors.New("awssim: Start after Close")
	}
	if s.httpSrv != nil {
		return errors.New("awssim: already started")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("awssim: listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.httpSrv = srv
	s.endpoint = "http://" + ln.Addr().String()
	s.wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.recordErr(fmt.Errorf("serving: %w", err))
		}
	})
	s.wg.Go(func() {
		select {
		case <-ctx.Done():
		case <-s.ctx.Done():
		}
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	})
	return nil
}

// Endpoint is the URL the Server listens on after Start ("" before).
func (s *Server) Endpoint() string {
	s.httpMu.Lock()
	defer s.httpMu.Unlock()
	return s.endpoint
}

// Close stops serving, lets the announcements already decided reach moto
// (for at most closeFlush), stops the timeout loop and the callbacks (queued
// callbacks are dropped) and waits for every goroutine of the Server. The
// model stays readable. Close is idempotent.
func (s *Server) Close() error {
	s.httpMu.Lock()
	s.closed = true
	s.httpMu.Unlock()
	s.outbox.flush(closeFlush)
	s.cancel()
	s.wg.Wait()
	return nil
}

// closeFlush bounds how long Close waits for queued announcements.
const closeFlush = 10 * time.Second

// Flush waits until every announcement and EC2 call decided so far has
// reached moto, or for at most max; it reports whether all did. The model
// (Instance, Actions) is up to date as soon as an API call returns; moto
// follows shortly after.
func (s *Server) Flush(max time.Duration) bool {
	return s.outbox.flush(max)
}

// Err returns the failures of background work so far (moto calls made when
// a lifecycle action timed out), or nil. A test should check it at the end.
func (s *Server) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.bgErrs...)
}

func (s *Server) recordErr(err error) {
	s.log.Error("awssim background work failed", "err", err)
	s.mu.Lock()
	s.bgErrs = append(s.bgErrs, err)
	s.mu.Unlock()
}

// Calls returns how many requests the API received for action (for example
// "CompleteLifecycleAction"), failed ones included.
func (s *Server) Calls(action string) int {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	return s.calls[action]
}

// CallCounts returns the number of requests by action, failed ones included.
func (s *Server) CallCounts() map[string]int {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	out := make(map[string]int, len(s.calls))
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

func (s *Server) countCall(action string) {
	s.callsMu.Lock()
	s.calls[action]++
	s.callsMu.Unlock()
}

// Instance is a snapshot of one instance the simulator launched.
type Instance struct {
	ID        string
	GroupName string
	// LifecycleState is the Auto Scaling state (Pending:Wait, InService,
	// Warmed:Stopped, Terminated, …).
	LifecycleState types.LifecycleState
	// EC2State is the EC2 state the simulator last put the instance in:
	// "running", "stopped" or "terminated".
	EC2State             string
	PrivateDNSName       string
	PrivateIPAddress     string
	AvailabilityZone     string
	InstanceType         string
	ProtectedFromScaleIn bool
	// InWarmPool is true while the instance belongs to the warm pool.
	InWarmPool bool
	// Launched is the simulator clock's time at RunInstances.
	Launched time.Time
}

// Instance returns the instance with that ID, terminated ones included.
func (s *Server) Instance(id string) (Instance, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[id]
	if !ok {
		return Instance{}, false
	}
	return in.snapshot(), true
}

// Instances returns every instance the simulator launched, terminated ones
// included, in launch order.
func (s *Server) Instances() []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Instance, 0, len(s.instances))
	for _, in := range s.sortedInstances() {
		out = append(out, in.snapshot())
	}
	return out
}

// Completion says how a lifecycle action ended.
type Completion string

const (
	// CompletedByAPI: a CompleteLifecycleAction call ended it.
	CompletedByAPI Completion = "CompleteLifecycleAction"
	// CompletedByHeartbeatTimeout: no completion or heartbeat came within
	// HeartbeatTimeout; the hook's DefaultResult applied.
	CompletedByHeartbeatTimeout Completion = "HeartbeatTimeout"
	// CompletedByGlobalTimeout: the action reached its global timeout; the
	// hook's DefaultResult applied.
	CompletedByGlobalTimeout Completion = "GlobalTimeout"
	// CompletedBySibling: another hook's action for the same transition was
	// abandoned, which ends the transition and this action with ABANDON.
	CompletedBySibling Completion = "SiblingAbandoned"
	// CompletedByHookDeleted: DeleteLifecycleHook ended the outstanding
	// action (ABANDON for launches, CONTINUE for terminations, as AWS does).
	CompletedByHookDeleted Completion = "HookDeleted"
	// CompletedByInstanceGone: the instance was terminated otherwise (group
	// force-deleted) while the action was outstanding.
	CompletedByInstanceGone Completion = "InstanceGone"
)

// Action is a snapshot of one lifecycle action.
type Action struct {
	Token      string
	GroupName  string
	HookName   string
	InstanceID string
	// Transition is autoscaling:EC2_INSTANCE_LAUNCHING or
	// autoscaling:EC2_INSTANCE_TERMINATING.
	Transition string
	// Origin and Destination are EC2, AutoScalingGroup or WarmPool.
	Origin, Destination  string
	NotificationMetadata string
	HeartbeatTimeout     time.Duration
	Started              time.Time
	// Announced is when the action's EventBridge event (and direct
	// notification, if any) reached moto; zero until then.
	Announced time.Time
	// Deadline is when the action times out unless completed or heartbeated;
	// it never passes GlobalDeadline.
	Deadline       time.Time
	GlobalDeadline time.Time
	// Heartbeats counts accepted RecordLifecycleActionHeartbeat calls;
	// FirstHeartbeat is when the first was accepted.
	Heartbeats     int
	FirstHeartbeat time.Time
	// Completions counts accepted CompleteLifecycleAction calls (0 or 1).
	Completions int
	// Rejected counts CompleteLifecycleAction and
	// RecordLifecycleActionHeartbeat calls that named this action (by token,
	// or by instance ID and hook) after it had ended and got "No active
	// Lifecycle Action found".
	Rejected int
	// Result is "" while the action is active, then CONTINUE or ABANDON.
	Result      string
	CompletedBy Completion
	Completed   time.Time
}

// Active reports whether the action is still waiting.
func (a Action) Active() bool { return a.Result == "" }

// Actions returns every lifecycle action started so far, in start order.
func (s *Server) Actions() []Action {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Action, 0, len(s.actions))
	for _, a := range s.actions {
		out = append(out, a.snapshot())
	}
	return out
}

// Action returns the lifecycle action with that token.
func (s *Server) Action(token string) (Action, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.actions {
		if a.token == token {
			return a.snapshot(), true
		}
	}
	return Action{}, false
}

func (s *Server) sortedInstances() []*instance {
	out := make([]*instance, 0, len(s.instances))
	for _, in := range s.instances {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

// enqueueCallback queues f for the callback goroutine.
func (s *Server) enqueueCallback(f func(context.Context)) {
	s.cbMu.Lock()
	s.cbQueue = append(s.cbQueue, f)
	s.cbMu.Unlock()
	select {
	case s.cbWake <- struct{}{}:
	default:
	}
}

func (s *Server) callbackLoop() {
	for {
		s.cbMu.Lock()
		var f func(context.Context)
		if len(s.cbQueue) > 0 {
			f = s.cbQueue[0]
			s.cbQueue[0] = nil
			s.cbQueue = s.cbQueue[1:]
		}
		s.cbMu.Unlock()
		if f != nil {
			if s.ctx.Err() != nil {
				return
			}
			f(s.ctx)
			continue
		}
		select {
		case <-s.ctx.Done():
			return
		case <-s.cbWake:
		}
	}
}
