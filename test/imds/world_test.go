package imds

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"lifeboat.dev/lifeboat/internal/rebootmark"
	"lifeboat.dev/lifeboat/test/testenv"
)

// pollInterval is the metadata poll interval of the tests (time is scaled:
// the default is 1 s).
const pollInterval = 100 * time.Millisecond

// world is one test's node: a kwok node, its metadata mock (behind a
// counting proxy), a namespace for its pods, lifeboat's own pod on it, and
// lifeboat in IMDS mode for that node.
type world struct {
	t          testing.TB
	ctx        context.Context
	node       string
	instanceID string
	ns         string
	ownPod     string
	mock       *testenv.IMDS
	proxy      *imdsProxy
	// started is when lifeboat's process was started.
	started  time.Time
	lb       *testenv.Lifeboat
	imdsOpts testenv.IMDSOptions
}

type worldOptions struct {
	imds testenv.IMDSOptions
	// flags are extra lifeboat flags.
	flags []string
	// bootID is the node's status.nodeInfo.bootID ("" leaves none).
	bootID string
	// cordoned creates the node unschedulable, as an administrator would.
	cordoned bool
	// direct points lifeboat at the mock itself, without the proxy.
	direct bool
	// poll overrides pollInterval.
	poll time.Duration
	// hide are metadata paths the proxy answers 404 until shown.
	hide []string
	// bin overrides the suite's lifeboat binary.
	bin string
	// env is added to lifeboat's environment.
	env []string
	// instanceID is the node's instance (default: a random one).
	instanceID string
	// life bounds the world's context (default 4 min).
	life time.Duration
}

func newWorld(t testing.TB, o worldOptions) *world {
	t.Helper()
	if o.life <= 0 {
		o.life = 4 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.life)
	t.Cleanup(cancel)
	w := &world{t: t, ctx: ctx, instanceID: o.instanceID}
	if w.instanceID == "" {
		w.instanceID = testenv.RandomInstanceID()
	}
	n := kube.Node(t, testenv.NodeSpec{InstanceID: w.instanceID, Unschedulable: o.cordoned})
	w.node = n.Name
	if o.bootID != "" {
		w.setBootID(o.bootID)
	}
	w.ns = kube.Namespace(t)
	// lifeboat's own pod (a DaemonSet pod in production; bare here, so that
	// only --pod-name keeps it from being evicted).
	own, err := kube.CreatePod(ctx, testenv.PodSpec{Namespace: w.ns, Name: testenv.UniqueName("lifeboat"), Node: w.node, Grace: -1})
	if err != nil {
		t.Fatal(err)
	}
	w.ownPod = own.Name
	o.imds.InstanceID = w.instanceID
	w.imdsOpts = o.imds
	w.mock = testenv.StartIMDS(t, o.imds)
	w.proxy = newIMDSProxy(t, w.mock.URL)
	for _, p := range o.hide {
		w.proxy.hide(p)
	}
	endpoint := w.proxy.URL()
	if o.direct {
		endpoint = w.mock.URL
	}
	poll := pollInterval
	if o.poll > 0 {
		poll = o.poll
	}
	args := append([]string{
		"--mode", "imds",
		"--node-name", w.node,
		"--imds-endpoint", endpoint,
		"--imds-poll-interval", poll.String(),
		"--kubeconfig", kube.Kubeconfig,
		"--pod-name", w.ownPod,
		"--pod-namespace", w.ns,
		"--eviction-backoff", "500ms",
		"--log-level", "debug",
	}, o.flags...)
	bin := lifeboatBin
	if o.bin != "" {
		bin = o.bin
	}
	w.started = time.Now()
	w.lb, err = testenv.StartLifeboat(ctx, testenv.LifeboatOptions{Bin: bin, Args: args, Dir: t.TempDir(), Env: o.env})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.lb.Stop()
		if t.Failed() || os.Getenv("LIFEBOAT_TEST_LOGS") != "" {
			logs := w.lb.Logs()
			if len(logs) > 150 {
				logs = logs[len(logs)-150:]
			}
			t.Logf("---- lifeboat log (last %d lines) ----\n%s", len(logs), strings.Join(logs, "\n"))
		}
	})
	return w
}

// setBootID sets the node's status.nodeInfo.bootID, as the kubelet does at
// every start.
func (w *world) setBootID(id string) {
	w.t.Helper()
	n, err := kube.Client.CoreV1().Nodes().Get(w.ctx, w.node, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	n.Status.NodeInfo.BootID = id
	if _, err := kube.Client.CoreV1().Nodes().UpdateStatus(w.ctx, n, metav1.UpdateOptions{}); err != nil {
		w.t.Fatalf("setting boot ID: %v", err)
	}
}

func (w *world) nodeNow() *corev1.Node {
	w.t.Helper()
	n, err := kube.Client.CoreV1().Nodes().Get(w.ctx, w.node, metav1.GetOptions{})
	if err != nil {
		w.t.Fatalf("getting node %s: %v", w.node, err)
	}
	return n
}

func taintValue(n *corev1.Node, key string) (string, bool) {
	for _, t := range n.Spec.Taints {
		if t.Key == key && t.Effect == corev1.TaintEffectNoSchedule {
			return t.Value, true
		}
	}
	return "", false
}

func lifeboatTaints(n *corev1.Node) []string {
	var out []string
	for _, t := range n.Spec.Taints {
		if strings.HasPrefix(t.Key, "lifeboat.io/") {
			out = append(out, t.Key)
		}
	}
	return out
}

// pod creates a pod on the node that takes shutdown to stop.
func (w *world) pod(shutdown time.Duration) string {
	w.t.Helper()
	p, err := kube.CreatePod(w.ctx, testenv.PodSpec{Namespace: w.ns, Node: w.node, Grace: 30 * time.Second, ShutdownAfter: shutdown})
	if err != nil {
		w.t.Fatal(err)
	}
	return p.Name
}

func (w *world) podExists(name string) bool {
	_, err := kube.Client.CoreV1().Pods(w.ns).Get(w.ctx, name, metav1.GetOptions{})
	return err == nil
}

// nodeEvents counts the Kubernetes Events with reason on the node (their
// count field included: the recorder aggregates repeats).
func (w *world) nodeEvents(reason string) int {
	w.t.Helper()
	list, err := kube.Client.CoreV1().Events(metav1.NamespaceDefault).List(w.ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": w.node, "reason": reason}.String(),
	})
	if err != nil {
		w.t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		n += max(int(e.Count), 1)
	}
	return n
}

// metric returns a metric of the current lifeboat run, summed over the
// samples whose labels include the given name=value pairs.
func (w *world) metric(name string, kv ...string) float64 {
	w.t.Helper()
	labels := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		labels[kv[i]] = kv[i+1]
	}
	v, err := w.lb.Metric(w.ctx, name, labels)
	if err != nil {
		w.t.Fatal(err)
	}
	return v
}

// kubeRequests returns lifeboat's own Kubernetes requests (events
// excluded) by "VERB resource", from lifeboat_kube_requests_total.
func (w *world) kubeRequests() map[string]float64 {
	w.t.Helper()
	raw, err := w.lb.MetricsText(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		rest, ok := strings.CutPrefix(line, "lifeboat_kube_requests_total{")
		if !ok {
			continue
		}
		labels, value, _ := strings.Cut(rest, "} ")
		var verb, resource string
		for _, l := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(l, "=")
			v = strings.Trim(v, `"`)
			switch k {
			case "verb":
				verb = v
			case "resource":
				resource = v
			}
		}
		var f float64
		fmt.Sscan(value, &f)
		out[verb+" "+resource] += f
	}
	return out
}

// readyz returns the status of lifeboat's /readyz.
func (w *world) readyz() int {
	req, _ := http.NewRequestWithContext(w.ctx, http.MethodGet, w.lb.URL()+"/readyz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// eventually polls cond until it holds, or fails the test after d.
func (w *world) eventually(d time.Duration, what string, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if exited, err := w.lb.Exited(); exited {
			w.t.Fatalf("lifeboat exited (%v) while waiting for %s", err, what)
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		select {
		case <-w.ctx.Done():
			w.t.Fatalf("waiting for %s: %v", what, w.ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// holds checks that cond stays true for d.
func (w *world) holds(d time.Duration, what string, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !cond() {
			w.t.Fatalf("%s stopped holding", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (w *world) marker() (rebootmark.Marker, bool) {
	w.t.Helper()
	m, ok, err := rebootmark.DecodeMarker(w.nodeNow().Annotations[rebootmark.Annotation])
	if err != nil {
		w.t.Fatal(err)
	}
	return m, ok
}

// restartIMDS reconfigures the node's metadata mock (same port).
func (w *world) restartIMDS(o testenv.IMDSOptions) {
	w.t.Helper()
	o.InstanceID = w.instanceID
	w.imdsOpts = o
	if err := w.mock.Restart(w.ctx, o); err != nil {
		w.t.Fatal(err)
	}
}

// imdsProxy sits between lifeboat and the metadata mock: it counts the
// requests by method and path, tells IMDSv1 requests (no token) apart, and
// can hide metadata paths (404) to time when a signal appears.
type imdsProxy struct {
	srv *http.Server
	url string

	mu     sync.Mutex
	counts map[string]int
	v1     int
	hidden map[string]bool
	// firstServed is when a hidden path was first served after it was shown.
	firstServed map[string]time.Time
}

func newIMDSProxy(t testing.TB, target string) *imdsProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	// Bound here, on a port of the kernel's choosing: no other process can
	// take it between a look-up and the bind (issue 22, defect 13).
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &imdsProxy{counts: map[string]int{}, hidden: map[string]bool{}, firstServed: map[string]time.Time{}, url: "http://" + ln.Addr().String()}
	rp := httputil.NewSingleHostReverseProxy(u)
	p.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			path := strings.TrimPrefix(r.URL.Path, "/latest/meta-data/")
			p.mu.Lock()
			p.counts[r.Method+" "+r.URL.Path]++
			if r.Method == http.MethodGet && r.Header.Get("X-aws-ec2-metadata-token") == "" {
				p.v1++
			}
			hidden := p.hidden[path]
			if _, seen := p.firstServed[path]; !hidden && !seen {
				p.firstServed[path] = time.Now()
			}
			p.mu.Unlock()
			if hidden {
				http.NotFound(rw, r)
				return
			}
			rp.ServeHTTP(rw, r)
		})}
	go func() { _ = p.srv.Serve(ln) }() // ends with Close
	t.Cleanup(func() { _ = p.srv.Close() })
	return p
}

func (p *imdsProxy) URL() string { return p.url }

// hide makes a metadata path (e.g. spot/instance-action) answer 404.
func (p *imdsProxy) hide(path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hidden[path] = true
	delete(p.firstServed, path)
}

// show serves a hidden path again and returns when.
func (p *imdsProxy) show(path string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.hidden, path)
	return time.Now()
}

func (p *imdsProxy) served(path string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.firstServed[path]
	return t, ok
}

// total returns the number of requests so far and how many were IMDSv1.
func (p *imdsProxy) total() (all, v1 int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.counts {
		all += n
	}
	return all, p.v1
}

func (p *imdsProxy) count(methodPath string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[methodPath]
}
