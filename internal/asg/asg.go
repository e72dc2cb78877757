// Package asg talks to Auto Scaling about lifecycle actions: it reads hook
// timeouts, records heartbeats, completes actions and decides whether a
// group belongs to this cluster.
//
// It owns every Auto Scaling call lifeboat makes. It must not touch
// Kubernetes; the controller decides when to call it.
package asg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/smithy-go"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/lifecycle"
)

type autoscalingAPI interface {
	CompleteLifecycleAction(context.Context, *autoscaling.CompleteLifecycleActionInput, ...func(*autoscaling.Options)) (*autoscaling.CompleteLifecycleActionOutput, error)
	RecordLifecycleActionHeartbeat(context.Context, *autoscaling.RecordLifecycleActionHeartbeatInput, ...func(*autoscaling.Options)) (*autoscaling.RecordLifecycleActionHeartbeatOutput, error)
	DescribeLifecycleHooks(context.Context, *autoscaling.DescribeLifecycleHooksInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeLifecycleHooksOutput, error)
	DescribeAutoScalingGroups(context.Context, *autoscaling.DescribeAutoScalingGroupsInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error)
}

var _ autoscalingAPI = (*autoscaling.Client)(nil)

// Client wraps the Auto Scaling API.
type Client struct {
	api         autoscalingAPI
	clock       clock.WithTicker
	log         *slog.Logger
	dryRun      bool
	clusterName string
	managed     []string

	mu    sync.Mutex
	hooks map[string]lifecycle.Hook
	owned map[string]bool
	done  *completions // the actions this Client completed
}

// Options configure a Client.
type Options struct {
	DryRun bool
	// ClusterName: groups tagged kubernetes.io/cluster/<ClusterName> are this cluster's.
	ClusterName string
	// Managed are group names that are this cluster's regardless of tags.
	Managed []string
}

// New returns a Client.
func New(api autoscalingAPI, clk clock.WithTicker, log *slog.Logger, o Options) *Client {
	return &Client{api: api, clock: clk, log: log, dryRun: o.DryRun, clusterName: o.ClusterName,
		managed: o.Managed, hooks: map[string]lifecycle.Hook{}, owned: map[string]bool{}, done: newCompletions()}
}

// Hook returns a hook's timeouts (cached after the first read).
func (c *Client) Hook(ctx context.Context, group, hook string) (lifecycle.Hook, error) {
	key := group + "/" + hook
	c.mu.Lock()
	h, ok := c.hooks[key]
	c.mu.Unlock()
	if ok {
		return h, nil
	}
	out, err := c.api.DescribeLifecycleHooks(ctx, &autoscaling.DescribeLifecycleHooksInput{
		AutoScalingGroupName: aws.String(group), LifecycleHookNames: []string{hook},
	})
	if err != nil {
		return lifecycle.Hook{}, fmt.Errorf("describing lifecycle hook %s: %w", key, err)
	}
	if len(out.LifecycleHooks) == 0 {
		return lifecycle.Hook{}, fmt.Errorf("describing lifecycle hook %s: not found", key)
	}
	h = hookOf(out.LifecycleHooks[0])
	c.mu.Lock()
	c.hooks[key] = h
	c.mu.Unlock()
	return h, nil
}

// hookOf reads a hook's timeouts, with AWS's defaults for those unset.
func hookOf(lh types.LifecycleHook) lifecycle.Hook {
	h := lifecycle.Hook{HeartbeatTimeout: time.Duration(aws.ToInt32(lh.HeartbeatTimeout)) * time.Second, DefaultResult: aws.ToString(lh.DefaultResult)}
	if h.HeartbeatTimeout <= 0 {
		h.HeartbeatTimeout = time.Hour // AWS's default
	}
	h.GlobalTimeout = time.Duration(aws.ToInt32(lh.GlobalTimeout)) * time.Second
	if h.GlobalTimeout <= 0 {
		h.GlobalTimeout = min(100*h.HeartbeatTimeout, lifecycle.MaxGlobalTimeout)
	}
	return h
}

// Complete completes a lifecycle action with result (CONTINUE or ABANDON).
// lifecycle.ErrNoActiveAction (wrapped) means it was already gone.
func (c *Client) Complete(ctx context.Context, instanceID string, a event.LifecycleAction, result lifecycle.Result) error {
	if c.dryRun {
		c.log.Info("dry run: would complete lifecycle action", "instanceID", instanceID, "group", a.GroupName, "hook", a.HookName, "result", result)
		return nil
	}
	in := &autoscaling.CompleteLifecycleActionInput{
		AutoScalingGroupName:  aws.String(a.GroupName),
		LifecycleHookName:     aws.String(a.HookName),
		LifecycleActionResult: aws.String(string(result)),
		InstanceId:            aws.String(instanceID),
	}
	if a.Token != "" {
		in.LifecycleActionToken = aws.String(a.Token)
	}
	_, err := c.api.CompleteLifecycleAction(ctx, in)
	if a.Token != "" && err == nil {
		// Only a token names one action for good: a hook's next action on
		// the same instance (back from the warm pool) has a new one, and
		// a tokenless one must not find this one completed.
		c.done.add(actionKey(instanceID, a), c.clock.Now())
	}
	if err != nil {
		return fmt.Errorf("completing lifecycle action for %s (%s/%s): %w", instanceID, a.GroupName, a.HookName, classify(err))
	}
	return nil
}

// errCompleted: the action was completed by this Client; its heartbeats end.
var errCompleted = errors.New("lifecycle action completed by lifeboat")

// actionKey names one lifecycle action of one instance (a hook's actions
// are told apart by instance when they have no token).
func actionKey(instanceID string, a event.LifecycleAction) string {
	return instanceID + " " + a.Key()
}

// Heartbeat records one heartbeat, unless this Client completed the action
// (errCompleted).
func (c *Client) Heartbeat(ctx context.Context, instanceID string, a event.LifecycleAction) error {
	if c.dryRun {
		return nil
	}
	in := &autoscaling.RecordLifecycleActionHeartbeatInput{
		AutoScalingGroupName: aws.String(a.GroupName),
		LifecycleHookName:    aws.String(a.HookName),
		InstanceId:           aws.String(instanceID),
	}
	if a.Token != "" {
		in.LifecycleActionToken = aws.String(a.Token)
	}
	key := actionKey(instanceID, a)
	if c.done.completed(key) {
		return errCompleted
	}
	if _, err := c.api.RecordLifecycleActionHeartbeat(ctx, in); err != nil {
		err = classify(err)
		if errors.Is(err, lifecycle.ErrNoActiveAction) && c.done.completed(key) {
			return errCompleted // sent while this Client completed it
		}
		return fmt.Errorf("recording lifecycle heartbeat for %s (%s/%s): %w", instanceID, a.GroupName, a.HookName, err)
	}
	return nil
}

// KeepAlive records a heartbeat at once and then every interval until ctx
// ends, the action is gone (lifecycle.ErrNoActiveAction), this Client
// completed it or until is reached (nil). No heartbeat is sent after this
// Client completed the action (see completions).
// beat, if not nil, is told the outcome of each heartbeat: nil for a
// recorded one, the error for a failed one (not for lifecycle.ErrNoActiveAction,
// which ends KeepAlive).
//
// The first heartbeat is immediate because KeepAlive may be resuming an
// action whose last heartbeat is unknown (a restarted lifeboat, a new
// leader, a redelivered message): with the usual interval of half the
// hook's timeout, waiting one interval first could let the action time out.
//
// A failed heartbeat (the SDK already retried it) is logged and tried again
// sooner than the next interval: after an eighth of it, doubling up to the
// interval. Waiting a whole interval after a failure would leave no margin
// before the hook's timeout.
//
// interval may change while KeepAlive runs (it is conservative until the
// hook's timeout is known); a change ends the current wait at once.
func (c *Client) KeepAlive(ctx context.Context, instanceID string, a event.LifecycleAction, interval *lifecycle.Interval, until time.Time, beat func(error)) error {
	var retry time.Duration // the next wait after a failure; 0: none failed
	for {
		if !until.IsZero() && !c.clock.Now().Before(until) {
			return nil
		}
		wait, changed := interval.Watch()
		last := c.clock.Now()
		err := c.Heartbeat(ctx, instanceID, a)
		switch {
		case err == nil:
			retry = 0
			if beat != nil {
				beat(nil)
			}
		case errors.Is(err, lifecycle.ErrNoActiveAction):
			return err
		case errors.Is(err, errCompleted), ctx.Err() != nil:
			return nil
		default:
			if retry == 0 {
				retry = max(wait/8, 100*time.Millisecond)
			}
			wait = min(retry, wait)
			retry *= 2
			if beat != nil {
				beat(err)
			}
			c.log.Warn("lifecycle heartbeat failed", "instanceID", instanceID, "retryIn", wait, "error", err.Error())
		}
		if !c.untilDue(ctx, last, wait, retry > 0, interval, changed) {
			return nil
		}
	}
}

// untilDue waits until the next heartbeat is due, wait after the last one.
// A change of the interval meanwhile replaces wait (a failed heartbeat
// keeps its shorter retry), still counted from the last heartbeat: the
// interval becoming known right after a heartbeat sends no extra one. It
// reports false when ctx ended.
func (c *Client) untilDue(ctx context.Context, last time.Time, wait time.Duration, retrying bool, interval *lifecycle.Interval, changed <-chan struct{}) bool {
	for {
		t := c.clock.NewTimer(max(last.Add(wait).Sub(c.clock.Now()), 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C():
			return true
		case <-changed:
			t.Stop()
			var d time.Duration
			d, changed = interval.Watch()
			if retrying {
				d = min(wait, d)
			}
			wait = d
		}
	}
}

// Owned reports whether a group belongs to this cluster: it is named in
// Options.Managed or tagged kubernetes.io/cluster/<ClusterName>.
func (c *Client) Owned(ctx context.Context, group string) (bool, error) {
	if slices.Contains(c.managed, group) {
		return true, nil
	}
	if c.clusterName == "" {
		return false, nil
	}
	c.mu.Lock()
	owned, ok := c.owned[group]
	c.mu.Unlock()
	if ok {
		return owned, nil
	}
	out, err := c.api.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{group}})
	if err != nil {
		return false, fmt.Errorf("describing auto scaling group %s: %w", group, err)
	}
	owned = false
	for _, g := range out.AutoScalingGroups {
		for _, tag := range g.Tags {
			if aws.ToString(tag.Key) == "kubernetes.io/cluster/"+c.clusterName {
				owned = true
			}
		}
	}
	c.mu.Lock()
	c.owned[group] = owned
	c.mu.Unlock()
	return owned, nil
}

// classify marks AWS's "No active Lifecycle Action found" (a ValidationError,
// HTTP 400) as lifecycle.ErrNoActiveAction.
func classify(err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "ValidationError" && strings.Contains(ae.ErrorMessage(), "No active Lifecycle Action") {
		return fmt.Errorf("%w: %s", lifecycle.ErrNoActiveAction, ae.ErrorMessage())
	}
	return err
}
