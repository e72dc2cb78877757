package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"lifeboat.dev/lifeboat/internal/clocktest"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/metrics"
)

// receiver is a webhook endpoint: it records requests and answers with the
// next status of script (then 200).
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
	hdrs   []http.Header
	script []int
	got    chan struct{}
}

func newReceiver(t *testing.T, script ...int) *receiver {
	r := &receiver{script: script, got: make(chan struct{}, 100)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, string(b))
		r.hdrs = append(r.hdrs, req.Header.Clone())
		status := http.StatusOK
		if len(r.script) > 0 {
			status, r.script = r.script[0], r.script[1:]
		}
		r.mu.Unlock()
		w.WriteHeader(status)
		r.got <- struct{}{}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...)
}

// waitRequests waits for n requests in total.
func (r *receiver) waitRequests(t *testing.T, n int) {
	t.Helper()
	for len(r.requests()) < n {
		select {
		case <-r.got:
		case <-time.After(10 * time.Second):
			t.Fatalf("got %d webhook requests, want %d", len(r.requests()), n)
		}
	}
}

type fixture struct {
	w    *Webhook
	m    *metrics.Metrics
	logs *syncWriter
}

func start(t *testing.T, o Options, clk clock.WithTicker) fixture {
	t.Helper()
	logs := &syncWriter{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m := metrics.New()
	if o.Backoff == 0 {
		o.Backoff = 10 * time.Millisecond
	}
	w, err := New(o, clk, log, m)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return fixture{w: w, m: m, logs: logs}
}

type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func note(phase Phase, node string) Notification {
	return Notification{Phase: phase, Node: node, InstanceID: "i-0123456789abcdef0", Kind: event.SpotInterruption,
		Action: "terminate", Deadline: time.Date(2026, 3, 1, 12, 2, 0, 0, time.UTC), Time: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func counter(t *testing.T, m *metrics.Metrics, result string) float64 {
	t.Helper()
	return value(t, m.Notifications.WithLabelValues(result))
}

// value reads a counter (prometheus/testutil would need modules go.mod lacks).
func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue()
}

// Both phases are delivered exactly once, however many signals repeat them.
func TestBothPhasesOnce(t *testing.T) {
	r := newReceiver(t)
	f := start(t, Options{URL: r.URL + "/hook", Template: TemplateJSON}, clocktest.AtEpoch())
	for range 3 {
		f.w.Notify(note(PhaseReceived, "node-a"))
	}
	for range 2 {
		f.w.Notify(note(PhaseFinished, "node-a"))
	}
	r.waitRequests(t, 2)
	time.Sleep(200 * time.Millisecond) // nothing more may arrive
	var got []Notification
	for _, b := range r.requests() {
		var n Notification
		if err := json.Unmarshal([]byte(b), &n); err != nil {
			t.Fatalf("body %q: %v", b, err)
		}
		got = append(got, n)
	}
	want := []Notification{note(PhaseReceived, "node-a"), note(PhaseFinished, "node-a")}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("delivered (-want +got):\n%s", d)
	}
	if s, d := counter(t, f.m, "sent"), counter(t, f.m, "deduplicated"); s != 2 || d != 3 {
		t.Errorf("sent = %v, deduplicated = %v; want 2 and 3", s, d)
	}
}

// After the dedupe window the same node and phase is sent again (a new
// interruption of a reused instance).
func TestDedupeWindow(t *testing.T) {
	r := newReceiver(t)
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	f := start(t, Options{URL: r.URL, DedupeWindow: 30 * time.Minute}, clk)
	f.w.Notify(note(PhaseReceived, "node-a"))
	clk.Step(29 * time.Minute)
	f.w.Notify(note(PhaseReceived, "node-a"))
	f.w.Notify(note(PhaseReceived, "node-b"))
	clk.Step(2 * time.Minute)
	f.w.Notify(note(PhaseReceived, "node-a"))
	r.waitRequests(t, 3)
	if d := counter(t, f.m, "deduplicated"); d != 1 {
		t.Errorf("deduplicated = %v, want 1", d)
	}
}

// A 500 is retried with backoff until the endpoint accepts.
func TestRetriesOn500(t *testing.T) {
	r := newReceiver(t, 500, 502, 200)
	f := start(t, Options{URL: r.URL}, clocktest.AtEpoch())
	f.w.Notify(note(PhaseReceived, "node-a"))
	r.waitRequests(t, 3)
	waitFor(t, func() bool { return counter(t, f.m, "sent") == 1 })
	if got := value(t, f.m.NotifyRetries); got != 2 {
		t.Errorf("retries = %v, want 2", got)
	}
	reqs := r.requests()
	if reqs[0] != reqs[2] {
		t.Errorf("retried body differs: %q vs %q", reqs[0], reqs[2])
	}
}

// A 4xx other than 429 is final: one request, counted as failed.
func TestClientErrorIsFinal(t *testing.T) {
	r := newReceiver(t, 404, 404, 404)
	f := start(t, Options{URL: r.URL}, clocktest.AtEpoch())
	f.w.Notify(note(PhaseReceived, "node-a"))
	waitFor(t, func() bool { return counter(t, f.m, "failed") == 1 })
	if n := len(r.requests()); n != 1 {
		t.Errorf("requests = %d, want 1 (no retry on 404)", n)
	}
}

// The URL and the headers are secrets: they reach the endpoint and never
// the logs, whether the endpoint fails or cannot be reached.
func TestSecretsNeverLogged(t *testing.T) {
	const token = "T0000000/B0000000/XXXXsecretXXXX"
	const auth = "Bearer sup3r-s3cr3t"
	r := newReceiver(t, 500, 500, 500)
	f := start(t, Options{URL: r.URL + "/services/" + token + "?key=qsecret", Headers: http.Header{"Authorization": {auth}}, Attempts: 3}, clocktest.AtEpoch())
	f.w.Notify(note(PhaseReceived, "node-a"))
	waitFor(t, func() bool { return strings.Contains(f.logs.String(), "webhook notification failed") })
	r.mu.Lock()
	gotAuth := r.hdrs[0].Get("Authorization")
	r.mu.Unlock()
	if gotAuth != auth {
		t.Errorf("endpoint got Authorization %q, want the configured header", gotAuth)
	}

	// An endpoint that cannot be reached: the HTTP client's error names the URL.
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	g := start(t, Options{URL: closed.URL + "/services/" + token, Headers: http.Header{"Authorization": {auth}}, Attempts: 2}, clocktest.AtEpoch())
	g.w.Notify(note(PhaseReceived, "node-a"))
	waitFor(t, func() bool { return strings.Contains(g.logs.String(), "webhook notification failed") })

	for name, logs := range map[string]string{"500": f.logs.String(), "unreachable": g.logs.String()} {
		if !strings.Contains(logs, "webhook notification failed") {
			t.Errorf("%s: the failure was not logged:\n%s", name, logs)
		}
		for _, secret := range []string{token, "XXXXsecretXXXX", "qsecret", "sup3r-s3cr3t", "/services/"} {
			if strings.Contains(logs, secret) {
				t.Errorf("%s: logs contain the secret %q:\n%s", name, secret, logs)
			}
		}
	}
}

func TestNewRefusesBadURLWithoutEchoingIt(t *testing.T) {
	_, err := New(Options{URL: "hooks.example.com/secret-path"}, clocktest.AtEpoch(), slog.New(slog.DiscardHandler), metrics.New())
	if err == nil || strings.Contains(err.Error(), "secret-path") {
		t.Fatalf("New error = %v; want an error that does not echo the URL", err)
	}
}

// The proxy option sends requests through the proxy.
func TestProxy(t *testing.T) {
	r := newReceiver(t)
	var mu sync.Mutex
	var proxied []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		proxied = append(proxied, req.URL.String())
		mu.Unlock()
		out, err := http.NewRequest(req.Method, req.URL.String(), req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out.Header = req.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(proxy.Close)
	f := start(t, Options{URL: r.URL + "/via-proxy", Proxy: proxy.URL}, clocktest.AtEpoch())
	f.w.Notify(note(PhaseReceived, "node-a"))
	r.waitRequests(t, 1)
	mu.Lock()
	defer mu.Unlock()
	if d := cmp.Diff([]string{r.URL + "/via-proxy"}, proxied); d != "" {
		t.Errorf("proxied requests (-want +got):\n%s", d)
	}
}

// Notify never blocks: what does not fit the queue is dropped and counted.
func TestNotifyDropsWhenFull(t *testing.T) {
	m := metrics.New()
	w, err := New(Options{URL: "http://127.0.0.1:1/x", QueueSize: 1}, clocktest.AtEpoch(), slog.New(slog.DiscardHandler), m)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		w.Notify(note(PhaseReceived, "node-a"))
		w.Notify(note(PhaseReceived, "node-b")) // no Run: the queue is full
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Notify blocked")
	}
	if got := counter(t, m, "dropped"); got != 1 {
		t.Errorf("dropped = %v, want 1", got)
	}
}

func TestBuiltinTemplates(t *testing.T) {
	n := note(PhaseReceived, "ip-10-0-1-23.ec2.internal")
	n.Detail = `a "quoted" <detail>`
	tests := []struct {
		template string
		check    func(t *testing.T, body map[string]any)
	}{
		{TemplateSlack, func(t *testing.T, body map[string]any) {
			want := `lifeboat: spot-interruption (terminate) for node ip-10-0-1-23.ec2.internal (i-0123456789abcdef0), AWS acts at 2026-03-01T12:02:00Z; cordoning and draining it. a "quoted" <detail>`
			if d := cmp.Diff(map[string]any{"text": want}, body); d != "" {
				t.Errorf("slack body (-want +got):\n%s", d)
			}
		}},
		{TemplateTeams, func(t *testing.T, body map[string]any) {
			att := body["attachments"].([]any)[0].(map[string]any)
			if att["contentType"] != "application/vnd.microsoft.card.adaptive" {
				t.Errorf("contentType = %v", att["contentType"])
			}
			card := att["content"].(map[string]any)
			blocks := card["body"].([]any)
			if got := blocks[0].(map[string]any)["text"]; got != "Interruption received: ip-10-0-1-23.ec2.internal" {
				t.Errorf("title = %v", got)
			}
			facts := blocks[2].(map[string]any)["facts"].([]any)
			if len(facts) != 5 {
				t.Errorf("facts = %v, want node, instance, kind, action, deadline", facts)
			}
		}},
		{TemplateJSON, func(t *testing.T, body map[string]any) {
			b, _ := json.Marshal(n)
			var want map[string]any
			_ = json.Unmarshal(b, &want)
			if d := cmp.Diff(want, body); d != "" {
				t.Errorf("json body (-want +got):\n%s", d)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.template, func(t *testing.T) {
			tm, err := loadTemplate(tt.template)
			if err != nil {
				t.Fatal(err)
			}
			b, err := tm.render(n)
			if err != nil {
				t.Fatal(err)
			}
			var body map[string]any
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			tt.check(t, body)
		})
	}
}

func TestTemplateFiles(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, text, wantErr string
	}{
		{"custom", `{"node": {{json .Node}}, "phase": {{json .Phase}}, "who": {{json (upper .Node)}}}`, ""},
		{"not JSON", `node {{.Node}} is {{.Phase}}`, "not JSON"},
		{"unknown field", `{"x": {{json .Secret}}}`, "Secret"},
		{"no environment", `{"x": {{json (env "HOME")}}}`, `function "env" not defined`},
		{"no other templates", `{{template "x"}}`, `template "x" not defined`},
		{"syntax", `{"x": {{json .Node}`, "parsing webhook template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".tmpl")
			if err := os.WriteFile(path, []byte(tt.text), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := New(Options{URL: "https://hooks.example.com/x", Template: path}, clocktest.AtEpoch(), slog.New(slog.DiscardHandler), metrics.New())
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New error = %v, want %q", err, tt.wantErr)
			}
		})
	}
	if _, err := New(Options{URL: "https://hooks.example.com/x", Template: filepath.Join(dir, "missing")}, clocktest.AtEpoch(), slog.New(slog.DiscardHandler), metrics.New()); err == nil || !strings.Contains(err.Error(), "neither slack, teams nor json") {
		t.Errorf("missing template file: %v", err)
	}
}

func TestParseHeaders(t *testing.T) {
	tests := []struct {
		name, text string
		want       http.Header
		wantErr    string
	}{
		{"several", "Authorization: Bearer abc\n# comment\n\nX-Team:  sre \nX-Team: ops\n",
			http.Header{"Authorization": {"Bearer abc"}, "X-Team": {"sre", "ops"}}, ""},
		{"value with colon", "X-Url: https://a/b", http.Header{"X-Url": {"https://a/b"}}, ""},
		{"no colon", "Authorization Bearer abc", nil, "line 1"},
		{"space in name", "X Team: a", nil, "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseHeaders(tt.text)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "abc") {
					t.Fatalf("error = %v, want %q without the value", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestReadSecretFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "url")
	if err := os.WriteFile(path, []byte("https://hooks.example.com/x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSecretFile(path)
	if err != nil || got != "https://hooks.example.com/x" {
		t.Errorf("ReadSecretFile = %q, %v", got, err)
	}
	if _, err := url.Parse(got); err != nil {
		t.Error(err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
