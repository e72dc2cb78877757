package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"lifeboat.dev/lifeboat/internal/route"
	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

// Scenes, their Auto Scaling groups and namespaces.
const (
	sceneSpot     = "spot"
	sceneScaleIn  = "scale-in"
	sceneWarmPool = "warm-pool"

	groupSpot     = "spot-nodes"
	groupOnDemand = "on-demand-nodes"
	groupBatch    = "batch-nodes"
	groupWeb      = "web-nodes"

	nsShop  = "shop"
	nsBatch = "batch"

	hookTerminate = "lifeboat-terminate"
	hookLaunch    = "lifeboat-launch"

	launching   = "autoscaling:EC2_INSTANCE_LAUNCHING"
	terminating = "autoscaling:EC2_INSTANCE_TERMINATING"

	// groupLabel is set on every node to its Auto Scaling group;
	// replacement pods select the on-demand group with it.
	groupLabel = "demo.lifeboat.dev/group"

	// spotNotice is how long AWS gives between the notice and the action.
	spotNotice = 2 * time.Minute
	// sceneTimeout bounds a scene beyond its own scaled durations.
	sceneTimeout = 60 * time.Second
)

var namespaceOfScene = map[string]string{sceneSpot: nsShop, sceneScaleIn: nsBatch}

// scene is what setScene built.
type scene struct {
	spotInstance, spotNode   string
	batchInstance, batchNode string
}

// setScene creates the Auto Scaling groups (their instances become nodes),
// the lifecycle hooks, the pods and the PodDisruptionBudget. The on-demand
// group starts empty: replacement pods wait for the demo, playing the
// cluster autoscaler, to scale it out.
func (d *demo) setScene(ctx context.Context) (*scene, error) {
	for group, sc := range map[string]string{groupSpot: sceneSpot, groupOnDemand: sceneSpot, groupBatch: sceneScaleIn, groupWeb: sceneWarmPool} {
		d.tl.mapGroup(group, sc)
	}
	d.mu.Lock()
	d.bootDelay[groupOnDemand] = d.cfg.BootDelay
	d.mu.Unlock()
	for sc, ns := range namespaceOfScene {
		d.tl.mapNamespace(ns, sc)
	}
	s := &scene{}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		var err error
		s.spotInstance, s.spotNode, err = d.createGroup(gctx, groupSpot, 1)
		return err
	})
	g.Go(func() error {
		var err error
		if s.batchInstance, s.batchNode, err = d.createGroup(gctx, groupBatch, 1); err != nil {
			return err
		}
		return d.putHook(gctx, groupBatch, hookTerminate, terminating, "CONTINUE")
	})
	g.Go(func() error {
		if _, _, err := d.createGroup(gctx, groupWeb, 0); err != nil {
			return err
		}
		return d.putHook(gctx, groupWeb, hookLaunch, launching, "ABANDON")
	})
	g.Go(func() error {
		_, _, err := d.createGroup(gctx, groupOnDemand, 0)
		return err
	})
	for _, ns := range []string{nsShop, nsBatch} {
		g.Go(func() error { return d.namespace(gctx, ns) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}

	// The Spot node's pods are real processes (realpods.go); the others kwok's.
	pods := []testenv.PodSpec{
		{Namespace: nsBatch, Name: "report-job", Node: s.batchNode,
			Grace: max(60*time.Second, 2*d.cfg.PodShutdown), ShutdownAfter: d.cfg.PodShutdown},
	}
	g, gctx = errgroup.WithContext(ctx)
	g.Go(func() error { return d.createRealPods(gctx, s.spotNode) })
	g.Go(func() error { return d.createFrontend(gctx, s.spotNode) })
	for _, p := range pods {
		g.Go(func() error {
			_, err := d.env.CreatePod(gctx, p)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	one := intstr.FromInt32(1)
	if _, err := d.env.CreatePDB(ctx, testenv.PDBSpec{Namespace: nsShop, Name: "checkout",
		Selector: map[string]string{"app": "checkout"}, MinAvailable: &one}); err != nil {
		return nil, err
	}
	d.tl.say("scene set: Auto Scaling groups %s (1 instance), %s (empty), %s (1 instance, terminate hook), %s (empty, launch hook)",
		groupSpot, groupOnDemand, groupBatch, groupWeb)
	d.tl.say("          real node %s: checkout-a, checkout-b (PodDisruptionBudget minAvailable 1), worker (grace 300s), frontend (a Deployment's only replica), log-shipper (DaemonSet): real processes, preStop 2s",
		shortNode(s.spotNode))
	d.tl.say("          node %s: report-job (needs %s to shut down); hooks time out after %s; a new instance needs %s to boot",
		shortNode(s.batchNode), d.cfg.PodShutdown, d.cfg.HookTimeout, d.cfg.BootDelay)
	return s, nil
}

// createGroup creates an Auto Scaling group of the demo cluster and waits
// until its instances are InService with Ready nodes. It returns the first
// instance and its node.
func (d *demo) createGroup(ctx context.Context, name string, desired int32) (string, string, error) {
	_, err := d.as.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String(name), MinSize: aws.Int32(0), MaxSize: aws.Int32(4), DesiredCapacity: aws.Int32(desired),
		AvailabilityZones: []string{"us-east-1a"},
		LaunchTemplate:    &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String(name), Version: aws.String("$Latest")},
		Tags: []astypes.Tag{{Key: aws.String("kubernetes.io/cluster/" + clusterName), Value: aws.String("owned"),
			PropagateAtLaunch: aws.Bool(true)}},
	})
	if err != nil {
		return "", "", fmt.Errorf("creating Auto Scaling group %s: %w", name, err)
	}
	var id, node string
	err = d.tl.waitFor(ctx, sceneTimeout, fmt.Sprintf("%d instances of %s in service with Ready nodes", desired, name), func(context.Context) (bool, error) {
		n := 0
		for _, in := range d.sim.Instances() {
			if in.GroupName == name && in.LifecycleState == astypes.LifecycleStateInService && d.nodeOf(in.ID) != "" {
				if n == 0 {
					id, node = in.ID, d.nodeOf(in.ID)
				}
				n++
			}
		}
		return n == int(desired), nil
	})
	return id, node, err
}

func (d *demo) putHook(ctx context.Context, group, name, transition, defaultResult string) error {
	_, err := d.as.PutLifecycleHook(ctx, &autoscaling.PutLifecycleHookInput{
		AutoScalingGroupName: aws.String(group), LifecycleHookName: aws.String(name), LifecycleTransition: aws.String(transition),
		HeartbeatTimeout: aws.Int32(int32(d.cfg.HookTimeout / time.Second)), DefaultResult: aws.String(defaultResult),
	})
	if err != nil {
		return fmt.Errorf("putting lifecycle hook %s on %s: %w", name, group, err)
	}
	return nil
}

// namespace creates a namespace and waits for its default ServiceAccount,
// without which no pod can be created.
func (d *demo) namespace(ctx context.Context, name string) error {
	_, err := d.env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return d.tl.waitFor(ctx, sceneTimeout, "the default ServiceAccount of namespace "+name, func(ctx context.Context) (bool, error) {
		_, err := d.env.Client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// podsToEvict lists the pods on a node that a drain evicts (not those of
// DaemonSets), as "namespace/name".
func (d *demo) podsToEvict(ctx context.Context, node string) ([]string, error) {
	list, err := d.env.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of %s: %w", node, err)
	}
	var out []string
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.Kind == "DaemonSet" {
			continue
		}
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out, nil
}

// putEvent publishes an event on moto's default bus, as AWS would; the
// rules of the CloudFormation template route it to lifeboat's queue.
func (d *demo) putEvent(ctx context.Context, source, detailType string, when time.Time, detail any) error {
	b, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", detailType, err)
	}
	out, err := d.eb.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		Source: aws.String(source), DetailType: aws.String(detailType), Detail: aws.String(string(b)), Time: aws.Time(when),
	}}})
	if err != nil {
		return fmt.Errorf("putting %s on EventBridge: %w", detailType, err)
	}
	if out.FailedEntryCount > 0 {
		return fmt.Errorf("putting %s on EventBridge: %s", detailType, aws.ToString(out.Entries[0].ErrorMessage))
	}
	return nil
}

// spotInterruption: a Spot interruption notice for a node running three
// pods to move (two under a PodDisruptionBudget) and a DaemonSet pod. The
// replacements need a new node: the demo plays the cluster autoscaler and
// scales the on-demand group out when they are Pending, so the budget
// holds checkout's second pod back until the first one's replacement runs.
func (d *demo) spotInterruption(ctx context.Context, s *scene) error {
	pods, err := d.podsToEvict(ctx, s.spotNode)
	if err != nil {
		return err
	}
	d.tl.begin(sceneSpot, fmt.Sprintf("Spot interruption: real node %s (%s, a real kubelet) runs %d real pods to move, 2 of them under a PodDisruptionBudget, 1 a Deployment's only replica",
		shortNode(s.spotNode), s.spotInstance, len(pods)), pods)
	d.tl.add(Fact{Scene: sceneSpot, Source: srcAWS, Step: stepSignal, Lane: "EventBridge", Label: "Spot interruption notice",
		Text: fmt.Sprintf("%s for %s (terminate): AWS takes the instance in %s", route.SpotInterruption, s.spotInstance, spotNotice)})
	sent := time.Now()
	d.tl.deadline(sceneSpot, sent.Add(spotNotice), "AWS takes the instance (notice + "+spotNotice.String()+")")
	if err := d.putEvent(ctx, route.SourceEC2, route.SpotInterruption, sent,
		map[string]string{"instance-id": s.spotInstance, "instance-action": "terminate"}); err != nil {
		return err
	}

	// The cluster autoscaler's part: Pending pods make the on-demand group grow.
	var pending int
	err = d.tl.waitFor(ctx, sceneTimeout, "a replacement pod Pending", func(ctx context.Context) (bool, error) {
		list, err := d.env.Client.CoreV1().Pods(nsShop).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName="})
		pending = len(list.Items)
		return pending > 0, err
	})
	if err != nil {
		return err
	}
	d.tl.add(Fact{Scene: sceneSpot, Source: srcAWS, Step: stepSignal, Lane: "Auto Scaling API", Label: "scale out on-demand 0 → 1",
		Text: fmt.Sprintf("cluster autoscaler (played by the demo): %d pods Pending, SetDesiredCapacity %s 0 → 1", pending, groupOnDemand)})
	if _, err := d.as.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{
		AutoScalingGroupName: aws.String(groupOnDemand), DesiredCapacity: aws.Int32(1)}); err != nil {
		return fmt.Errorf("scaling %s out: %w", groupOnDemand, err)
	}

	err = d.tl.waitFor(ctx, d.cfg.BootDelay+sceneTimeout, "the Spot node drained and the replacements Ready", func(ctx context.Context) (bool, error) {
		n, total := d.tl.evicted(sceneSpot)
		return n == total && d.tl.count(sceneSpot, stepDrained) > 0 && d.tl.count(sceneSpot, stepPodReady) >= total, nil
	})
	if err != nil {
		return err
	}
	drained, _ := d.tl.first(sceneSpot, stepDrained, "lifeboat")
	var summary []string
	if at, ok := d.tl.first(sceneSpot, stepForecast, "lifeboat"); ok {
		summary = append(summary, fmt.Sprintf("drain forecast warned %s after the notice, %s before AWS acts: DrainForecastMiss names the pods that may not make it",
			at.Sub(sent).Round(100*time.Millisecond), (spotNotice-at.Sub(sent)).Round(time.Second)))
	}
	summary = append(summary, fmt.Sprintf("node empty %s after the notice, %s before AWS takes the instance: %d pods evicted, each shut down within its grace period",
		drained.Sub(sent).Round(100*time.Millisecond), (spotNotice-drained.Sub(sent)).Round(time.Second), len(pods)))
	for held, other := range map[string]string{"checkout-a": "checkout-b", "checkout-b": "checkout-a"} {
		refusedAt, ok := d.tl.first(sceneSpot, stepRefused, "pod "+held)
		if !ok {
			continue
		}
		if at, ok := d.tl.first(sceneSpot, stepEvicting, "pod "+held); ok {
			summary = append(summary, fmt.Sprintf("PodDisruptionBudget respected: %s's eviction was refused %d times over %s, until %s's replacement was Ready on the new node",
				held, d.tl.refusals(sceneSpot, held), at.Sub(refusedAt).Round(100*time.Millisecond), other))
		}
	}
	if g, ok := d.tl.graceOf(sceneSpot, "worker"); ok && g < 300 {
		summary = append(summary, fmt.Sprintf("worker's 300s grace period was capped to %ds: what is left before AWS acts, less --deadline-margin", g))
	}
	for _, key := range pods {
		if name := strings.TrimPrefix(key, nsShop+"/"); strings.HasPrefix(name, frontend+"-") {
			line, err := d.frontendSummary(ctx, name, s.spotNode)
			if err != nil {
				return err
			}
			summary = append(summary, line)
		}
	}
	summary = append(summary, "log-shipper (DaemonSet) stays until the instance goes")
	return d.endWithRecords(sceneSpot, pods, summary)
}

// scaleIn: the batch group is scaled in while its node runs a pod that
// needs PodShutdown to stop, longer than the terminate hook's timeout.
func (d *demo) scaleIn(ctx context.Context, s *scene) error {
	pods, err := d.podsToEvict(ctx, s.batchNode)
	if err != nil {
		return err
	}
	d.tl.begin(sceneScaleIn, fmt.Sprintf("Scale-in: %s goes from 1 to 0 while node %s runs report-job, which needs %s to shut down; the terminate hook times out after %s",
		groupBatch, shortNode(s.batchNode), d.cfg.PodShutdown, d.cfg.HookTimeout), pods)
	d.tl.add(Fact{Scene: sceneScaleIn, Source: srcAWS, Step: stepSignal, Lane: "Auto Scaling API", Label: "scale in 1 → 0",
		Text: fmt.Sprintf("SetDesiredCapacity %s 1 → 0: Auto Scaling picks %s to terminate", groupBatch, s.batchInstance)})
	if _, err := d.as.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{
		AutoScalingGroupName: aws.String(groupBatch), DesiredCapacity: aws.Int32(0)}); err != nil {
		return fmt.Errorf("scaling %s in: %w", groupBatch, err)
	}

	var action awssim.Action
	err = d.tl.waitFor(ctx, d.cfg.PodShutdown+sceneTimeout, "the terminate action to end and the node to go", func(context.Context) (bool, error) {
		a, ok := d.action(s.batchInstance, terminating, "")
		action = a
		in, _ := d.sim.Instance(s.batchInstance)
		// The facts too, so that the scene's lines are all out before its summary.
		seen := d.tl.count(sceneScaleIn, stepCompleted)+d.tl.count(sceneScaleIn, stepTimedOut) > 0 &&
			d.tl.count(sceneScaleIn, stepNodeDeleted) > 0 && d.tl.count(sceneScaleIn, stepLifecycleReport) > 0
		return ok && !a.Active() && in.EC2State == "terminated" && seen, nil
	})
	if err != nil {
		return err
	}
	if action.CompletedBy != awssim.CompletedByAPI {
		return fmt.Errorf("the terminate action of %s ended by %s with %s, not completed by lifeboat", s.batchInstance, action.CompletedBy, action.Result)
	}
	gone, _ := d.tl.first(sceneScaleIn, stepEvicted, "pod report-job")
	d.tl.end(sceneScaleIn,
		fmt.Sprintf("the %s hook was kept alive with %d heartbeats for %s, then completed with %s %s after report-job was gone",
			d.cfg.HookTimeout, action.Heartbeats, action.Completed.Sub(action.Started).Round(100*time.Millisecond),
			action.Result, action.Completed.Sub(gone).Round(time.Millisecond)),
		fmt.Sprintf("without a handler the action would have timed out at +%s and the instance gone with report-job still shutting down",
			d.cfg.HookTimeout))
	return nil
}

// action returns the last lifecycle action of an instance for a
// transition (and origin, when not empty).
func (d *demo) action(instanceID, transition, origin string) (awssim.Action, bool) {
	var found awssim.Action
	ok := false
	for _, a := range d.sim.Actions() {
		if a.InstanceID == instanceID && a.Transition == transition && (origin == "" || a.Origin == origin) {
			found, ok = a, true
		}
	}
	return found, ok
}

// warmPool: a warm pool is put on the web group; its instance's entry into
// the pool is completed at once, and when the group scales out, the
// instance leaves the pool and its launch action is completed once its
// node is Ready, after a boot longer than the hook's timeout.
func (d *demo) warmPool(ctx context.Context, _ *scene) error {
	d.tl.begin(sceneWarmPool, fmt.Sprintf("Warm pool: %s gets a warm pool, then scales out from it; a warm instance needs %s to boot and join, the launch hook times out after %s",
		groupWeb, d.cfg.BootDelay, d.cfg.HookTimeout), nil)
	d.tl.add(Fact{Scene: sceneWarmPool, Source: srcAWS, Step: stepSignal, Lane: "Auto Scaling API", Label: "PutWarmPool",
		Text: fmt.Sprintf("PutWarmPool %s: min size 1, pool state Stopped", groupWeb)})
	if _, err := d.as.PutWarmPool(ctx, &autoscaling.PutWarmPoolInput{AutoScalingGroupName: aws.String(groupWeb),
		MinSize: aws.Int32(1), MaxGroupPreparedCapacity: aws.Int32(1), PoolState: astypes.WarmPoolStateStopped}); err != nil {
		return fmt.Errorf("putting a warm pool on %s: %w", groupWeb, err)
	}

	var warm string
	err := d.tl.waitFor(ctx, sceneTimeout, "an instance Warmed:Stopped", func(context.Context) (bool, error) {
		warm = d.pooled(groupWeb, "")
		return warm != "" && d.tl.count(sceneWarmPool, stepCompleted) > 0 && d.tl.count(sceneWarmPool, stepLifecycleReport) > 0, nil
	})
	if err != nil {
		return err
	}
	entry, _ := d.action(warm, launching, "EC2")
	if entry.CompletedBy != awssim.CompletedByAPI || entry.Result != "CONTINUE" {
		return fmt.Errorf("the warm-pool entry of %s ended by %s with %s, not completed by lifeboat", warm, entry.CompletedBy, entry.Result)
	}

	d.mu.Lock()
	d.bootDelay[groupWeb] = d.cfg.BootDelay
	d.mu.Unlock()
	d.tl.add(Fact{Scene: sceneWarmPool, Source: srcAWS, Step: stepSignal, Lane: "Auto Scaling API", Label: "scale out 0 → 1",
		Text: fmt.Sprintf("SetDesiredCapacity %s 0 → 1: Auto Scaling takes %s out of the warm pool", groupWeb, warm)})
	if _, err := d.as.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{
		AutoScalingGroupName: aws.String(groupWeb), DesiredCapacity: aws.Int32(1)}); err != nil {
		return fmt.Errorf("scaling %s out: %w", groupWeb, err)
	}

	var join awssim.Action
	err = d.tl.waitFor(ctx, d.cfg.BootDelay+sceneTimeout, "the warm instance in service and the pool refilled", func(context.Context) (bool, error) {
		a, ok := d.action(warm, launching, "WarmPool")
		join = a
		in, _ := d.sim.Instance(warm)
		// Three completions: the pool entry, the way out, the refill's entry.
		seen := d.tl.count(sceneWarmPool, stepCompleted) >= 3 && d.tl.count(sceneWarmPool, stepLifecycleReport) >= 3
		return ok && !a.Active() && in.LifecycleState == astypes.LifecycleStateInService && d.pooled(groupWeb, warm) != "" && seen && d.nodeOf(warm) != "", nil
	})
	if err != nil {
		return err
	}
	if join.CompletedBy != awssim.CompletedByAPI || join.Result != "CONTINUE" {
		return fmt.Errorf("the launch action of %s from the warm pool ended by %s with %s, not completed by lifeboat", warm, join.CompletedBy, join.Result)
	}
	node := d.nodeOf(warm)
	ready, _ := d.tl.first(sceneWarmPool, stepNodeReady, nodeLane(node))
	if ready.IsZero() {
		ready, _ = d.tl.first(sceneWarmPool, stepNodeJoined, nodeLane(node))
	}
	d.tl.end(sceneWarmPool,
		fmt.Sprintf("entering the pool: completed with CONTINUE %s after the action started (the instance does not join the cluster then)",
			entry.Completed.Sub(entry.Started).Round(10*time.Millisecond)),
		fmt.Sprintf("leaving the pool: %d heartbeats carried the %s boot past the %s timeout; completed with CONTINUE %s after node %s was Ready",
			join.Heartbeats, d.cfg.BootDelay, d.cfg.HookTimeout, join.Completed.Sub(ready).Round(10*time.Millisecond), shortNode(node)),
		"the pool was refilled and its new instance's entry completed the same way")
	return nil
}

// pooled returns an instance of group other than except that is
// Warmed:Stopped with its warm-pool entry completed, or "".
func (d *demo) pooled(group, except string) string {
	for _, in := range d.sim.Instances() {
		if in.GroupName != group || in.ID == except || in.LifecycleState != astypes.LifecycleStateWarmedStopped {
			continue
		}
		if a, ok := d.action(in.ID, launching, "EC2"); ok && !a.Active() {
			return in.ID
		}
	}
	return ""
}
