package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"lifeboat.dev/lifeboat/internal/route"
	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

// --dry-run changes nothing anywhere: no cordon, no eviction, no lifecycle
// call, no message deletion.
func TestDryRunChangesNothing(t *testing.T) {
	h := newHarness(t, harnessOptions{flags: []string{"--dry-run"}})
	group := "dry-" + testenv.UniqueName("g")
	id := h.CreateGroup(group, 1)[0]
	node := h.NodeName(id)
	h.PutHook(group, "drain", terminating, 30, "CONTINUE")
	ns := kube.Namespace(t)
	p, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: node, ShutdownAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h.PutEvent(route.SourceEC2, route.SpotInterruption, time.Now(), map[string]string{"instance-id": id, "instance-action": "terminate"})
	if _, err := h.AS.SetDesiredCapacity(h.Ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(0)}); err != nil {
		t.Fatal(err)
	}
	h.Eventually(20*time.Second, "lifeboat to log what it would do", func() bool {
		return strings.Contains(h.Lifeboat.Process().Tail(400), "dry run: would complete lifecycle action") &&
			strings.Contains(h.Lifeboat.Process().Tail(400), "dry run: would delete message")
	})
	n := h.Node(node)
	if n.Spec.Unschedulable || testenv.HasTaint(n, "lifeboat.io/spot-interruption") || n.Annotations["lifeboat.io/events"] != "" {
		t.Errorf("dry run changed the node: unschedulable=%v taints=%v annotations=%v", n.Spec.Unschedulable, n.Spec.Taints, n.Annotations)
	}
	if !h.podExists(ns, p.Name) {
		t.Error("dry run evicted a pod")
	}
	for _, call := range []string{"CompleteLifecycleAction", "RecordLifecycleActionHeartbeat"} {
		if got := h.Sim.Calls(call); got != 0 {
			t.Errorf("dry run made %d %s calls", got, call)
		}
	}
	if h.QueueEmpty() {
		t.Error("dry run deleted messages")
	}
}

// A shared queue: messages about instances of another cluster are never
// acted on; by default they are left for their owner, with
// --unknown-instance=delete they are deleted. Lifecycle actions of another
// cluster's group are never completed.
func TestSharedQueueForeignInstances(t *testing.T) {
	for _, policy := range []string{"leave", "delete"} {
		t.Run(policy, func(t *testing.T) {
			h := newHarness(t, harnessOptions{flags: []string{"--unknown-instance", policy}})
			ours := h.CreateGroup("ours-"+testenv.UniqueName("g"), 1)[0]
			// Another cluster's group: no cluster tag; its instance is no node here.
			foreignGroup := "theirs-" + testenv.UniqueName("g")
			h.mu.Lock()
			h.foreignGroups[foreignGroup] = true
			h.mu.Unlock()
			if _, err := h.AS.CreateAutoScalingGroup(h.Ctx, &autoscaling.CreateAutoScalingGroupInput{
				AutoScalingGroupName: aws.String(foreignGroup), MinSize: aws.Int32(0), MaxSize: aws.Int32(2), DesiredCapacity: aws.Int32(0),
				LaunchConfigurationName: aws.String("lc"),
			}); err != nil {
				t.Fatal(err)
			}
			h.PutHook(foreignGroup, "launch", launching, 5, "CONTINUE")
			foreign := testenv.RandomInstanceID()
			h.PutEvent(route.SourceEC2, route.SpotInterruption, time.Now(), map[string]string{"instance-id": foreign, "instance-action": "terminate"})
			if _, err := h.AS.SetDesiredCapacity(h.Ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(foreignGroup), DesiredCapacity: aws.Int32(1)}); err != nil {
				t.Fatal(err)
			}
			var foreignAction awssim.Action
			h.Eventually(30*time.Second, "the foreign launch action to end", func() bool {
				for _, a := range h.Sim.Actions() {
					if a.GroupName == foreignGroup {
						foreignAction = a
						return !a.Active()
					}
				}
				return false
			})
			if h.Metric("lifeboat_unknown_instance_events_total", nil) < 1 {
				t.Error("foreign events were not counted as unknown instances")
			}
			if foreignAction.CompletedBy == awssim.CompletedByAPI {
				t.Errorf("lifeboat completed another cluster's launch action: %+v", foreignAction)
			}
			n := h.Node(h.NodeName(ours))
			if n.Spec.Unschedulable {
				t.Error("our node was cordoned for another cluster's interruption")
			}
			if policy == "delete" {
				h.Eventually(20*time.Second, "foreign messages deleted", func() bool { return h.QueueEmpty() })
			} else if h.QueueEmpty() {
				t.Error("messages about another cluster's instances were deleted under --unknown-instance=leave")
			}
		})
	}
}

// A terminate hook that notifies the queue directly (no EventBridge rule):
// the flat Auto Scaling notification drives the drain, and the
// TEST_NOTIFICATION sent when the hook is created is deleted.
func TestDirectHookNotification(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	for _, r := range h.Stack.Rules {
		if strings.HasSuffix(r, "-LifecycleRule") {
			if _, err := h.EB.RemoveTargets(h.Ctx, &eventbridge.RemoveTargetsInput{Rule: aws.String(r), Ids: []string{"lifeboat"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := h.EB.DeleteRule(h.Ctx, &eventbridge.DeleteRuleInput{Name: aws.String(r)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	group := "direct-" + testenv.UniqueName("g")
	id := h.CreateGroup(group, 1)[0]
	if _, err := h.AS.PutLifecycleHook(h.Ctx, &autoscaling.PutLifecycleHookInput{
		AutoScalingGroupName: aws.String(group), LifecycleHookName: aws.String("drain"),
		LifecycleTransition: aws.String(terminating), HeartbeatTimeout: aws.Int32(2), DefaultResult: aws.String("ABANDON"),
		NotificationTargetARN: aws.String(h.Stack.QueueARN), RoleARN: aws.String("arn:aws:iam::123456789012:role/asg-to-sqs"),
	}); err != nil {
		t.Fatal(err)
	}
	ns := kube.Namespace(t)
	if _, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: h.NodeName(id), ShutdownAfter: 4 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.AS.SetDesiredCapacity(h.Ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(0)}); err != nil {
		t.Fatal(err)
	}
	var a awssim.Action
	h.Eventually(40*time.Second, "the terminate action to end", func() bool {
		x, ok := h.ActionFor(id, terminating)
		a = x
		return ok && !x.Active()
	})
	if a.CompletedBy != awssim.CompletedByAPI || a.Result != "CONTINUE" || a.Heartbeats < 1 {
		t.Errorf("action %+v; want completed CONTINUE by lifeboat after heartbeats", a)
	}
	// State-change messages about the terminated instance stay (it is no
	// node any more: left for an owner); the TEST_NOTIFICATION was deleted.
	h.Eventually(20*time.Second, "the TEST_NOTIFICATION counted and deleted", func() bool {
		return h.Metric("lifeboat_messages_ignored_total", map[string]string{"reason": "test-notification"}) >= 1
	})
}
