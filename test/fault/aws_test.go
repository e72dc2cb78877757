package fault

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

// faultRate is the share of AWS requests that fail: LIFEBOAT_FAULT_RATE,
// default 0.3.
func faultRate(t *testing.T) float64 {
	t.Helper()
	v := os.Getenv("LIFEBOAT_FAULT_RATE")
	if v == "" {
		return 0.3
	}
	r, err := strconv.ParseFloat(v, 64)
	if err != nil || r < 0 || r >= 1 {
		t.Fatalf("LIFEBOAT_FAULT_RATE=%q: want a number in [0, 1)", v)
	}
	return r
}

// TestAWSFaults puts fault-injecting proxies between lifeboat and both SQS
// (moto) and Auto Scaling (the simulator). A share of the requests
// (LIFEBOAT_FAULT_RATE, default 30 %) fails in turn with a throttling
// error, a 500, a timeout (held 1 s, then the connection closes) or a
// connection reset. Meanwhile a group scales out two instances (launch
// actions), scales in two (terminate actions with drains and heartbeats)
// and gets two Spot notices. All work must complete as without faults, every lifecycle
// action completed by the API exactly once, and the request counts must
// stay bounded: retries back off, nothing loops hot.
func TestAWSFaults(t *testing.T) {
	s := seed(t)
	rate := faultRate(t)
	w := newWorld(t, worldOptions{
		flags:     []string{"--unknown-instance", "delete", "--heartbeat-interval", "2s", "--deadline-margin", "2s"},
		sqsFaults: testenv.FaultProxyOptions{Rate: rate, Seed: s, Hang: time.Second},
		asFaults:  testenv.FaultProxyOptions{Rate: rate, Seed: s + 1, Hang: time.Second},
	})
	group := "aws-" + testenv.UniqueName("g")
	ids := w.CreateGroup(group, 6)
	// A 10 s hook timeout with heartbeats every 2 s (--heartbeat-interval):
	// the same ratio of margin to SDK backoff as AWS's 30 s minimum with
	// the default interval of half the timeout; the --deadline-margin kept
	// before the action's timeout scales alike (5 s of 30 s: 2 s of 10 s).
	w.PutHook(group, "drain", terminating, 10, "ABANDON")
	w.PutHook(group, "launch", launching, 10, "ABANDON")
	ns := kube.Namespace(t)
	g, gctx := errgroup.WithContext(w.ctx)
	var pods []string
	for i, id := range ids[:4] {
		for k := range 2 {
			name := fmt.Sprintf("p%d-%d", i, k)
			pods = append(pods, name)
			node := w.NodeName(id)
			g.Go(func() error {
				_, err := kube.CreatePod(gctx, testenv.PodSpec{Namespace: ns, Name: name, Node: node, ShutdownAfter: time.Duration(2+4*k) * time.Second})
				return err
			})
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	before := map[string]testenv.ProxyStats{"sqs": w.sqsProxy.Stats(), "autoscaling": w.asProxy.Stats()}
	start := time.Now()
	if _, err := w.AS.SetDesiredCapacity(w.ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(8)}); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		t.Logf("instance %d: %s node %s", i, id, w.NodeName(id))
	}
	w.terminate(ids[0])
	w.terminate(ids[1])
	w.spot(ids[2], time.Now())
	w.spot(ids[3], time.Now())

	const actions = 4 // two launches, two terminations
	w.Eventually(2*time.Minute, "every lifecycle action to end", func() bool {
		n := 0
		for _, a := range w.Sim.Actions() {
			if a.GroupName == group {
				n++
				if a.Active() {
					return false
				}
			}
		}
		return n == actions
	})
	for _, a := range w.Sim.Actions() {
		if a.GroupName == group && (a.CompletedBy != awssim.CompletedByAPI || a.Result != "CONTINUE" || a.Completions != 1) {
			t.Errorf("%s action of %s: ended by %s with %q after %d completions; want one completion with CONTINUE by the API",
				a.Transition, a.InstanceID, a.CompletedBy, a.Result, a.Completions)
		}
	}
	for _, id := range ids[2:4] {
		name := w.NodeName(id)
		w.Eventually(time.Minute, "Spot node "+name+" drained", func() bool {
			n, ok := w.LookupNode(name)
			return ok && n.Spec.Unschedulable && n.Annotations["lifeboat.io/drained"] != ""
		})
	}
	w.Eventually(time.Minute, "every pod evicted", func() bool {
		for _, p := range pods {
			if _, err := kube.Client.CoreV1().Pods(ns).Get(w.ctx, p, metav1.GetOptions{}); err == nil {
				return false
			}
		}
		return true
	})
	w.Eventually(time.Minute, "the queue to be empty", w.QueueEmpty)
	elapsed := time.Since(start)

	// Bounded requests: no hot loop. Without faults this scenario takes
	// about 60 SQS and 20 Auto Scaling requests; the bounds allow for the
	// retries of a 30 % fault rate several times over, and are far below
	// what a retry loop without backoff makes in the same time.
	secs := elapsed.Seconds()
	for name, p := range map[string]*testenv.FaultProxy{"sqs": w.sqsProxy, "autoscaling": w.asProxy} {
		st := p.Stats()
		total := st.Total() - before[name].Total()
		faults := st.TotalFaults() - before[name].TotalFaults()
		t.Logf("%s: %d requests (%.1f/s) in %v, %d faults injected %v; by action %v", name, total, float64(total)/secs, elapsed.Round(time.Millisecond), faults, st.Faults, st.Requests)
		if rate > 0 && faults < len(testenv.AllFaults) {
			t.Errorf("%s: only %d faults injected; the scenario did not exercise every kind", name, faults)
		}
		if limit := 10 + 4*secs; float64(total) > limit {
			t.Errorf("%s: %d requests in %v, more than %.0f: a retry loop without backoff?", name, total, elapsed.Round(time.Millisecond), limit)
		}
	}
	if n := w.asProxy.Stats().Requests["CompleteLifecycleAction"]; n > actions*5 {
		t.Errorf("%d CompleteLifecycleAction requests for %d actions", n, actions)
	}
	// The SDK's retryer absorbs most faults: lifeboat itself saw few.
	var failures []string
	for _, line := range w.lb.Logs() {
		for _, msg := range []string{"lifecycle heartbeat failed", "receiving from queue failed", "deleting message failed",
			"releasing message failed", "extending message visibility failed", `"msg":"Failed"`, "launch lifecycle action failed"} {
			if strings.Contains(line, msg) {
				failures = append(failures, line)
			}
		}
	}
	faults := w.sqsProxy.Stats().TotalFaults() + w.asProxy.Stats().TotalFaults()
	t.Logf("lifeboat logged %d failures for %d injected faults (the rest were retried by the SDK)", len(failures), faults)
	if len(failures)*2 > faults && faults > 0 {
		t.Errorf("lifeboat logged %d failures for %d faults; the SDK's retries should absorb most:\n%s", len(failures), faults, strings.Join(failures, "\n"))
	}
	if exited, err := w.lb.Exited(); exited {
		t.Fatalf("lifeboat exited: %v", err)
	}
}
