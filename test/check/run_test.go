package check

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"lifeboat.dev/lifeboat/test/testenv"
)

// running is a `lifeboat run` process with its HTTP endpoint.
type running struct {
	proc *testenv.Process
	base string // http://127.0.0.1:PORT
}

// run starts `lifeboat run` with the world's flags and extra, and waits
// for /healthz.
func (w *world) run(name string, extra ...string) *running {
	w.t.Helper()
	return w.runEnv(name, nil, extra...)
}

func (r *running) get(t *testing.T, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(r.base + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// waitReady waits until /readyz answers want (status and body prefix).
func (r *running) waitReady(t *testing.T, d time.Duration, status int, body string) {
	t.Helper()
	var gotStatus int
	var gotBody string
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		gotStatus, gotBody = r.get(t, "/readyz")
		if gotStatus == status && strings.HasPrefix(gotBody, body) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("/readyz = %d %q after %v, want %d %q", gotStatus, gotBody, d, status, body)
}

// metric returns the value of a sample line of /metrics ("" if absent).
func (r *running) metric(t *testing.T, series string) string {
	t.Helper()
	_, body := r.get(t, "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// logLines returns the process's log lines.
func logLines(t *testing.T, p *testenv.Process) []string {
	t.Helper()
	f, err := os.Open(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// poke puts an irrelevant message on the queue so that the long poll
// returns at once (otherwise the first receive takes up to 20 s).
func (w *world) poke() {
	w.t.Helper()
	w.must(w.sqs.SendMessage(w.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(w.stack.QueueURL),
		MessageBody: aws.String(`{"AccountId":"123456789012","RequestId":"5d2c1b4e-0000-4000-8000-000000000001","AutoScalingGroupARN":"arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:x:autoScalingGroupName/nodes-a","AutoScalingGroupName":"nodes-a","Service":"AWS Auto Scaling","Event":"autoscaling:TEST_NOTIFICATION","Time":"2026-01-01T00:00:00.000Z"}`)}))
}

// apiProxy forwards TCP to the kube-apiserver on a fixed port; stop and
// start make the API unreachable and reachable again for whoever uses it.
type apiProxy struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	l      net.Listener
	conns  []net.Conn
}

func newAPIProxy(t *testing.T) *apiProxy {
	// The first bind takes a port of the kernel's choosing (no race with
	// other processes, issue 22); start binds it again after a stop.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &apiProxy{t: t, addr: l.Addr().String(), target: strings.TrimPrefix(kube.URL, "https://")}
	p.serve(l)
	t.Cleanup(p.stop)
	return p
}

func (p *apiProxy) start() {
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serve(l)
}

func (p *apiProxy) serve(l net.Listener) {
	p.mu.Lock()
	p.l = l
	p.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

func (p *apiProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// kubeconfigVia writes a kubeconfig for the world's ServiceAccount that
// reaches the API server through addr.
func (w *world) kubeconfigVia(addr string) string {
	w.t.Helper()
	tok, err := kube.TokenFor(w.ctx, w.ns, "lifeboat")
	if err != nil {
		w.t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://" + addr, CertificateAuthorityData: kube.CA}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: tok}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	path := filepath.Join(w.t.TempDir(), "via-proxy.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		w.t.Fatal(err)
	}
	return path
}

// /healthz is the process; /readyz follows the node watch (so the API
// server, without asking it: issue 22) and the queue.
func TestReadiness(t *testing.T) {
	w := newWorld(t, worldOptions{})
	proxy := newAPIProxy(t)
	w.kubeconfig = w.kubeconfigVia(proxy.addr)
	lb := w.run("lifeboat", "--leader-elect=false")
	if status, body := lb.get(t, "/healthz"); status != http.StatusOK || body != "ok" {
		t.Fatalf("/healthz = %d %q", status, body)
	}
	w.poke()
	lb.waitReady(t, 30*time.Second, http.StatusOK, "ok: leader")
	if v := lb.metric(t, "lifeboat_leader"); v != "1" {
		t.Errorf("lifeboat_leader = %q, want 1", v)
	}

	proxy.stop()
	lb.waitReady(t, 20*time.Second, http.StatusServiceUnavailable, "node watch failing")
	if status, _ := lb.get(t, "/healthz"); status != http.StatusOK {
		t.Errorf("/healthz = %d while the API is unreachable; the process is alive", status)
	}
	proxy.start()
	lb.waitReady(t, 20*time.Second, http.StatusOK, "ok: leader")

	// The queue disappears: the leader's source fails, readiness follows.
	w.must(w.sqs.DeleteQueue(w.ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(w.stack.QueueURL)}))
	lb.waitReady(t, 40*time.Second, http.StatusServiceUnavailable, "leader, but the event source did not answer")
	if v := lb.metric(t, `lifeboat_source_healthy{source="sqs"}`); v != "0" {
		t.Errorf("lifeboat_source_healthy = %q, want 0", v)
	}
	w.must(w.sqs.CreateQueue(w.ctx, &sqs.CreateQueueInput{QueueName: aws.String(w.prefix + "-queue")}))
	w.poke()
	lb.waitReady(t, 40*time.Second, http.StatusOK, "ok: leader")
}

// A standby replica is ready (it waits for the lease); logs are JSON with
// fixed keys, and nothing is logged while idle.
func TestStandbyAndIdleLogs(t *testing.T) {
	w := newWorld(t, worldOptions{})
	a := w.run("lifeboat-a", "--pod-name", "lifeboat-a")
	eventually(t, 30*time.Second, "replica a to lead", func() bool { return a.metric(t, "lifeboat_leader") == "1" })
	b := w.run("lifeboat-b", "--pod-name", "lifeboat-b")
	w.poke()
	a.waitReady(t, 30*time.Second, http.StatusOK, "ok: leader")
	b.waitReady(t, 10*time.Second, http.StatusOK, "ok: standby")
	if v := b.metric(t, "lifeboat_leader"); v != "0" {
		t.Errorf("standby lifeboat_leader = %q, want 0", v)
	}

	// Idle: wait for the start-up lines to settle, then nothing more.
	eventually(t, 30*time.Second, "leader to consume the queue", func() bool {
		return strings.Contains(strings.Join(logLines(t, a.proc), "\n"), `"msg":"consuming queue"`)
	})
	time.Sleep(time.Second)
	before := map[string]int{"a": len(logLines(t, a.proc)), "b": len(logLines(t, b.proc))}
	time.Sleep(6 * time.Second) // more than two leader-election retry periods of the standby
	for name, p := range map[string]*testenv.Process{"a": a.proc, "b": b.proc} {
		lines := logLines(t, p)
		t.Logf("replica %s log:\n%s", name, strings.Join(lines, "\n"))
		if len(lines) != before[name] {
			t.Errorf("replica %s logged while idle:\n%s", name, strings.Join(lines[before[name]:], "\n"))
		}
		for _, line := range lines {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Errorf("replica %s: log line is not JSON: %s", name, line)
				continue
			}
			for _, k := range []string{"time", "level", "msg"} {
				if _, ok := rec[k]; !ok {
					t.Errorf("replica %s: log line without %q: %s", name, k, line)
				}
			}
		}
	}
}

// webhookReceiver is a real HTTP endpoint standing in for Slack or Teams.
type webhookReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []map[string]any
	auth   []string
}

func newWebhookReceiver(t *testing.T) *webhookReceiver {
	r := &webhookReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body map[string]any
		err := json.NewDecoder(req.Body).Decode(&body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil {
			body = map[string]any{"undecodable": err.Error()}
		}
		r.bodies = append(r.bodies, body)
		r.auth = append(r.auth, req.Header.Get("Authorization"))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *webhookReceiver) received() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]any(nil), r.bodies...)
}

// A Spot notice delivered three times gives one webhook notification
// when it is received and one when the node is done, and Events on the node.
func TestWebhookAndEventsEndToEnd(t *testing.T) {
	w := newWorld(t, worldOptions{})
	hook := newWebhookReceiver(t)
	const secretPath = "/services/T0000/B0000/e2eSECRETtoken"
	dir := t.TempDir()
	urlFile, headersFile := filepath.Join(dir, "url"), filepath.Join(dir, "headers")
	if err := os.WriteFile(urlFile, []byte(hook.URL+secretPath+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(headersFile, []byte("Authorization: Bearer e2e-header-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	instanceID := testenv.RandomInstanceID()
	node := kube.Node(t, testenv.NodeSpec{InstanceID: instanceID})
	lb := w.run("lifeboat", "--leader-elect=false", "--webhook-url-file", urlFile, "--webhook-headers-file", headersFile, "--webhook-template", "json")
	w.poke()
	lb.waitReady(t, 30*time.Second, http.StatusOK, "ok: leader")

	// The same notice three times (as redelivery or two rules would give it).
	when := time.Now()
	for range 3 {
		out, err := w.eb.PutEvents(w.ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
			Source: aws.String("aws.ec2"), DetailType: aws.String("EC2 Spot Instance Interruption Warning"), Time: aws.Time(when),
			Detail: aws.String(fmt.Sprintf(`{"instance-id":%q,"instance-action":"terminate"}`, instanceID)),
		}}})
		if err != nil || out.FailedEntryCount > 0 {
			t.Fatalf("putting the event: %v", err)
		}
	}
	eventually(t, 30*time.Second, "the received and finished notifications", func() bool { return len(hook.received()) >= 2 })
	time.Sleep(3 * time.Second) // and no more
	got := hook.received()
	if len(got) != 2 {
		t.Fatalf("webhook got %d notifications, want 2: %v", len(got), got)
	}
	for i, phase := range []string{"received", "finished"} {
		n := got[i]
		if n["phase"] != phase || n["node"] != node.Name || n["instanceID"] != instanceID || n["kind"] != "spot-interruption" || n["action"] != "terminate" {
			t.Errorf("notification %d = %v, want phase %s for node %s (%s), kind spot-interruption", i, n, phase, node.Name, instanceID)
		}
	}
	hook.mu.Lock()
	for _, a := range hook.auth {
		if a != "Bearer e2e-header-secret" {
			t.Errorf("Authorization %q, want the header from the file", a)
		}
	}
	hook.mu.Unlock()
	if v := lb.metric(t, `lifeboat_notifications_total{result="sent"}`); v != "2" {
		t.Errorf(`lifeboat_notifications_total{result="sent"} = %q, want 2`, v)
	}

	// Kubernetes Events on the node, one per state change.
	for _, reason := range []string{"InterruptionReceived", "Cordoned", "Draining", "Drained"} {
		eventually(t, 10*time.Second, "Event "+reason, func() bool {
			list, err := kube.Client.CoreV1().Events(metav1.NamespaceDefault).List(w.ctx, metav1.ListOptions{
				FieldSelector: fields.Set{"involvedObject.name": node.Name, "reason": reason}.String()})
			return err == nil && len(list.Items) == 1 && list.Items[0].Count == 1
		})
	}
	// The secrets never reach the log.
	log := strings.Join(logLines(t, lb.proc), "\n")
	for _, s := range []string{"e2eSECRETtoken", "e2e-header-secret", hook.URL + secretPath} {
		if strings.Contains(log, s) {
			t.Errorf("the log contains the secret %q", s)
		}
	}
}
