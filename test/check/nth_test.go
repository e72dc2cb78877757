package check

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"lifeboat.dev/lifeboat/test/testenv"
)

// runEnv is run with extra environment variables (as a manifest migrated
// from aws-node-termination-handler sets them).
func (w *world) runEnv(name string, env []string, extra ...string) *running {
	w.t.Helper()
	var r *running
	// A port taken between FreePort and lifeboat's bind: start again on
	// another (issue 22).
	_, _, err := testenv.StartOnFreePorts(w.ctx, name, 1, nil, func(ctx context.Context, _ int, ports []int) (*testenv.Process, error) {
		args := append(append([]string{"run", "--listen", fmt.Sprintf("127.0.0.1:%d", ports[0])}, w.flags()...), extra...)
		p, err := testenv.StartProcess(name, lifeboatBin, args, append(testenv.AWSEnv(), env...), w.t.TempDir())
		if err != nil {
			return nil, err
		}
		w.t.Cleanup(func() {
			p.Stop()
			if w.t.Failed() {
				w.t.Logf("---- %s log ----\n%s", name, p.Tail(100))
			}
		})
		r = &running{proc: p, base: fmt.Sprintf("http://127.0.0.1:%d", ports[0])}
		return p, testenv.WaitHTTP(ctx, p, nil, r.base+"/healthz")
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

// forwardProxy is a plain HTTP forward proxy that counts what it forwards.
func forwardProxy(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Host == "" {
			http.Error(w, "not a proxy request", http.StatusBadRequest)
			return
		}
		n.Add(1)
		out := r.Clone(r.Context())
		out.RequestURI = ""
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, vs := range resp.Header {
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(s.Close)
	return s, &n
}

// An NTH user's queue-mode settings, over the real process: the webhook URL
// from the environment (a Secret's valueFrom in a manifest), NTH's JSON
// headers and default template, through an HTTP proxy; and the IMDS-only
// switches NTH's own queue-mode manifest sets to false
// (ENABLE_SPOT_INTERRUPTION_DRAINING=false, ...): NTH ignores them in queue
// mode and drains on a Spot notice from the queue, and so does lifeboat
// (test/imds TestNTHSpotDrainingOff shows false in IMDS mode).
func TestNTHSettingsEndToEnd(t *testing.T) {
	w := newWorld(t, worldOptions{})
	hook := newWebhookReceiver(t)
	proxy, proxied := forwardProxy(t)
	instanceID := testenv.RandomInstanceID()
	node := kube.Node(t, testenv.NodeSpec{InstanceID: instanceID})
	pod, err := kube.CreatePod(w.ctx, testenv.PodSpec{Namespace: metav1.NamespaceDefault, Node: node.Name, ShutdownAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const nthTemplate = `{"text":"[NTH][Instance Interruption] EventID: {{ .EventID }} - Kind: {{ .Kind }} - Instance: {{ .InstanceID }} - Node: {{ .NodeName }} - Description: {{ .Description }} - Start Time: {{ .StartTime }}"}`
	lb := w.runEnv("lifeboat", []string{
		"WEBHOOK_URL=" + hook.URL + "/nth",
		"WEBHOOK_PROXY=" + proxy.URL,
		`WEBHOOK_HEADERS={"Authorization":"Bearer nth-header-secret"}`,
		"WEBHOOK_TEMPLATE=" + nthTemplate,
		"ENABLE_SPOT_INTERRUPTION_DRAINING=false",
		"ENABLE_SCHEDULED_EVENT_DRAINING=false",
		"ENABLE_REBALANCE_MONITORING=false",
		"ENABLE_REBALANCE_DRAINING=false",
		"KUBERNETES_EVENTS_EXTRA_ANNOTATIONS=team=infra,sample.annotation/number=two",
	}, "--leader-elect=false")
	w.poke()
	lb.waitReady(t, 30*time.Second, http.StatusOK, "ok: leader")

	out, err := w.eb.PutEvents(w.ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		Source: aws.String("aws.ec2"), DetailType: aws.String("EC2 Spot Instance Interruption Warning"), Time: aws.Time(time.Now()),
		Detail: aws.String(fmt.Sprintf(`{"instance-id":%q,"instance-action":"terminate"}`, instanceID)),
	}}})
	if err != nil || out.FailedEntryCount > 0 {
		t.Fatalf("putting the event: %v", err)
	}
	eventually(t, 30*time.Second, "the received and finished notifications", func() bool { return len(hook.received()) >= 2 })
	got := hook.received()
	for i, n := range got {
		text, _ := n["text"].(string)
		for _, want := range []string{"EventID: spot-interruption-" + instanceID, "Node: " + node.Name, "Instance: " + instanceID} {
			if !strings.Contains(text, want) {
				t.Errorf("notification %d text %q lacks %q", i, text, want)
			}
		}
	}
	if p := proxied.Load(); p != int32(len(got)) {
		t.Errorf("the proxy forwarded %d requests, the receiver got %d: every webhook must go through WEBHOOK_PROXY", p, len(got))
	}
	hook.mu.Lock()
	for _, a := range hook.auth {
		if a != "Bearer nth-header-secret" {
			t.Errorf("Authorization %q, want WEBHOOK_HEADERS's", a)
		}
	}
	hook.mu.Unlock()

	// Drained, as NTH drains in queue mode whatever those switches say.
	eventually(t, 30*time.Second, "the pod evicted", func() bool {
		_, err := kube.Client.CoreV1().Pods(pod.Namespace).Get(w.ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	eventually(t, 10*time.Second, "the Drained Event, with KUBERNETES_EVENTS_EXTRA_ANNOTATIONS", func() bool {
		list, err := kube.Client.CoreV1().Events(metav1.NamespaceDefault).List(w.ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.name": node.Name, "reason": "Drained"}.String()})
		return err == nil && len(list.Items) == 1 && list.Items[0].Annotations["team"] == "infra" && list.Items[0].Annotations["sample.annotation/number"] == "two"
	})
	if !strings.Contains(strings.Join(logLines(t, lb.proc), "\n"), "ENABLE_SPOT_INTERRUPTION_DRAINING (an aws-node-termination-handler variable) is ignored in queue mode") {
		t.Error("no warning that ENABLE_SPOT_INTERRUPTION_DRAINING is ignored in queue mode")
	}
	// The secrets never reach the log.
	log := strings.Join(logLines(t, lb.proc), "\n")
	if strings.Contains(log, "nth-header-secret") || strings.Contains(log, hook.URL+"/nth") {
		t.Error("the log contains a webhook secret")
	}
}
