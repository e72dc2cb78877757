package check

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/lifecycle"
)

// ClusterTagPrefix marks an Auto Scaling group as a cluster's.
const ClusterTagPrefix = "kubernetes.io/cluster/"

// group is an Auto Scaling group of the cluster and its hooks.
type group struct {
	name, arn string
	warm      *astypes.WarmPoolConfiguration
	hooks     []astypes.LifecycleHook
	hooksErr  error
}

// loadGroups finds the groups of the cluster: tagged
// kubernetes.io/cluster/<--cluster-name>, or named by --managed-asg.
func (r *run) loadGroups(ctx context.Context) {
	if r.cfg.ClusterName == "" && len(r.cfg.ManagedASGs) == 0 {
		return
	}
	r.perms.need("autoscaling:DescribeAutoScalingGroups", r.cfg.CompleteLifecycle, "")
	r.perms.need("autoscaling:DescribeLifecycleHooks", r.cfg.CompleteLifecycle, "")
	var next *string
	for {
		out, err := r.c.AutoScaling.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{NextToken: next, MaxRecords: aws.Int32(100)})
		r.perms.record("autoscaling:DescribeAutoScalingGroups", err)
		if err != nil {
			r.groupsErr = fmt.Errorf("describing Auto Scaling groups: %s", apiMessage(err))
			return
		}
		for _, g := range out.AutoScalingGroups {
			if r.owned(g) {
				r.groups = append(r.groups, group{name: aws.ToString(g.AutoScalingGroupName), arn: aws.ToString(g.AutoScalingGroupARN), warm: g.WarmPoolConfiguration})
			}
		}
		if next = out.NextToken; next == nil {
			break
		}
	}
	for i := range r.groups {
		g := &r.groups[i]
		out, err := r.c.AutoScaling.DescribeLifecycleHooks(ctx, &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: aws.String(g.name)})
		r.perms.record("autoscaling:DescribeLifecycleHooks", err)
		if err != nil {
			g.hooksErr = fmt.Errorf("describing lifecycle hooks: %s", apiMessage(err))
			continue
		}
		g.hooks = out.LifecycleHooks
		slices.SortFunc(g.hooks, func(a, b astypes.LifecycleHook) int {
			return strings.Compare(aws.ToString(a.LifecycleHookName), aws.ToString(b.LifecycleHookName))
		})
	}
}

func (r *run) owned(g astypes.AutoScalingGroup) bool {
	if slices.Contains(r.cfg.ManagedASGs, aws.ToString(g.AutoScalingGroupName)) {
		return true
	}
	if r.cfg.ClusterName == "" {
		return false
	}
	for _, t := range g.Tags {
		if aws.ToString(t.Key) == ClusterTagPrefix+r.cfg.ClusterName {
			return true
		}
	}
	return false
}

// groupChecks checks every group of the cluster: a terminate hook, a launch
// hook when it has a warm pool, and hooks whose actions reach the queue
// with timeouts lifeboat's heartbeats can keep.
func (r *run) groupChecks(ctx context.Context) {
	switch {
	case r.cfg.ClusterName == "" && len(r.cfg.ManagedASGs) == 0:
		r.add("autoscaling groups", Warn, "--cluster-name is not set and no --managed-asg is given: lifeboat cannot tell which Auto Scaling groups are this cluster's",
			"set --cluster-name (groups tagged kubernetes.io/cluster/<name> are the cluster's) or --managed-asg")
		return
	case r.groupsErr != nil:
		r.add("autoscaling groups", Fail, r.groupsErr.Error(), "allow autoscaling:DescribeAutoScalingGroups and autoscaling:DescribeLifecycleHooks")
		return
	}
	var missing []string
	for _, m := range r.cfg.ManagedASGs {
		if !slices.ContainsFunc(r.groups, func(g group) bool { return g.name == m }) {
			missing = append(missing, m)
		}
	}
	var names []string
	for _, g := range r.groups {
		names = append(names, g.name)
	}
	which := fmt.Sprintf("tagged %s%s", ClusterTagPrefix, r.cfg.ClusterName)
	if len(r.cfg.ManagedASGs) > 0 {
		which += " or named by --managed-asg"
	}
	switch {
	case len(missing) > 0:
		r.add("autoscaling groups", Fail, "--managed-asg names groups that do not exist: "+strings.Join(missing, ", "), "correct --managed-asg")
	case len(r.groups) == 0:
		r.add("autoscaling groups", Warn, "no Auto Scaling group is "+which+" (fine if the cluster has none, e.g. only Karpenter nodes)",
			fmt.Sprintf("tag the node groups' Auto Scaling groups %s%s=owned or name them with --managed-asg", ClusterTagPrefix, r.cfg.ClusterName))
	default:
		r.add("autoscaling groups", OK, fmt.Sprintf("%d %s: %s", len(r.groups), which, strings.Join(names, ", ")), "")
	}
	var topics []string
	for _, g := range r.groups {
		r.groupCheck(g)
		for _, h := range g.hooks {
			r.hookCheck(g, h)
			if t := aws.ToString(h.NotificationTargetARN); strings.HasPrefix(t, "arn:aws:sns:") && !slices.Contains(topics, t) {
				topics = append(topics, t)
			}
		}
	}
	r.checkSNSPolicy(topics, r.queuePolicyDoc)
}

func (r *run) groupCheck(g group) {
	name := "asg " + g.name
	if g.hooksErr != nil {
		r.add(name, Fail, g.hooksErr.Error(), "allow autoscaling:DescribeLifecycleHooks")
		return
	}
	var terminate, launch []string
	for _, h := range g.hooks {
		switch aws.ToString(h.LifecycleTransition) {
		case event.TransitionTerminating:
			terminate = append(terminate, aws.ToString(h.LifecycleHookName))
		case event.TransitionLaunching:
			launch = append(launch, aws.ToString(h.LifecycleHookName))
		}
	}
	parts := []string{"terminate hook: " + listOrNone(terminate), "launch hook: " + listOrNone(launch)}
	if w := g.warm; w != nil {
		reuse := w.InstanceReusePolicy != nil && aws.ToBool(w.InstanceReusePolicy.ReuseOnScaleIn)
		parts = append(parts, fmt.Sprintf("warm pool: %s, min size %d, reuse on scale-in %v", w.PoolState, aws.ToInt32(w.MinSize), reuse))
	} else {
		parts = append(parts, "no warm pool")
	}
	found := strings.Join(parts, "; ")
	var problems []string
	var fixes []string
	if len(terminate) == 0 {
		problems = append(problems, "no terminate lifecycle hook: a scale-in terminates the instance without waiting for its pods (F4)")
		fixes = append(fixes, fmt.Sprintf("aws autoscaling put-lifecycle-hook --auto-scaling-group-name %s --lifecycle-hook-name lifeboat-terminate --lifecycle-transition %s --heartbeat-timeout 300 --default-result CONTINUE",
			g.name, event.TransitionTerminating))
	}
	if g.warm != nil && len(launch) == 0 {
		problems = append(problems, "a warm pool but no launch lifecycle hook: instances leave the pool without lifeboat seeing them, so a node drained into the pool comes back cordoned (F1)")
		fixes = append(fixes, fmt.Sprintf("aws autoscaling put-lifecycle-hook --auto-scaling-group-name %s --lifecycle-hook-name lifeboat-launch --lifecycle-transition %s --heartbeat-timeout 300 --default-result ABANDON",
			g.name, event.TransitionLaunching))
	}
	if len(problems) > 0 {
		r.add(name, Fail, found+"; "+strings.Join(problems, "; "), strings.Join(fixes, " && "))
		return
	}
	r.add(name, OK, found, "")
}

// hookCheck checks that a hook's actions reach the queue and that its
// heartbeat timeout fits lifeboat's heartbeats.
func (r *run) hookCheck(g group, h astypes.LifecycleHook) {
	hookName := aws.ToString(h.LifecycleHookName)
	transition := aws.ToString(h.LifecycleTransition)
	name := fmt.Sprintf("asg %s hook %s", g.name, hookName)
	timeout := time.Duration(aws.ToInt32(h.HeartbeatTimeout)) * time.Second
	if timeout <= 0 {
		timeout = time.Hour
	}
	global := time.Duration(aws.ToInt32(h.GlobalTimeout)) * time.Second
	if global <= 0 {
		global = min(100*timeout, lifecycle.MaxGlobalTimeout)
	}
	defaultResult := aws.ToString(h.DefaultResult)
	short := strings.TrimPrefix(transition, "autoscaling:")
	found := []string{fmt.Sprintf("%s, heartbeat timeout %s (global %s), default %s", short, timeout, global, defaultResult)}
	var warns, fails, fixes []string

	kind := event.LifecycleTerminate
	if transition == event.TransitionLaunching {
		kind = event.LifecycleLaunch
	}
	var spec kindSpec
	for _, s := range kindSpecs {
		if s.kind == kind {
			spec = s
		}
	}
	target := aws.ToString(h.NotificationTargetARN)
	by, missed := r.coverage(r.groupSamples(spec, g, hookName))
	var via []string
	for _, names := range by {
		for _, n := range names {
			if !slices.Contains(via, n) {
				via = append(via, n)
			}
		}
	}
	slices.Sort(via)
	switch {
	case target == r.queueARN && len(via) > 0:
		found = append(found, "reaches the queue directly and through "+plural("rule", via)+" (lifeboat recognizes the duplicates)")
	case target == r.queueARN:
		found = append(found, "reaches the queue directly")
	case len(missed) == 0:
		found = append(found, "reaches the queue through "+plural("rule", via))
	case strings.HasPrefix(target, "arn:aws:sns:"):
		warns = append(warns, "notifies the SNS topic "+target+"; lifeboat cannot verify the topic is subscribed to the queue")
		fixes = append(fixes, "subscribe the queue to the topic, or add the EventBridge rule: "+spec.pattern)
	default:
		where := "no notification target"
		if target != "" {
			where = "its notification target is " + target
		}
		if len(via) > 0 {
			fails = append(fails, fmt.Sprintf("rules %s miss %s, and %s", strings.Join(via, ", "), strings.Join(missed, ", "), where))
		} else {
			fails = append(fails, fmt.Sprintf("its actions never reach the queue: no enabled rule delivers %s, and %s", strings.Join(missed, ", "), where))
		}
		fixes = append(fixes, r.ruleFix(spec))
	}

	switch {
	case !r.cfg.CompleteLifecycle && kind == event.LifecycleLaunch && defaultResult == "ABANDON":
		fails = append(fails, "--complete-lifecycle=false: nobody completes launch actions, so every new instance is terminated after the timeout (F1)")
		fixes = append(fixes, "run lifeboat with --complete-lifecycle=true")
	case !r.cfg.CompleteLifecycle:
		warns = append(warns, fmt.Sprintf("--complete-lifecycle=false: lifeboat neither heartbeats nor completes these actions; each ends after %s with %s", timeout, defaultResult))
		fixes = append(fixes, "run lifeboat with --complete-lifecycle=true")
	default:
		interval, clamped := lifecycle.HeartbeatInterval(r.cfg.HeartbeatInterval, lifecycle.Hook{HeartbeatTimeout: timeout, GlobalTimeout: global})
		found = append(found, fmt.Sprintf("lifeboat heartbeats every %s", interval))
		if clamped {
			warns = append(warns, fmt.Sprintf("--heartbeat-interval %s is more than half the hook's heartbeat timeout %s: lifeboat heartbeats every %s instead", r.cfg.HeartbeatInterval, timeout, interval))
			fixes = append(fixes, fmt.Sprintf("set --heartbeat-interval 0 (half the hook's timeout) or at most %s", timeout/2))
		}
	}
	text := strings.Join(found, "; ")
	switch {
	case len(fails) > 0:
		r.add(name, Fail, text+"; "+strings.Join(append(fails, warns...), "; "), strings.Join(fixes, "; "))
	case len(warns) > 0:
		r.add(name, Warn, text+"; "+strings.Join(warns, "; "), strings.Join(fixes, "; "))
	default:
		r.add(name, OK, text, "")
	}
}
