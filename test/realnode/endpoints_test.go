package realnode

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/test/testenv"
)

// TestZeroFailedRequests is issue 25's first proof on real nodes. A
// one-replica Deployment serves HTTP behind a Service on one real node of
// a group of two (the second has room). A client sends a request every
// 20 ms to the Service's ready endpoints, following its EndpointSlices as
// a load balancer with IP targets does (a terminating pod is no target;
// no ready target is a failed request, the 503 such a load balancer
// answers). The pod's node is interrupted:
//
//   - Spot: an interruption warning comes; the node is powered off
//     spotDeadline later.
//   - scale-in: the instance is terminated out of its group, whose
//     terminate hook (30 s, CONTINUE) lifeboat holds until the drain is
//     over; the node is powered off when the action completes.
//
// The pod's preStop takes 2 s (the delay every pod behind such a load
// balancer needs, for the target's removal to propagate before the server
// stops); its server then stops gracefully.
//
//   - lifeboat without --replacement-first (the harm): the pod is evicted
//     at the notice; from then until its replacement is Ready on the other
//     node the service has no ready endpoint: requests fail.
//   - with --replacement-first: the replacement is Ready (its first
//     readiness probe answered, from its own record) before the old pod
//     is evicted (seen deleting through a watch; its own record's preStop
//     begins a moment to seconds later, when its kubelet gets to it): not
//     one request fails.
func TestZeroFailedRequests(t *testing.T) {
	for _, c := range []struct {
		name    string
		scaleIn bool
		first   bool
	}{
		{name: "spot, without replacement first"},
		{name: "spot, replacement first", first: true},
		{name: "scale-in, without replacement first", scaleIn: true},
		{name: "scale-in, replacement first", scaleIn: true, first: true},
	} {
		t.Run(c.name, func(t *testing.T) { zeroFailedRequests(t, c.scaleIn, c.first) })
	}
}

func zeroFailedRequests(t *testing.T, scaleIn, first bool) {
	const port = 8080
	var flags []string
	if first {
		flags = []string{"--replacement-first"}
	}
	w := newWorld(t, worldOptions{lifeboat: true, flags: flags})
	// One node after the other: two real nodes booting at once can race
	// on their shared parent cgroup (one's sweep of the free slots removes
	// it while the other sets its cpuset: ENODEV, seen on the first run).
	id := w.CreateGroup("web", 1)[0]
	w.setDesired("web", 2)
	var spare string
	w.Eventually(60*time.Second, "the second instance of web in service with a node", func() bool {
		for _, in := range w.Sim.Instances() {
			if in.GroupName == "web" && in.ID != id && in.LifecycleState == astypes.LifecycleStateInService && w.NodeName(in.ID) != "" {
				spare = in.ID
				return true
			}
		}
		return false
	})
	ctx := w.Ctx
	if scaleIn {
		w.PutHook("web", "drain", terminating, 30, "CONTINUE")
	}

	// The pod on the first node: the second is cordoned until then.
	setUnschedulable(ctx, t, w.NodeName(spare), true)
	spec := testenv.WorkloadSpec{Namespace: w.ns, Name: "web", RecordDir: w.records, HTTPPort: port,
		PreStop: 2 * time.Second, Shutdown: 500 * time.Millisecond, Grace: 10 * time.Second,
		NodeSelector: map[string]string{groupLabel: "web"}}
	oldPod := startService(ctx, t, spec)
	if oldPod.Spec.NodeName != w.NodeName(id) {
		t.Fatalf("the pod runs on %s, want %s", oldPod.Spec.NodeName, w.NodeName(id))
	}
	setUnschedulable(ctx, t, w.NodeName(spare), false)

	lb := startTargetClient(ctx, t, w.ns, spec.Name, port)
	eventually(ctx, t, 20*time.Second, "the client served by the pod", func() bool {
		return lb.servedBy(oldPod.Status.PodIP) >= 25
	})

	deleting := watchDeletions(ctx, t, w.ns)
	sent := time.Now()
	if scaleIn {
		_, err := w.AS.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
			InstanceId: aws.String(id), ShouldDecrementDesiredCapacity: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		w.Eventually(30*time.Second, "the node of "+id+" powered off", func() bool {
			_, ok := w.machines.PoweredOff(id)
			return ok
		})
	} else {
		w.PutEvent("aws.ec2", "EC2 Spot Instance Interruption Warning", sent, map[string]string{"instance-id": id, "instance-action": "terminate"})
		time.Sleep(time.Until(sent.Add(spotDeadline)))
		w.terminate(id)
	}
	off, _ := w.machines.PoweredOff(id)
	time.Sleep(time.Second)
	sum := lb.stop()

	recs, err := testenv.ReadWorkloadRecords(w.records, w.ns)
	if err != nil {
		t.Fatal(err)
	}
	old := recs[oldPod.Name]
	delete(recs, oldPod.Name)
	if len(recs) != 1 {
		t.Fatalf("want one replacement pod's record, got %d (%v)", len(recs), recs)
	}
	var newName string
	for name := range recs {
		newName = name
	}
	repl := recs[newName]
	t.Logf("old pod %s: %s", oldPod.Name, old)
	t.Logf("replacement %s: %s", newName, repl)
	t.Logf("requests: %s", sum)

	readyAt, ok := repl.At(testenv.WorkloadReadinessPassed)
	if !ok {
		t.Fatalf("the replacement %s never passed its readiness probe (record: %s)", newName, repl)
	}
	shutdownAt, ok := old.At(testenv.WorkloadPreStopBegin)
	if !ok {
		t.Fatalf("the old pod's shutdown never began (record: %s)", old)
	}
	evictedAt, ok := deleting(oldPod.Name)
	if !ok {
		t.Fatalf("the old pod %s was never seen deleting", oldPod.Name)
	}
	t.Logf("notice +0s; old pod evicted (seen deleting) +%.2fs; replacement Ready (its first readiness probe) +%.2fs; old pod's preStop +%.2fs; powered off +%.2fs",
		evictedAt.Sub(sent).Seconds(), readyAt.Sub(sent).Seconds(), shutdownAt.Sub(sent).Seconds(), off.Sub(sent).Seconds())
	assertGracefulShutdown(t, old, spec)
	if exit, ok := old.At(testenv.WorkloadExit); ok && !exit.Before(off) {
		t.Errorf("the old pod exited at %v, not before the power-off at %v", exit, off)
	}
	if sum.ok(newName) == 0 {
		t.Errorf("the replacement %s served no request", newName)
	}
	// The metric, read from the running binary: one replacement Ready with
	// the flag, none counted without it.
	wantReady := map[bool]float64{false: 0, true: 1}[first]
	if n := w.Metric("lifeboat_replacements_total", map[string]string{"result": "ready"}); n != wantReady {
		t.Errorf(`lifeboat_replacements_total{result="ready"} = %v, want %v`, n, wantReady)
	}
	if !first {
		if sum.failed == 0 {
			t.Errorf("no request failed without replacement first: the harm is not shown")
		}
		if !evictedAt.Before(readyAt) {
			t.Errorf("without replacement first, the old pod was evicted at +%.2fs, not before the replacement was Ready at +%.2fs",
				evictedAt.Sub(sent).Seconds(), readyAt.Sub(sent).Seconds())
		}
		return
	}
	if sum.failed != 0 {
		t.Errorf("%d requests failed with replacement first; want 0", sum.failed)
	}
	if !readyAt.Before(evictedAt) {
		t.Errorf("the replacement was Ready at +%.2fs, not before the old pod's eviction at +%.2fs",
			readyAt.Sub(sent).Seconds(), evictedAt.Sub(sent).Seconds())
	}
}

// watchDeletions watches a namespace's pods and returns when each was
// first seen deleting (a deletionTimestamp, or gone): its eviction or
// deletion, a few milliseconds late.
func watchDeletions(ctx context.Context, t *testing.T, ns string) func(pod string) (time.Time, bool) {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]time.Time{}
	mark := func(o any, gone bool) {
		if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		p, ok := o.(*corev1.Pod)
		if !ok || (!gone && p.DeletionTimestamp == nil) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if _, ok := seen[p.Name]; !ok {
			seen[p.Name] = time.Now()
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	f := informers.NewSharedInformerFactoryWithOptions(suite.Kube.Client, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { mark(o, false) },
		UpdateFunc: func(_, o any) { mark(o, false) },
		DeleteFunc: func(o any) { mark(o, true) },
	}); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	t.Cleanup(func() { cancel(); f.Shutdown() })
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the pod informer did not sync")
	}
	return func(pod string) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		at, ok := seen[pod]
		return at, ok
	}
}

// startService creates the workload's one-replica Deployment and a Service
// selecting it, and returns its pod once Ready.
func startService(ctx context.Context, t *testing.T, spec testenv.WorkloadSpec) corev1.Pod {
	t.Helper()
	c := suite.Kube.Client
	if _, err := c.AppsV1().Deployments(spec.Namespace).Create(ctx, testenv.WorkloadDeployment(spec, 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: spec.Namespace, Name: spec.Name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": spec.Name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}}}
	if _, err := c.CoreV1().Services(spec.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	eventually(ctx, t, 60*time.Second, "the Deployment's pod Ready", func() bool {
		l, err := c.CoreV1().Pods(spec.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + spec.Name})
		if err != nil || len(l.Items) != 1 || !testenv.PodReady(&l.Items[0]) {
			return false
		}
		pod = l.Items[0]
		return true
	})
	return pod
}

// targetClient is a load balancer with IP targets, reduced to what counts
// here: it follows a Service's EndpointSlices (discovery.k8s.io/v1, an
// informer), takes as targets the endpoints whose ready condition is true,
// and sends one request every 20 ms to the next target, on a new
// connection each time. A request fails when there is no target (a load
// balancer answers 503), or on any error or status other than 200.
type targetClient struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	slices map[string][]string // slice name -> ready addresses
	sum    requestSummary
}

// requestSummary counts a targetClient's requests.
type requestSummary struct {
	sent, failed, noTarget int
	first, last            time.Time      // the first and the last failure
	byPod                  map[string]int // answers by the pod's name
	byIP                   map[string]int
	lastError              string
}

func (s requestSummary) ok(pod string) int { return s.byPod[pod] }

func (s requestSummary) String() string {
	out := fmt.Sprintf("%d sent, %d failed (%d with no ready target)", s.sent, s.failed, s.noTarget)
	if s.failed > 0 {
		out += fmt.Sprintf(", failures from %s to %s (%.2fs; last error %q)", s.first.Format("15:04:05.000"), s.last.Format("15:04:05.000"),
			s.last.Sub(s.first).Seconds(), s.lastError)
	}
	return out + fmt.Sprintf(", answered by %v", s.byPod)
}

func startTargetClient(ctx context.Context, t *testing.T, ns, service string, port int) *targetClient {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	c := &targetClient{cancel: cancel, done: make(chan struct{}), slices: map[string][]string{},
		sum: requestSummary{byPod: map[string]int{}, byIP: map[string]int{}}}
	f := informers.NewSharedInformerFactoryWithOptions(suite.Kube.Client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = discoveryv1.LabelServiceName + "=" + service }))
	inf := f.Discovery().V1().EndpointSlices().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.update,
		UpdateFunc: func(_, o any) { c.update(o) },
		DeleteFunc: c.remove,
	}); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the EndpointSlice informer did not sync")
	}
	t.Cleanup(func() { c.stop(); f.Shutdown() })
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	go func() {
		defer close(c.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			c.request(ctx, hc, i, port)
		}
	}()
	return c
}

func (c *targetClient) update(o any) {
	s, ok := o.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	var ready []string
	for _, e := range s.Endpoints {
		if e.Conditions.Ready != nil && *e.Conditions.Ready {
			ready = append(ready, e.Addresses...)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slices[s.Name] = ready
}

func (c *targetClient) remove(o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	if s, ok := o.(*discoveryv1.EndpointSlice); ok {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.slices, s.Name)
	}
}

// targets returns the ready addresses, sorted.
func (c *targetClient) targets() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var all []string
	for _, a := range c.slices {
		all = append(all, a...)
	}
	slices.Sort(all)
	return all
}

// request sends the i-th request to the next target and counts it.
func (c *targetClient) request(ctx context.Context, hc *http.Client, i, port int) {
	targets := c.targets()
	if len(targets) == 0 {
		c.count("", "", fmt.Errorf("no ready target"))
		return
	}
	ip := targets[i%len(targets)]
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(ip, strconv.Itoa(port))+"/", nil)
	if err != nil {
		c.count(ip, "", err)
		return
	}
	resp, err := hc.Do(req)
	if ctx.Err() != nil {
		return // stopped: not a failure of the service
	}
	if err != nil {
		c.count(ip, "", err)
		return
	}
	var b [256]byte
	n, _ := resp.Body.Read(b[:])
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.count(ip, "", fmt.Errorf("status %s", resp.Status))
		return
	}
	c.count(ip, string(trimNewline(b[:n])), nil)
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func (c *targetClient) count(ip, pod string, err error) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sum.sent++
	if err == nil {
		c.sum.byPod[pod]++
		c.sum.byIP[ip]++
		return
	}
	c.sum.failed++
	if ip == "" {
		c.sum.noTarget++
	}
	if c.sum.first.IsZero() {
		c.sum.first = now
	}
	c.sum.last, c.sum.lastError = now, err.Error()
}

// servedBy returns how many requests the pod at ip answered.
func (c *targetClient) servedBy(ip string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sum.byIP[ip]
}

// stop stops the requests and returns their summary.
func (c *targetClient) stop() requestSummary {
	c.cancel()
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sum
}
