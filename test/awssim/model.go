package awssim

import (
	"context"
	"crypto/rand"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/event"
)

// Everything in this file runs with s.mu held.

const (
	resultContinue = "CONTINUE"
	resultAbandon  = "ABANDON"
)

type group struct {
	name, arn               string
	min, max, desired       int32
	launchTemplate          *types.LaunchTemplateSpecification
	launchConfigurationName string
	mixedInstancesPolicy    bool
	availabilityZones       []string
	vpcZoneIdentifier       string
	newInstancesProtected   bool
	defaultCooldown         int32
	healthCheckType         string
	healthCheckGracePeriod  int32
	terminationPolicies     []string
	tags                    []types.TagDescription
	created                 time.Time
	hooks                   map[string]*hook
	warm                    *warmPool
}

type hook struct {
	name, transition string
	targetARN        string
	roleARN          string
	metadata         string
	defaultResult    string
	heartbeat        time.Duration
}

func (h *hook) globalTimeout() time.Duration {
	return min(100*h.heartbeat, MaxGlobalTimeout)
}

type warmPool struct {
	minSize        int32
	maxPrepared    int32 // -1: the group's MaxSize
	poolState      types.WarmPoolState
	reuseOnScaleIn bool
	pendingDelete  bool
}

type instance struct {
	id, groupName    string
	seq              uint64
	state            types.LifecycleState
	ec2State         string
	privateDNS       string
	privateIP        string
	az, instanceType string
	launchTemplate   *types.LaunchTemplateSpecification
	protected        bool
	warm             bool // belongs to the warm pool
	launched         time.Time

	// The transition in progress: its lifecycle actions still waiting, and
	// where it goes.
	waiting     []*action
	transition  string
	origin      string
	destination string
}

func (in *instance) snapshot() Instance {
	return Instance{
		ID: in.id, GroupName: in.groupName, LifecycleState: in.state, EC2State: in.ec2State,
		PrivateDNSName: in.privateDNS, PrivateIPAddress: in.privateIP, AvailabilityZone: in.az,
		InstanceType: in.instanceType, ProtectedFromScaleIn: in.protected, InWarmPool: in.warm,
		Launched: in.launched,
	}
}

// counts reports whether the instance counts toward the group's desired
// capacity.
func (in *instance) counts() bool {
	if in.warm {
		return false
	}
	switch in.state {
	case types.LifecycleStatePending, types.LifecycleStatePendingWait,
		types.LifecycleStatePendingProceed, types.LifecycleStateInService:
		return true
	}
	return false
}

// gone reports whether the instance is terminated.
func (in *instance) gone() bool {
	return in.state == types.LifecycleStateTerminated || in.state == types.LifecycleStateWarmedTerminated
}

// pooled reports whether the instance is in the warm pool or on its way
// there, for sizing the pool.
func (in *instance) pooled() bool {
	if in.gone() {
		return false
	}
	if in.warm {
		switch in.state {
		case types.LifecycleStateWarmedTerminating, types.LifecycleStateWarmedTerminatingWait,
			types.LifecycleStateWarmedTerminatingProceed:
			return false
		}
		return true
	}
	return in.transition == event.TransitionTerminating && in.destination == event.PlaceWarmPool
}

// readyInPool reports whether a warm instance can be taken into the group.
func (in *instance) readyInPool() bool {
	if !in.warm {
		return false
	}
	switch in.state {
	case types.LifecycleStateWarmedStopped, types.LifecycleStateWarmedRunning, types.LifecycleStateWarmedHibernated:
		return true
	}
	return false
}

type action struct {
	token        string
	inst         *instance
	groupName    string
	hook         hook // a copy: the hook as it was when the action started
	transition   string
	origin, dest string
	started      time.Time
	announced    time.Time // when every announcement of it reached moto
	// announcing is set while its announcement waits in the outbox: the
	// action cannot time out before its consumer could know of it.
	announcing     bool
	deadline       time.Time
	globalDeadline time.Time
	heartbeats     int
	firstHeartbeat time.Time
	completions    int
	rejected       int
	result         string
	by             Completion
	completed      time.Time
}

func (a *action) snapshot() Action {
	return Action{
		Token: a.token, GroupName: a.groupName, HookName: a.hook.name, InstanceID: a.inst.id,
		Transition: a.transition, Origin: a.origin, Destination: a.dest,
		NotificationMetadata: a.hook.metadata, HeartbeatTimeout: a.hook.heartbeat,
		Started: a.started, Announced: a.announced, Deadline: a.deadline, GlobalDeadline: a.globalDeadline,
		Heartbeats: a.heartbeats, FirstHeartbeat: a.firstHeartbeat, Completions: a.completions, Rejected: a.rejected,
		Result: a.result, CompletedBy: a.by, Completed: a.completed,
	}
}

func (a *action) active() bool { return a.result == "" }

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand documents it)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func (s *Server) groupInstances(g *group) []*instance {
	var out []*instance
	for _, in := range s.sortedInstances() {
		if in.groupName == g.name && !in.gone() {
			out = append(out, in)
		}
	}
	return out
}

func (g *group) hooksFor(transition string) []*hook {
	var out []*hook
	for _, h := range g.hooks {
		if h.transition == transition {
			out = append(out, h)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// reconcile brings the group to its desired capacity and its warm pool to
// its size, as Auto Scaling does continuously.
func (s *Server) reconcile(ctx context.Context, g *group) error {
	if s.groups[g.name] != g {
		return nil // deleted
	}
	var inGroup, ready []*instance
	for _, in := range s.groupInstances(g) {
		if in.counts() {
			inGroup = append(inGroup, in)
		}
		if in.readyInPool() {
			ready = append(ready, in)
		}
	}
	n := int32(len(inGroup))
	// Scale out: from the warm pool first, then new instances.
	fresh := 0
	for ; n < g.desired; n++ {
		if len(ready) > 0 && g.warm != nil && !g.warm.pendingDelete {
			in := ready[0]
			ready = ready[1:]
			if err := s.leavePool(ctx, g, in); err != nil {
				return err
			}
			continue
		}
		fresh++
	}
	if err := s.launch(ctx, g, false, fresh); err != nil {
		return err
	}
	// Scale in: InService instances not protected from scale-in, oldest
	// first. Protected ones stay; the group stays above desired until they
	// lose protection.
	if n > g.desired {
		for _, in := range inGroup {
			if n <= g.desired {
				break
			}
			if in.protected || in.state != types.LifecycleStateInService {
				continue
			}
			dest := event.PlaceEC2
			if g.warm != nil && g.warm.reuseOnScaleIn && !g.warm.pendingDelete {
				dest = event.PlaceWarmPool
			}
			if err := s.beginTerminate(ctx, g, in, dest); err != nil {
				return err
			}
			n--
		}
	}
	return s.sizeWarmPool(ctx, g)
}

func (s *Server) sizeWarmPool(ctx context.Context, g *group) error {
	if g.warm == nil {
		return nil
	}
	var pooled []*instance
	for _, in := range s.groupInstances(g) {
		if in.pooled() {
			pooled = append(pooled, in)
		}
	}
	if g.warm.pendingDelete {
		for _, in := range pooled {
			if in.warm && len(in.waiting) == 0 {
				if err := s.beginTerminate(ctx, g, in, event.PlaceEC2); err != nil {
					return err
				}
			}
		}
		for _, in := range s.groupInstances(g) {
			if in.warm || in.pooled() {
				return nil
			}
		}
		g.warm = nil
		return nil
	}
	want := warmPoolTarget(g)
	if err := s.launch(ctx, g, true, int(max(want-int32(len(pooled)), 0))); err != nil {
		return err
	}
	// Shrink: newest ready instances first.
	excess := int32(len(pooled)) - want
	for i := len(pooled) - 1; i >= 0 && excess > 0; i-- {
		if in := pooled[i]; in.readyInPool() {
			if err := s.beginTerminate(ctx, g, in, event.PlaceEC2); err != nil {
				return err
			}
			excess--
		}
	}
	return nil
}

// warmPoolTarget is the warm pool's size: MaxGroupPreparedCapacity (default
// the group's MaxSize) less the desired capacity, but at least MinSize.
func warmPoolTarget(g *group) int32 {
	prepared := g.warm.maxPrepared
	if prepared < 0 {
		prepared = g.max
	}
	return max(g.warm.minSize, prepared-g.desired, 0)
}

// launchBatch is the most instances one RunInstances call asks for.
const launchBatch = 100

// launch runs count new instances into the group or its warm pool (origin
// EC2), up to launchBatch per RunInstances call, as Auto Scaling does.
func (s *Server) launch(ctx context.Context, g *group, intoPool bool, count int) error {
	for count > 0 {
		k := min(count, launchBatch)
		if err := s.launchBatch(ctx, g, intoPool, k); err != nil {
			return err
		}
		count -= k
	}
	return nil
}

func (s *Server) launchBatch(ctx context.Context, g *group, intoPool bool, count int) error {
	tags := []ec2types.Tag{{Key: aws.String("aws:autoscaling:groupName"), Value: aws.String(g.name)}}
	for _, t := range g.tags {
		if aws.ToBool(t.PropagateAtLaunch) {
			tags = append(tags, ec2types.Tag{Key: t.Key, Value: t.Value})
		}
	}
	input := &ec2.RunInstancesInput{
		ImageId:      aws.String(s.opts.ImageID),
		InstanceType: ec2types.InstanceType(s.opts.InstanceType),
		MinCount:     aws.Int32(int32(count)),
		MaxCount:     aws.Int32(int32(count)),
		TagSpecifications: []ec2types.TagSpecification{{
			ResourceType: ec2types.ResourceTypeInstance, Tags: tags,
		}},
	}
	if len(g.availabilityZones) > 0 {
		input.Placement = &ec2types.Placement{AvailabilityZone: aws.String(g.availabilityZones[0])}
	}
	out, err := s.ec2.RunInstances(ctx, input)
	if err != nil {
		return fmt.Errorf("launching %d instances for group %s: %w", count, g.name, err)
	}
	if len(out.Instances) != count {
		return fmt.Errorf("launching %d instances for group %s: RunInstances returned %d instances", count, g.name, len(out.Instances))
	}
	for _, ei := range out.Instances {
		s.seq++
		in := &instance{
			id: aws.ToString(ei.InstanceId), groupName: g.name, seq: s.seq,
			ec2State: "running", privateDNS: aws.ToString(ei.PrivateDnsName), privateIP: aws.ToString(ei.PrivateIpAddress),
			instanceType: string(ei.InstanceType), launchTemplate: g.launchTemplate, warm: intoPool,
			launched: s.clock.Now(),
		}
		if ei.Placement != nil {
			in.az = aws.ToString(ei.Placement.AvailabilityZone)
		}
		if !intoPool {
			in.protected = g.newInstancesProtected
		}
		s.instances[in.id] = in
		s.stateChange(in, "pending", "running")
		s.instanceRunning(in)
		if intoPool {
			in.state = types.LifecycleStateWarmedPending
			err = s.beginLaunch(ctx, g, in, event.PlaceEC2, event.PlaceWarmPool)
		} else {
			in.state = types.LifecycleStatePending
			err = s.beginLaunch(ctx, g, in, event.PlaceEC2, event.PlaceAutoScalingGroup)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// leavePool moves a warm instance into the group (origin WarmPool).
func (s *Server) leavePool(ctx context.Context, g *group, in *instance) error {
	in.warm = false
	in.protected = g.newInstancesProtected
	in.state = types.LifecycleStatePending
	if in.ec2State != "running" {
		id := in.id
		s.ec2Call(in, func(ctx context.Context) error {
			if _, err := s.ec2.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{id}}); err != nil {
				return fmt.Errorf("starting warm instance %s: %w", id, err)
			}
			return nil
		}, "pending", "running")
		in.ec2State = "running"
		s.instanceRunning(in)
	}
	return s.beginLaunch(ctx, g, in, event.PlaceWarmPool, event.PlaceAutoScalingGroup)
}

// beginLaunch starts the launch transition: one action per launch hook that
// exists now, or straight on when there is none.
func (s *Server) beginLaunch(ctx context.Context, g *group, in *instance, origin, dest string) error {
	in.transition, in.origin, in.destination = event.TransitionLaunching, origin, dest
	hooks := g.hooksFor(event.TransitionLaunching)
	if len(hooks) == 0 {
		return s.finishTransition(ctx, g, in)
	}
	if dest == event.PlaceWarmPool {
		in.state = types.LifecycleStateWarmedPendingWait
	} else {
		in.state = types.LifecycleStatePendingWait
	}
	return s.startActions(ctx, g, in, hooks)
}

// beginTerminate starts the terminate transition of an instance in the group
// (destination EC2 or WarmPool) or in the warm pool (destination EC2).
func (s *Server) beginTerminate(ctx context.Context, g *group, in *instance, dest string) error {
	origin := event.PlaceAutoScalingGroup
	if in.warm {
		origin, dest = event.PlaceWarmPool, event.PlaceEC2
		in.state = types.LifecycleStateWarmedTerminating
	} else {
		in.state = types.LifecycleStateTerminating
	}
	in.transition, in.origin, in.destination = event.TransitionTerminating, origin, dest
	hooks := g.hooksFor(event.TransitionTerminating)
	if len(hooks) == 0 {
		return s.finishTransition(ctx, g, in)
	}
	if in.warm {
		in.state = types.LifecycleStateWarmedTerminatingWait
	} else {
		in.state = types.LifecycleStateTerminatingWait
	}
	return s.startActions(ctx, g, in, hooks)
}

func (s *Server) startActions(ctx context.Context, g *group, in *instance, hooks []*hook) error {
	now := s.clock.Now()
	var started []*action
	for _, h := range hooks {
		a := &action{
			token: newUUID(), inst: in, groupName: g.name, hook: *h,
			transition: in.transition, origin: in.origin, dest: in.destination,
			started: now, globalDeadline: now.Add(h.globalTimeout()),
		}
		a.deadline = minTime(now.Add(h.heartbeat), a.globalDeadline)
		in.waiting = append(in.waiting, a)
		s.actions = append(s.actions, a)
		started = append(started, a)
	}
	s.poke()
	for _, a := range started {
		s.announceAction(g, a)
	}
	return nil
}

// complete ends an active action with result and moves the instance on when
// it waits for nothing else.
func (s *Server) complete(ctx context.Context, a *action, result string, by Completion) error {
	now := s.clock.Now()
	a.result, a.by, a.completed = result, by, now
	in := a.inst
	in.waiting = removeAction(in.waiting, a)
	g := s.groups[in.groupName]
	if result == resultAbandon {
		// ABANDON ends the transition: the other hooks' actions end too.
		for _, other := range in.waiting {
			other.result, other.by, other.completed = resultAbandon, CompletedBySibling, now
		}
		in.waiting = nil
		if in.transition == event.TransitionLaunching {
			if err := s.terminateNow(ctx, in); err != nil {
				return err
			}
		} else if err := s.finishTransition(ctx, g, in); err != nil {
			return err
		}
	} else if len(in.waiting) == 0 {
		if err := s.finishTransition(ctx, g, in); err != nil {
			return err
		}
	}
	if g != nil {
		return s.reconcile(ctx, g)
	}
	return nil
}

// finishTransition moves an instance whose lifecycle actions all continued
// (or that had none) to where its transition goes.
func (s *Server) finishTransition(ctx context.Context, g *group, in *instance) error {
	transition, dest := in.transition, in.destination
	in.transition, in.origin, in.destination = "", "", ""
	switch {
	case transition == event.TransitionLaunching && dest == event.PlaceAutoScalingGroup:
		in.state = types.LifecycleStateInService
		return nil
	case transition == event.TransitionLaunching && dest == event.PlaceWarmPool:
		return s.settleInPool(ctx, g, in)
	case transition == event.TransitionTerminating && dest == event.PlaceWarmPool:
		in.warm = true
		in.protected = false
		in.state = types.LifecycleStateWarmedPending
		return s.settleInPool(ctx, g, in)
	default:
		return s.terminateNow(ctx, in)
	}
}

// settleInPool puts a warm instance in the pool's state.
func (s *Server) settleInPool(ctx context.Context, g *group, in *instance) error {
	poolState := types.WarmPoolStateStopped
	if g != nil && g.warm != nil && g.warm.poolState != "" {
		poolState = g.warm.poolState
	}
	switch poolState {
	case types.WarmPoolStateRunning:
		in.state = types.LifecycleStateWarmedRunning
		return nil
	case types.WarmPoolStateHibernated:
		in.state = types.LifecycleStateWarmedHibernated
	default:
		in.state = types.LifecycleStateWarmedStopped
	}
	return s.stop(ctx, in)
}

func (s *Server) stop(ctx context.Context, in *instance) error {
	if in.ec2State != "running" {
		return nil
	}
	id := in.id
	s.ec2Call(in, func(ctx context.Context) error {
		if _, err := s.ec2.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}}); err != nil {
			return fmt.Errorf("stopping instance %s: %w", id, err)
		}
		return nil
	}, "stopping", "stopped")
	in.ec2State = "stopped"
	s.instanceGone(in)
	return nil
}

// terminateNow terminates the instance in EC2 without (further) lifecycle
// hooks.
func (s *Server) terminateNow(ctx context.Context, in *instance) error {
	for _, a := range in.waiting {
		a.result, a.by, a.completed = resultAbandon, CompletedByInstanceGone, s.clock.Now()
	}
	in.waiting = nil
	in.transition, in.origin, in.destination = "", "", ""
	if in.warm {
		in.state = types.LifecycleStateWarmedTerminatingProceed
	} else {
		in.state = types.LifecycleStateTerminatingProceed
	}
	id := in.id
	s.ec2Call(in, func(ctx context.Context) error {
		if _, err := s.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
			return fmt.Errorf("terminating instance %s: %w", id, err)
		}
		return nil
	}, "shutting-down", "terminated")
	wasRunning := in.ec2State == "running"
	in.ec2State = "terminated"
	if in.warm {
		in.state = types.LifecycleStateWarmedTerminated
	} else {
		in.state = types.LifecycleStateTerminated
	}
	if wasRunning {
		s.instanceGone(in)
	}
	return nil
}

func (s *Server) instanceRunning(in *instance) {
	if f := s.opts.OnInstanceRunning; f != nil {
		snap := in.snapshot()
		s.enqueueCallback(func(ctx context.Context) { f(ctx, snap) })
	}
}

func (s *Server) instanceGone(in *instance) {
	if f := s.opts.OnInstanceGone; f != nil {
		snap := in.snapshot()
		s.enqueueCallback(func(ctx context.Context) { f(ctx, snap) })
	}
}

func removeAction(list []*action, a *action) []*action {
	out := list[:0]
	for _, x := range list {
		if x != a {
			out = append(out, x)
		}
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// poke wakes the timeout loop to recompute its next deadline.
func (s *Server) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// expire ends every active action whose deadline has passed, with its
// hook's default result. API handlers call it first, so the model never
// lags the clock.
func (s *Server) expire(ctx context.Context) error {
	now := s.clock.Now()
	for _, a := range s.actions {
		if !a.active() || a.announcing || now.Before(a.deadline) {
			continue
		}
		by := CompletedByHeartbeatTimeout
		if !a.deadline.Before(a.globalDeadline) {
			by = CompletedByGlobalTimeout
		}
		if err := s.complete(ctx, a, a.hook.defaultResult, by); err != nil {
			return fmt.Errorf("timing out lifecycle action %s: %w", a.token, err)
		}
	}
	return nil
}

func (s *Server) nextDeadline() (time.Time, bool) {
	var next time.Time
	found := false
	for _, a := range s.actions {
		if a.active() && !a.announcing && (!found || a.deadline.Before(next)) {
			next, found = a.deadline, true
		}
	}
	return next, found
}

// timeoutLoop ends lifecycle actions whose time is up.
func (s *Server) timeoutLoop() {
	for {
		s.mu.Lock()
		ctx, cancel := context.WithTimeout(s.ctx, opTimeout)
		err := s.expire(ctx)
		cancel()
		next, ok := s.nextDeadline()
		s.mu.Unlock()
		if err != nil && s.ctx.Err() == nil {
			s.recordErr(err)
		}
		var timer clock.Timer
		var timerC <-chan time.Time
		if ok {
			timer = s.clock.NewTimer(next.Sub(s.clock.Now()))
			timerC = timer.C()
		}
		select {
		case <-s.ctx.Done():
		case <-s.wake:
		case <-timerC:
		}
		if timer != nil {
			timer.Stop()
		}
		if s.ctx.Err() != nil {
			return
		}
	}
}

// opTimeout bounds the moto calls of one operation.
const opTimeout = 30 * time.Second
