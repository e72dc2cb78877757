package deploy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

const launching = "autoscaling:EC2_INSTANCE_LAUNCHING"

// A rollout under load (issue 22, "as shipped"): the chart's queue mode
// with its defaults (two replicas, leader election with a 15 s lease, a
// 2 min visibility timeout), a burst of 20 Spot notices being drained and a
// warm-pool launch action waiting for its node when the leader is stopped
// as a rollout stops it (SIGTERM). The leader hands every message back
// before it releases the Lease: the new leader receives them all within
// seconds of leading, none waits out the visibility timeout, every notice's
// drain finishes and its message is deleted, and the launch action is
// completed once, after its node joined. On 609520a the hand-back was
// refused (the Lease was released first, which shut the fence), and the new
// leader got none of the messages within 10 s.
func TestRolloutUnderLoad(t *testing.T) {
	const (
		notices  = 20
		podStop  = 20 * time.Second // each noticed node's pod takes this long to stop
		boot     = 25 * time.Second // the launched instance's node joins this long after it starts
		hookBeat = 30               // the launch hook's heartbeat timeout (AWS's minimum), seconds
	)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	w, err := newWorld(t, ctx, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	applyForTest(t, w.rbacObjects())
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	leaseName := settings(w.container())["LEASE_NAME"]
	holder := func() string {
		l, err := kube.Client.CoordinationV1().Leases(w.ns).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	a := w.startReplica(t, w.release+"-a")
	must(eventually(ctx, 30*time.Second, "replica a to lead", func() (bool, error) { return holder() == a.name, a.p.healthy() }))
	b := w.startReplica(t, w.release+"-b")

	// A group with a launch hook and a warm pool of one stopped instance.
	group, _, err := w.createGroup(0)
	must(err)
	_, err = w.as.PutLifecycleHook(ctx, &autoscaling.PutLifecycleHookInput{
		AutoScalingGroupName: aws.String(group), LifecycleHookName: aws.String("launch"),
		LifecycleTransition: aws.String(launching), HeartbeatTimeout: aws.Int32(hookBeat), DefaultResult: aws.String("ABANDON"),
		NotificationTargetARN: aws.String(w.queueARN), RoleARN: aws.String("arn:aws:iam::123456789012:role/lifeboat-hook"),
	})
	must(err)
	_, err = w.as.PutWarmPool(ctx, &autoscaling.PutWarmPoolInput{AutoScalingGroupName: aws.String(group), MinSize: aws.Int32(1),
		MaxGroupPreparedCapacity: aws.Int32(1), PoolState: astypes.WarmPoolStateStopped})
	must(err)
	var warm string
	must(eventually(ctx, 60*time.Second, "a warm-pool instance Warmed:Stopped", func() (bool, error) {
		for _, in := range sim.Instances() {
			if in.GroupName == group && in.LifecycleState == astypes.LifecycleStateWarmedStopped {
				warm = in.ID
				return true, nil
			}
		}
		return false, a.p.healthy()
	}))

	// 20 nodes, each with a pod that takes podStop to stop.
	var ids []string
	for i := range notices {
		n, err := kube.CreateNode(ctx, testenv.NodeSpec{})
		must(err)
		t.Cleanup(func() { _ = kube.DeleteNode(context.Background(), n.Name) })
		_, err = kube.CreatePod(ctx, testenv.PodSpec{Namespace: w.ns, Name: fmt.Sprintf("work-%02d", i), Node: n.Name, Grace: time.Minute, ShutdownAfter: podStop})
		must(err)
		ids = append(ids, instanceIDOf(n.Spec.ProviderID))
	}

	// The warm instance goes into service; its node boots for 25 s.
	joinDelays.Store(group, boot)
	must(w.scaleTo(group, 1))
	must(eventually(ctx, 30*time.Second, "a to receive the launch action", func() (bool, error) {
		act, ok := launchAction(warm)
		return ok && !receivedAt(act.Token, a.sqs).IsZero(), a.p.healthy()
	}))
	launch, _ := launchAction(warm)
	// The burst.
	sent := time.Now()
	for _, id := range ids {
		must(w.putSpot(id, sent))
	}
	must(eventually(ctx, 30*time.Second, "a to receive every notice and start draining", func() (bool, error) {
		for i, id := range ids {
			if receivedAt(id, a.sqs).IsZero() || !podTerminating(ctx, w.ns, fmt.Sprintf("work-%02d", i)) {
				return false, a.p.healthy()
			}
		}
		return true, nil
	}))

	// The rollout stops a.
	stopped := time.Now()
	must(a.p.signal(syscall.SIGTERM))
	must(eventually(ctx, 30*time.Second, "b to lead", func() (bool, error) { return holder() == b.name, b.p.healthy() }))
	bLeads := time.Now()
	t.Logf("b leads %v after a was stopped", bLeads.Sub(stopped).Round(time.Millisecond))

	// b receives every message within seconds of leading, not after the
	// visibility timeout (2 min).
	tokens := append(append([]string(nil), ids...), launch.Token)
	err = eventually(ctx, 10*time.Second, "b to receive every message a held", func() (bool, error) {
		for _, tok := range tokens {
			if receivedAt(tok, b.sqs).IsZero() {
				return false, b.p.healthy()
			}
		}
		return true, nil
	})
	if err != nil {
		missing := 0
		for _, tok := range tokens {
			if receivedAt(tok, b.sqs).IsZero() {
				missing++
			}
		}
		t.Fatalf("%v: b received %d of the %d messages a held within 10 s of leading; the others wait out the visibility timeout (a's log:\n%s)", err, len(tokens)-missing, len(tokens), a.p.tail(10))
	}
	var latest time.Duration
	for _, tok := range tokens {
		latest = max(latest, receivedAt(tok, b.sqs).Sub(bLeads))
	}
	t.Logf("b received all %d messages within %v of leading", len(tokens), latest.Round(time.Millisecond))
	if latest > 5*time.Second {
		t.Errorf("b received the last message a held %v after it led; want within 5 s", latest)
	}

	// Every notice is acted on to the end: its node's pod gone, its message
	// deleted.
	must(eventually(ctx, podStop+30*time.Second, "every noticed node drained and its message deleted", func() (bool, error) {
		deleted := deletedMessages(a.sqs, b.sqs)
		for i, id := range ids {
			if podExists(ctx, w.ns, fmt.Sprintf("work-%02d", i)) || deleted[messageOf(id, a.sqs, b.sqs)] == 0 {
				return false, b.p.healthy()
			}
		}
		return true, nil
	}))
	// The launch action: completed once, CONTINUE, after its node joined.
	must(eventually(ctx, boot+30*time.Second, "the launch action to end", func() (bool, error) {
		act, ok := launchAction(warm)
		return ok && !act.Active(), b.p.healthy()
	}))
	act, _ := launchAction(warm)
	// A heartbeat on its way while the completion is may be answered "No
	// active Lifecycle Action found" (heartbeats go on beside a slow
	// completion, by design); a call sent after the completion was
	// answered may not.
	late := callsAfterCompletion(launch.Token, a.as, b.as)
	if act.CompletedBy != awssim.CompletedByAPI || act.Result != "CONTINUE" || act.Completions != 1 || late != 0 {
		t.Errorf("launch action ended by %s with %q: %d completions, %d rejected calls (%d sent after the completion was answered); want one CompleteLifecycleAction CONTINUE and no call after it; the calls that named it:\n%s",
			act.CompletedBy, act.Result, act.Completions, act.Rejected, late, callsNaming(launch.Token, warm, map[string]*proxy{"a": a.as, "b": b.as, "a sqs": a.sqs, "b sqs": b.sqs}))
	}
	completions := 0
	for _, c := range append(okCalls(a.as, "CompleteLifecycleAction"), okCalls(b.as, "CompleteLifecycleAction")...) {
		if strings.Contains(string(c.reqBody), launch.Token) {
			completions++
		}
	}
	if completions != 1 {
		t.Errorf("the launch action's CompleteLifecycleAction answered %d times, want once", completions)
	}
	if done, _ := a.p.exited(); !done {
		t.Errorf("a still runs %v after SIGTERM", time.Since(stopped).Round(time.Second))
	} else if _, err := a.p.exited(); err != nil {
		t.Errorf("a exited with %v after SIGTERM, want status 0", err)
	}
}

// launchAction returns the warm-pool-to-group launch action of an instance.
func launchAction(instanceID string) (awssim.Action, bool) {
	for _, a := range sim.Actions() {
		if a.InstanceID == instanceID && a.Transition == launching && a.Origin == "WarmPool" && a.Destination == "AutoScalingGroup" {
			return a, true
		}
	}
	return awssim.Action{}, false
}

// instanceIDOf returns the instance ID of an AWS providerID.
func instanceIDOf(providerID string) string {
	return providerID[strings.LastIndex(providerID, "/")+1:]
}

// messageOf returns the ID of the message whose body holds s, as received
// through the proxies.
func messageOf(s string, ps ...*proxy) string {
	var id string
	for _, p := range ps {
		receivedMessages(p, func(_ time.Time, mid, _, body string) {
			if strings.Contains(body, s) {
				id = mid
			}
		})
	}
	return id
}

func podTerminating(ctx context.Context, ns, name string) bool {
	p, err := kube.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	return err == nil && p.DeletionTimestamp != nil
}

func podExists(ctx context.Context, ns, name string) bool {
	_, err := kube.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	return err == nil
}

// callsNaming lists, in the order they arrived, the AWS calls of each
// proxy whose request or answer names the token, or whose request names
// the instance: which replica sent what, when, and how it was answered.
func callsNaming(token, instanceID string, proxies map[string]*proxy) string {
	type line struct {
		at   time.Time
		text string
	}
	var lines []line
	for who, p := range proxies {
		for _, c := range p.snapshot() {
			if !strings.Contains(string(c.reqBody)+string(c.respBody), token) && !strings.Contains(string(c.reqBody), instanceID) {
				continue
			}
			lines = append(lines, line{c.at, fmt.Sprintf("%s %s %s %d (answered after %v)", c.at.Format("15:04:05.000"), who, c.action, c.status, c.answered.Sub(c.at).Round(time.Millisecond))})
		}
	}
	slices.SortFunc(lines, func(x, y line) int { return x.at.Compare(y.at) })
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.text + "\n")
	}
	return b.String()
}

// callsAfterCompletion counts the Auto Scaling calls naming token that
// arrived after the first successful CompleteLifecycleAction naming it
// was answered.
func callsAfterCompletion(token string, proxies ...*proxy) int {
	var answered time.Time
	for _, p := range proxies {
		for _, c := range okCalls(p, "CompleteLifecycleAction") {
			if strings.Contains(string(c.reqBody), token) && (answered.IsZero() || c.answered.Before(answered)) {
				answered = c.answered
			}
		}
	}
	if answered.IsZero() {
		return 0
	}
	n := 0
	for _, p := range proxies {
		for _, c := range p.snapshot() {
			if c.at.After(answered) && strings.Contains(string(c.reqBody), token) {
				n++
			}
		}
	}
	return n
}
