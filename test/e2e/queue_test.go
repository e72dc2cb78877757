package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"lifeboat.dev/lifeboat/internal/route"
	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

const (
	launching   = "autoscaling:EC2_INSTANCE_LAUNCHING"
	terminating = "autoscaling:EC2_INSTANCE_TERMINATING"
)

// F4: a scale-in of a node whose pod needs longer than the hook's heartbeat
// timeout to shut down. Without a handler the instance dies mid-shutdown;
// lifeboat heartbeats until the pod is gone, then completes with CONTINUE.
func TestScaleInLongGraceF4(t *testing.T) {
	for _, withLifeboat := range []bool{false, true} {
		name := map[bool]string{false: "before: no handler", true: "after: lifeboat"}[withLifeboat]
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{noLifeboat: !withLifeboat})
			group := "f4-" + testenv.UniqueName("g")
			ids := h.CreateGroup(group, 1)
			id := ids[0]
			// The hook's heartbeat timeout is 2 s (simulator-only; AWS's
			// minimum is 30 s): time is scaled so a 7200 s grace fits a test.
			h.PutHook(group, "drain", terminating, 2, "ABANDON")
			ns := kube.Namespace(t)
			pod, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: h.NodeName(id), Grace: 120 * time.Second, ShutdownAfter: 8 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			podGone := make(chan time.Time, 1)
			go func() {
				at, err := kube.WaitPodGone(h.Ctx, ns, pod.Name)
				if err == nil {
					podGone <- at
				}
			}()
			if _, err := h.AS.SetDesiredCapacity(h.Ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(0)}); err != nil {
				t.Fatal(err)
			}
			var action awssim.Action
			h.Eventually(60*time.Second, "the terminate action to end", func() bool {
				a, ok := h.ActionFor(id, terminating)
				action = a
				return ok && !a.Active()
			})
			if !withLifeboat {
				// The "before" picture: the hook timed out with the pod still shutting down.
				if action.CompletedBy != awssim.CompletedByHeartbeatTimeout {
					t.Fatalf("without a handler the action ended by %s, want %s", action.CompletedBy, awssim.CompletedByHeartbeatTimeout)
				}
				h.Eventually(10*time.Second, "the instance to terminate", func() bool { in, _ := h.Sim.Instance(id); return in.EC2State == "terminated" })
				if !h.podExists(ns, pod.Name) {
					t.Fatal("pod finished before the instance was terminated; the seed does not reproduce F4")
				}
				return
			}
			if action.CompletedBy != awssim.CompletedByAPI || action.Result != "CONTINUE" {
				t.Fatalf("action ended by %s with %s, want CompleteLifecycleAction CONTINUE", action.CompletedBy, action.Result)
			}
			if action.Heartbeats < 3 {
				t.Errorf("heartbeats = %d, want ≥ 3 over an 8 s drain with a 2 s timeout", action.Heartbeats)
			}
			if action.Completions != 1 {
				t.Errorf("completions = %d, want exactly 1", action.Completions)
			}
			var gone time.Time
			select {
			case gone = <-podGone:
			case <-time.After(10 * time.Second):
				t.Fatal("pod still there after the action completed")
			}
			// gone is when this test's poll saw the pod gone, up to ~0.5 s late.
			if gone.Sub(action.Completed) > time.Second {
				t.Errorf("pod gone at %v, more than 1 s after the action completed at %v", gone, action.Completed)
			}
			// The pod's 8 s shutdown ends up to 1 s early: kwok times it from
			// the whole-second deletionTimestamp (testenv's stage docs).
			if took := action.Completed.Sub(action.Started); took < 7*time.Second {
				t.Errorf("action completed %v after it started; the pod's shutdown takes 8 s (7 s at the least)", took)
			}
			h.Eventually(10*time.Second, "the instance to terminate", func() bool { in, _ := h.Sim.Instance(id); return in.EC2State == "terminated" })
		})
	}
}

// F1: warm-pool instances. Into the pool: completed at once. Out of the
// pool into service: completed only once the node is Ready (after a boot
// longer than the hook timeout), never before. An instance that never joins
// gets the timeout result. An instance launched before the hook existed is
// left alone.
func TestWarmPoolLaunchF1(t *testing.T) {
	h := newHarness(t, harnessOptions{flags: []string{"--launch-ready-timeout", "12s"}})
	group := "f1-" + testenv.UniqueName("g")
	before := h.CreateGroup(group, 1)[0]
	h.PutHook(group, "launch", launching, 4, "ABANDON")
	if _, err := h.AS.PutWarmPool(h.Ctx, &autoscaling.PutWarmPoolInput{AutoScalingGroupName: aws.String(group), MinSize: aws.Int32(2),
		MaxGroupPreparedCapacity: aws.Int32(3), PoolState: astypes.WarmPoolStateStopped}); err != nil {
		t.Fatal(err)
	}
	var pool []string
	h.Eventually(30*time.Second, "two warm-pool instances Warmed:Stopped", func() bool {
		pool = pool[:0]
		for _, in := range h.Sim.Instances() {
			if in.GroupName == group && in.LifecycleState == astypes.LifecycleStateWarmedStopped {
				pool = append(pool, in.ID)
			}
		}
		return len(pool) == 2
	})
	for _, id := range pool {
		a, ok := h.ActionFor(id, launching)
		if !ok || a.CompletedBy != awssim.CompletedByAPI || a.Result != "CONTINUE" || a.Destination != "WarmPool" {
			t.Errorf("warm-pool entry of %s: %+v; want completed CONTINUE by lifeboat", id, a)
		}
	}

	// Out of the pool: the node needs 6 s to boot, longer than the 4 s hook timeout.
	h.mu.Lock()
	h.joinDelay = 6 * time.Second
	h.mu.Unlock()
	if _, err := h.AS.SetDesiredCapacity(h.Ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	var joined string
	h.Eventually(45*time.Second, "a pool instance in service", func() bool {
		for _, id := range pool {
			if in, _ := h.Sim.Instance(id); in.LifecycleState == astypes.LifecycleStateInService {
				joined = id
				return true
			}
		}
		return false
	})
	a, _ := h.ActionFor(joined, launching)
	if a.Origin != "WarmPool" || a.Destination != "AutoScalingGroup" || a.CompletedBy != awssim.CompletedByAPI || a.Result != "CONTINUE" {
		t.Fatalf("warm pool -> group action: %+v; want completed CONTINUE by lifeboat", a)
	}
	readyAt := h.ReadyAt(joined)
	if readyAt.IsZero() || a.Completed.Before(readyAt) {
		t.Errorf("launch completed at %v, node ready at %v: completed before the node was Ready", a.Completed, readyAt)
	}
	if a.Heartbeats < 1 {
		t.Errorf("heartbeats = %d; the 6 s boot outlasts the 4 s timeout only with heartbeats", a.Heartbeats)
	}

	// An instance that never becomes a node gets --launch-timeout-result (ABANDON).
	var last string
	for _, id := range pool {
		if id != joined {
			last = id
		}
	}
	h.mu.Lock()
	h.noJoin[last] = true
	h.mu.Unlock()
	if _, err := h.AS.SetDesiredCapacity(h.Ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(3)}); err != nil {
		t.Fatal(err)
	}
	h.Eventually(45*time.Second, "the never-joining instance's launch action to end", func() bool {
		for _, a := range h.Sim.Actions() {
			if a.InstanceID == last && a.Origin == "WarmPool" && !a.Active() {
				return true
			}
		}
		return false
	})
	for _, a := range h.Sim.Actions() {
		if a.InstanceID == last && a.Origin == "WarmPool" {
			if a.CompletedBy != awssim.CompletedByAPI || a.Result != "ABANDON" {
				t.Errorf("never-joining instance: %+v; want ABANDON by lifeboat at --launch-ready-timeout", a)
			}
		}
	}

	// The instance from before the hook has no action and stays in service.
	if in, _ := h.Sim.Instance(before); in.LifecycleState != astypes.LifecycleStateInService {
		t.Errorf("instance launched before the hook is %s, want InService", in.LifecycleState)
	}
	for _, a := range h.Sim.Actions() {
		if a.InstanceID == before {
			t.Errorf("instance launched before the hook got an action: %+v", a)
		}
	}
}

// Spot interruption through a real EventBridge rule: cordon and taint at
// once, grace capped to the notice, PDB respected until the deadline with
// --delete-blocked-pods-before-deadline=false (on, the default, the
// blocked pod is deleted in time for its shutdown: TestBlockedPodGetsItsShutdown).
func TestSpotInterruption(t *testing.T) {
	h := newHarness(t, harnessOptions{flags: []string{"--deadline-margin", "2s", "--delete-blocked-pods-before-deadline=false"}})
	group := "spot-" + testenv.UniqueName("g")
	id := h.CreateGroup(group, 1)[0]
	node := h.NodeName(id)
	ns := kube.Namespace(t)
	slow, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: node, Grace: 300 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	guarded, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: node, Labels: map[string]string{"app": "guarded"}, ShutdownAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	one := intstr.FromInt32(1)
	if _, err := kube.CreatePDB(h.Ctx, testenv.PDBSpec{Namespace: ns, Name: "guard", Selector: map[string]string{"app": "guarded"}, MinAvailable: &one}); err != nil {
		t.Fatal(err)
	}
	// The notice was sent 108 s ago: 12 s are left before AWS acts.
	sent := time.Now().Add(-108 * time.Second)
	deadline := sent.Add(2 * time.Minute)
	h.PutEvent(route.SourceEC2, route.SpotInterruption, sent, map[string]string{"instance-id": id, "instance-action": "terminate"})
	put := time.Now()
	h.Eventually(10*time.Second, "node cordoned and tainted", func() bool {
		n := h.Node(node)
		return n.Spec.Unschedulable && testenv.HasTaint(n, "lifeboat.io/spot-interruption")
	})
	t.Logf("event put -> node cordoned: %v", time.Since(put).Round(time.Millisecond))
	h.Eventually(time.Until(deadline)+time.Second, "the 300 s-grace pod gone before the deadline", func() bool { return !h.podExists(ns, slow.Name) })
	time.Sleep(time.Until(deadline) + 2*time.Second)
	if !h.podExists(ns, guarded.Name) {
		t.Error("pod guarded by a PDB was removed (no force-delete configured)")
	}
	h.Eventually(10*time.Second, "a DeadlinePassed event on the node", func() bool { return h.NodeEvents(node, "DeadlinePassed") >= 1 })
}

// A Health scheduled change naming two instances drains both; duplicates
// and redeliveries give one drain and one Event per node.
func TestHealthScheduledChangeSeveralInstances(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	group := "health-" + testenv.UniqueName("g")
	ids := h.CreateGroup(group, 2)
	ns := kube.Namespace(t)
	var pods []string
	for _, id := range ids {
		p, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: h.NodeName(id), ShutdownAfter: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p.Name)
	}
	start := time.Now().Add(5 * time.Minute).UTC() // inside the default 10 m lead
	var entities []map[string]string
	for _, id := range ids {
		entities = append(entities, map[string]string{"entityValue": id, "status": "PENDING"})
	}
	detail := map[string]any{
		"eventArn":          "arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/" + testenv.UniqueName("e"),
		"service":           "EC2",
		"eventTypeCode":     "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
		"eventTypeCategory": "scheduledChange",
		"startTime":         start.Format(time.RFC1123),
		"statusCode":        "upcoming",
		"affectedEntities":  entities,
	}
	sent := time.Now().UTC().Truncate(time.Second)
	for range 3 { // one event and two duplicates
		h.PutEvent(route.SourceHealth, route.Health, sent, detail)
	}
	for i, id := range ids {
		node := h.NodeName(id)
		h.Eventually(20*time.Second, "node "+node+" drained", func() bool {
			n := h.Node(node)
			return n.Spec.Unschedulable && testenv.HasTaint(n, "lifeboat.io/scheduled-change") && !h.podExists(ns, pods[i]) &&
				n.Annotations["lifeboat.io/drained"] != ""
		})
	}
	// A fourth copy after the drains: recognised as done.
	h.PutEvent(route.SourceHealth, route.Health, sent, detail)
	time.Sleep(3 * time.Second)
	for _, id := range ids {
		node := h.NodeName(id)
		if got := h.NodeEvents(node, "Drained"); got != 1 {
			t.Errorf("node %s has %d Drained events, want 1", node, got)
		}
		if got := h.NodeEvents(node, "Cordoned"); got != 1 {
			t.Errorf("node %s has %d Cordoned events, want 1", node, got)
		}
	}
	h.Eventually(30*time.Second, "the queue to be empty", func() bool { return h.QueueEmpty() })
}

// Rebalance recommendations cordon only by default, and drain when configured.
func TestRebalance(t *testing.T) {
	for _, drainOn := range []bool{false, true} {
		t.Run(fmt.Sprintf("drain=%v", drainOn), func(t *testing.T) {
			var flags []string
			if drainOn {
				flags = []string{"--drain-on", "spot-interruption,rebalance-recommendation"}
			}
			h := newHarness(t, harnessOptions{flags: flags})
			id := h.CreateGroup("rebalance-"+testenv.UniqueName("g"), 1)[0]
			node := h.NodeName(id)
			ns := kube.Namespace(t)
			p, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: node, ShutdownAfter: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			h.PutEvent(route.SourceEC2, route.RebalanceRecommendation, time.Now(), map[string]string{"instance-id": id})
			h.Eventually(10*time.Second, "node cordoned and tainted", func() bool {
				n := h.Node(node)
				return n.Spec.Unschedulable && testenv.HasTaint(n, "lifeboat.io/rebalance-recommendation")
			})
			if drainOn {
				h.Eventually(15*time.Second, "pod evicted", func() bool { return !h.podExists(ns, p.Name) })
				return
			}
			h.Eventually(15*time.Second, "the message handled", func() bool { return h.QueueEmpty() })
			if !h.podExists(ns, p.Name) {
				t.Error("rebalance drained the node; the default is cordon only")
			}
		})
	}
}
