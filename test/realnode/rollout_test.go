package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

// TestRolloutUnderLoadOnRealNodes is issue 22's rollout under load with a
// real `helm upgrade`: the chart's queue Deployment (defaults: two
// replicas, rolling update maxSurge 1, leader election with a 15 s lease,
// the 2 min visibility timeout) runs lifeboat's own image as real pods on
// a real node. While the leader drains 15 nodes after a burst of Spot
// notices (kwok nodes, each with a pod that takes 40 s to stop once
// evicted) and holds a warm-pool launch action whose real node boots
// later, the release is upgraded to a new image tag: kube-controller-
// manager rolls the Deployment, the kubelet stops the old pods with
// SIGTERM, and the Lease passes to a new pod (through the old standby when
// the ReplicaSet stops the leader first).
//
// At every change of the Lease's holder, every message still in flight is
// received again within 5 s of the new holder acquiring the Lease: none
// waits out the visibility timeout. Every notice's drain then finishes and
// its message is deleted, and the launch action is completed once, with
// CONTINUE, by one CompleteLifecycleAction (the Auto Scaling simulator
// counts them).
//
// Which pod received what is read from a recording proxy in front of SQS
// that the pods reach on their node's gateway, so it sees their addresses.
func TestRolloutUnderLoadOnRealNodes(t *testing.T) {
	const (
		notices   = 15
		podStop   = 40 * time.Second // each noticed node's pod takes this long to stop
		boot      = 40 * time.Second // the warm instance's node starts booting this long after the instance
		hookBeat  = 30               // the launch hook's heartbeat timeout (AWS's minimum), seconds
		warmGroup = "warm"
		withinLed = 5 * time.Second
	)
	w := newWorld(t, worldOptions{timeout: 5 * time.Minute, join: func(inst awssim.Instance) (time.Duration, bool) {
		if inst.GroupName == warmGroup {
			return boot, true
		}
		return 0, true
	}})
	ctl := w.CreateGroup("ctl", 1)[0]
	node := w.machines.Node(ctl)
	if node == nil {
		t.Fatalf("instance %s of group ctl has no real node", ctl)
	}
	ctx := w.Ctx
	rec := startSQSRecorder(t, node)
	values := w.queueChartValues(ctx, t, node, rec.podURL, "1.0.0", "1.1.0")
	ns := suite.Kube.Namespace(t)
	watch := startRolloutWatch(ctx, t, ns)
	applyObjects(ctx, t, renderChart(t, "lifeboat", ns, values("1.0.0")))
	old := waitLifeboatPods(ctx, t, ns, "1.0.0", 2, nil)
	first := waitLeaseHolder(ctx, t, ns, old)

	// A group with a warm pool of one stopped instance and a launch hook.
	w.CreateGroup(warmGroup, 0)
	if _, err := w.AS.PutWarmPool(ctx, &autoscaling.PutWarmPoolInput{AutoScalingGroupName: aws.String(warmGroup), MinSize: aws.Int32(1),
		MaxGroupPreparedCapacity: aws.Int32(1), PoolState: astypes.WarmPoolStateStopped}); err != nil {
		t.Fatal(err)
	}
	var warm string
	w.Eventually(30*time.Second, "an instance Warmed:Stopped", func() bool {
		for _, in := range w.Sim.Instances() {
			if in.GroupName == warmGroup && in.LifecycleState == astypes.LifecycleStateWarmedStopped {
				warm = in.ID
				return true
			}
		}
		return false
	})
	w.PutHook(warmGroup, "launch", launching, hookBeat, "ABANDON")

	// The noticed nodes, each with a pod that takes podStop to stop.
	ids, pods := make([]string, notices), make([]string, notices)
	var g errgroup.Group
	for i := range notices {
		ids[i], pods[i] = testenv.RandomInstanceID(), fmt.Sprintf("work-%02d", i)
		g.Go(func() error {
			n, err := suite.Kube.CreateNode(ctx, testenv.NodeSpec{InstanceID: ids[i]})
			if err != nil {
				return err
			}
			t.Cleanup(func() { _ = suite.Kube.DeleteNode(context.Background(), n.Name) })
			_, err = suite.Kube.CreatePod(ctx, testenv.PodSpec{Namespace: w.ns, Name: pods[i], Node: n.Name, Grace: time.Minute, ShutdownAfter: podStop})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}

	// The warm instance goes into service; its launch action waits for
	// the node.
	w.setDesired(warmGroup, 1)
	var launch awssim.Action
	w.Eventually(30*time.Second, "the leader to receive the launch action", func() bool {
		var ok bool
		launch, ok = launchAction(w, warm)
		return ok && rec.received(launch.Token, first, watch) > 0
	})
	// The burst.
	sent := time.Now()
	for _, id := range ids {
		w.PutEvent("aws.ec2", "EC2 Spot Instance Interruption Warning", sent, map[string]string{"instance-id": id, "instance-action": "terminate"})
	}
	w.Eventually(30*time.Second, "the leader to receive every notice and start draining", func() bool {
		for i, id := range ids {
			if rec.received(id, first, watch) == 0 || !podTerminating(ctx, w.ns, pods[i]) {
				return false
			}
		}
		return true
	})
	tokens := append(append([]string(nil), ids...), launch.Token)
	t.Logf("%s leads and holds %d messages (%d notices, the launch action) %v after the burst", first, len(tokens), notices, time.Since(sent).Round(time.Millisecond))

	// helm upgrade.
	upgrade := time.Now()
	applyObjects(ctx, t, renderChart(t, "lifeboat", ns, values("1.1.0")))
	upgraded := waitLifeboatPods(ctx, t, ns, "1.1.0", 2, old)
	last := waitLeaseHolder(ctx, t, ns, upgraded)
	t.Logf("upgrade to 1.1.0 rolled out in %v; leader %s", time.Since(upgrade).Round(time.Millisecond), last)

	// Every change of holder: the messages in flight are received again
	// within seconds of the new holder acquiring the Lease.
	w.Eventually(5*time.Second, "the watch to see "+last+" lead", func() bool {
		l := watch.leaderships()
		return len(l) > 0 && l[len(l)-1].holder == last
	})
	changes := watch.leaderships()
	time.Sleep(time.Until(changes[len(changes)-1].acquired.Add(withinLed + time.Second)))
	if len(changes) < 2 || changes[0].holder != first {
		t.Fatalf("Lease holders %v: want %s, then a new pod", changes, first)
	}
	for k, l := range changes[1:] {
		held := rec.inFlight(tokens, l.acquired)
		if k == 0 && len(held) != len(tokens) {
			t.Fatalf("at the first change of leader %d of the %d messages were in flight (want all): the rollout did not happen under load", len(held), len(tokens))
		}
		var latest time.Duration
		again := 0
		for _, tok := range held {
			at, by := rec.receivedAfter(tok, l.acquired, watch)
			if at.IsZero() {
				t.Errorf("%s (leads from %s): message %s was never received again: it waits out the visibility timeout", l.holder, l.acquired.Format(time.RFC3339Nano), tok)
				continue
			}
			if !slices.ContainsFunc(changes[1+k:], func(m leadership) bool { return m.holder == by }) {
				t.Errorf("message %s received again by %s, which is not %s or a later leader", tok, by, l.holder)
			}
			again++
			latest = max(latest, at.Sub(l.acquired))
		}
		started := watch.started(l.holder)
		t.Logf("%s: container started %s, acquired the Lease %s (the watch saw the holder change %v later); %d of the %d messages in flight received again, the last %v after the acquisition, %v after the container's start",
			l.holder, started.Format("15:04:05"), l.acquired.Format("15:04:05.000"), l.seen.Sub(l.acquired).Round(time.Millisecond),
			again, len(held), latest.Round(time.Millisecond), l.acquired.Add(latest).Sub(started).Round(time.Millisecond))
		if latest > withinLed {
			t.Errorf("%s received the last message in flight %v after it acquired the Lease; want within %v", l.holder, latest.Round(time.Millisecond), withinLed)
		}
	}

	// Every notice is acted on to the end: its node's pod gone, its message
	// deleted.
	w.Eventually(podStop+30*time.Second, "every noticed node drained and its message deleted", func() bool {
		for i, id := range ids {
			if podExists(ctx, w.ns, pods[i]) || !rec.deleted(id) {
				return false
			}
		}
		return true
	})
	t.Logf("every notice's drain finished and its message was deleted %v after the burst", time.Since(sent).Round(time.Millisecond))
	// The launch action: completed once, CONTINUE, after its node joined.
	w.Eventually(boot+60*time.Second, "the launch action to end", func() bool {
		a, ok := launchAction(w, warm)
		return ok && !a.Active()
	})
	a, _ := launchAction(w, warm)
	t.Logf("launch action: %s by %s at +%v after the upgrade, %d heartbeats", a.Result, a.CompletedBy, a.Completed.Sub(upgrade).Round(time.Millisecond), a.Heartbeats)
	if a.CompletedBy != awssim.CompletedByAPI || a.Result != "CONTINUE" || a.Completions != 1 || a.Rejected != 0 {
		t.Errorf("launch action ended by %s with %q: %d completions, %d rejected calls; want one CompleteLifecycleAction CONTINUE",
			a.CompletedBy, a.Result, a.Completions, a.Rejected)
	}
	// The message goes after the completion.
	w.Eventually(10*time.Second, "the launch action's message deleted", func() bool { return rec.deleted(launch.Token) })
}

// launchAction returns the warm-pool-to-group launch action of an instance.
func launchAction(w *world, instanceID string) (awssim.Action, bool) {
	a, ok := w.ActionFor(instanceID, launching)
	return a, ok && a.Origin == "WarmPool" && a.Destination == "AutoScalingGroup"
}

func podTerminating(ctx context.Context, ns, name string) bool {
	p, err := suite.Kube.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	return err == nil && p.DeletionTimestamp != nil
}

func podExists(ctx context.Context, ns, name string) bool {
	_, err := suite.Kube.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	return err == nil
}

// sqsRecorder is a proxy in front of moto's SQS that the pods of a real
// node reach on the node's gateway: it records who (the pod's address)
// received which message when, and which messages were deleted.
type sqsRecorder struct {
	podURL string // the proxy as the pods dial it

	mu       sync.Mutex
	receives []sqsReceive
	handles  map[string]string    // receipt handle -> message ID
	deletes  map[string]time.Time // message ID -> first deletion
}

type sqsReceive struct {
	at       time.Time
	ip       string
	id, body string
}

func startSQSRecorder(t *testing.T, node *testenv.RealNode) *sqsRecorder {
	t.Helper()
	r := &sqsRecorder{handles: map[string]string{}, deletes: map[string]time.Time{}}
	p, err := testenv.StartFaultProxy(testenv.FaultProxyOptions{Target: suite.Moto.Endpoint, Protocol: testenv.ProtocolJSON,
		Listen: "0.0.0.0:0", Intercept: r.record})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	u, err := url.Parse(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	r.podURL = "http://" + net.JoinHostPort(node.Gateway(), u.Port())
	return r
}

func (r *sqsRecorder) record(x testenv.Exchange) bool {
	if x.Stage != testenv.AfterResponse || x.Status != http.StatusOK {
		return true
	}
	ip, _, _ := net.SplitHostPort(x.Remote)
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch x.Action {
	case "ReceiveMessage":
		var out struct {
			Messages []struct{ MessageId, ReceiptHandle, Body string }
		}
		if json.Unmarshal(x.Response, &out) == nil {
			for _, m := range out.Messages {
				r.receives = append(r.receives, sqsReceive{at: now, ip: ip, id: m.MessageId, body: m.Body})
				r.handles[m.ReceiptHandle] = m.MessageId
			}
		}
	case "DeleteMessage":
		var in struct{ ReceiptHandle string }
		if json.Unmarshal(x.Request, &in) == nil {
			if id := r.handles[in.ReceiptHandle]; id != "" {
				if _, ok := r.deletes[id]; !ok {
					r.deletes[id] = now
				}
			}
		}
	}
	return true
}

// received counts the receipts by pod of the message whose body holds s.
func (r *sqsRecorder) received(s, pod string, watch *rolloutWatch) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.receives {
		if strings.Contains(m.body, s) && watch.podOf(m.ip) == pod {
			n++
		}
	}
	return n
}

// receivedAfter returns the first receipt after at of the message whose
// body holds s, and the pod that received it.
func (r *sqsRecorder) receivedAfter(s string, at time.Time, watch *rolloutWatch) (time.Time, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.receives {
		if strings.Contains(m.body, s) && m.at.After(at) {
			return m.at, watch.podOf(m.ip)
		}
	}
	return time.Time{}, ""
}

// inFlight returns those of the strings whose message was received before
// at and not deleted by then.
func (r *sqsRecorder) inFlight(ss []string, at time.Time) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range ss {
		for _, m := range r.receives {
			if !strings.Contains(m.body, s) || !m.at.Before(at) {
				continue
			}
			if d, ok := r.deletes[m.id]; !ok || d.After(at) {
				out = append(out, s)
			}
			break
		}
	}
	return out
}

// deleted reports whether the message whose body holds s was deleted.
func (r *sqsRecorder) deleted(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.receives {
		if _, ok := r.deletes[m.id]; ok && strings.Contains(m.body, s) {
			return true
		}
	}
	return false
}

// rolloutWatch polls a namespace's Lease and pods while a test runs: who
// held the Lease from when (its acquireTime), and which pod had which
// address and when its container started.
type rolloutWatch struct {
	mu    sync.Mutex
	leads []leadership
	ips   map[string]string    // pod IP -> pod name
	start map[string]time.Time // pod name -> its container's start
}

type leadership struct {
	holder   string
	acquired time.Time // the Lease's acquireTime, written by the holder
	seen     time.Time // when the watch first saw the holder
}

func (l leadership) String() string { return l.holder + "@" + l.acquired.Format("15:04:05.000") }

func startRolloutWatch(ctx context.Context, t *testing.T, ns string) *rolloutWatch {
	w := &rolloutWatch{ips: map[string]string{}, start: map[string]time.Time{}}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			w.poll(ctx, ns)
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *rolloutWatch) poll(ctx context.Context, ns string) {
	leases, lerr := suite.Kube.Client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	pods, perr := suite.Kube.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	w.mu.Lock()
	defer w.mu.Unlock()
	if perr == nil {
		for _, p := range pods.Items {
			if p.Status.PodIP != "" {
				w.ips[p.Status.PodIP] = p.Name
			}
			for _, c := range p.Status.ContainerStatuses {
				if r := c.State.Running; r != nil {
					w.start[p.Name] = r.StartedAt.Time
				}
			}
		}
	}
	if lerr != nil {
		return
	}
	for _, l := range leases.Items {
		h, at := l.Spec.HolderIdentity, l.Spec.AcquireTime
		if h == nil || *h == "" || at == nil {
			continue
		}
		if n := len(w.leads); n == 0 || w.leads[n-1].holder != *h {
			w.leads = append(w.leads, leadership{holder: *h, acquired: at.Time, seen: time.Now()})
		}
	}
}

// leaderships returns the Lease's holders in order.
func (w *rolloutWatch) leaderships() []leadership {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.leads)
}

// podOf returns the name of the pod that had an address.
func (w *rolloutWatch) podOf(ip string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ips[ip]
}

// started returns when a pod's container started (whole seconds).
func (w *rolloutWatch) started(pod string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.start[pod]
}
