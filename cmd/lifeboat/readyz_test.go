package main

import (
	"context"
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
)

// fakeAPI is a Kubernetes API server that serves one node's list and
// watch, counts every request, and can be made to fail the node list and
// watch while its own /readyz still answers (a lost watch).
type fakeAPI struct {
	mu      sync.Mutex
	counts  map[string]int
	failing bool
	cut     chan struct{} // closed to end the open watches
}

func newFakeAPI() *fakeAPI { return &fakeAPI{counts: map[string]int{}, cut: make(chan struct{})} }

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	watching := r.URL.Query().Get("watch") == "true"
	key := r.Method + " " + r.URL.Path
	if watching {
		key += "?watch"
	}
	f.mu.Lock()
	f.counts[key]++
	failing, cut := f.failing, f.cut
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/api/v1/nodes" && failing:
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcd is gone","code":500}`)
	case r.URL.Path == "/api/v1/nodes" && watching:
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-cut:
		}
	case r.URL.Path == "/api/v1/nodes":
		fmt.Fprint(w, `{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[`+
			`{"metadata":{"name":"n1","resourceVersion":"1"},"spec":{"providerID":"aws:///us-east-1a/i-1234567890abcdef0"}}]}`)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/events"):
		w.WriteHeader(http.StatusCreated)
		_, _ = io.Copy(w, r.Body)
	case r.URL.Path == "/readyz" || r.URL.Path == "/livez" || r.URL.Path == "/healthz":
		fmt.Fprint(w, "ok")
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
	}
}

// fail makes the node list and watch fail from now on and ends the open
// watches, as an API server that lost its storage would.
func (f *fakeAPI) fail() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing = true
	close(f.cut)
}

// others returns the requests that are not the node list and watch or
// Events: what lifeboat asked for besides what it needs to work.
func (f *fakeAPI) others() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, n := range f.counts {
		if strings.HasSuffix(k, " /api/v1/nodes") || strings.HasSuffix(k, " /api/v1/nodes?watch") || strings.HasSuffix(k, "/events") {
			continue
		}
		out[k] = n
	}
	return out
}

// quietIMDS is a metadata service that announces nothing: an instance
// ID, 404 for every notice.
func quietIMDS() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.URL.Path == "/latest/api/token" {
			w.Header().Set("X-aws-ec2-metadata-token-ttl-seconds", "21600")
			fmt.Fprint(w, "token")
			return
		}
		if r.URL.Path == "/latest/meta-data/instance-id" {
			fmt.Fprint(w, "i-1234567890abcdef0")
			return
		}
		http.NotFound(w, r)
	})
}

// runIMDS runs `lifeboat run` in IMDS mode against api and the metadata
// service md, and returns the address of its /readyz.
func runIMDS(t *testing.T, api, md string) string {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, api)), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--mode=imds", "--node-name=n1", "--kubeconfig=" + kubeconfig, "--imds-endpoint=" + md}
	for attempt := 0; ; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		stderr := &syncBuffer{}
		go func() {
			done <- runCommand(ctx, append(args, "--listen="+addr), func(string) string { return "" }, io.Discard, stderr)
		}()
		select {
		case err := <-done:
			cancel()
			// The port was taken in between by another process (rare): try
			// another one.
			if attempt < 3 && err != nil && strings.Contains(err.Error(), "address already in use") {
				continue
			}
			t.Fatalf("lifeboat run ended at start: %v\n%s", err, stderr.String())
		case <-time.After(200 * time.Millisecond):
		}
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("lifeboat run: %v", err)
			}
			if t.Failed() {
				t.Logf("lifeboat's log:\n%s", stderr.String())
			}
		})
		return "http://" + addr + "/readyz"
	}
}

// probe asks /readyz once.
func probe(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// waitProbe asks /readyz until it answers want, for at most 15 s.
func waitProbe(t *testing.T, url string, want int) string {
	t.Helper()
	var code int
	var body string
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if code, body = probe(t, url); code == want {
			return body
		}
	}
	t.Fatalf("/readyz answered %d %q for 15 s, want %d", code, body, want)
	return ""
}

// TestReadyzAsksNoAPIServer (issue 22, defect 12): in IMDS mode every
// node's pod is probed every 5 s; a probe must cost the API server nothing
// (it asked /readyz each time: ~1,000 requests a second at 5,000 nodes).
// Readiness follows the node watch lifeboat keeps anyway: not ready until
// it has synced, and not ready while it fails, although the API server's
// own /readyz still answers.
func TestReadyzAsksNoAPIServer(t *testing.T) {
	api := newFakeAPI()
	// Closed after lifeboat stops (cleanups run last first): a server
	// closing waits for the open watch.
	apiSrv := httptest.NewServer(api)
	t.Cleanup(apiSrv.Close)
	md := httptest.NewServer(quietIMDS())
	t.Cleanup(md.Close)

	url := runIMDS(t, apiSrv.URL, md.URL)
	waitProbe(t, url, http.StatusOK)
	for range 20 {
		if code, body := probe(t, url); code != http.StatusOK {
			t.Fatalf("/readyz answered %d %q while everything works", code, body)
		}
	}
	if others := api.others(); len(others) > 0 {
		t.Errorf("readiness probes asked the API server %v; want no request besides the node list and watch", others)
	}

	api.fail()
	body := waitProbe(t, url, http.StatusServiceUnavailable)
	if !strings.Contains(body, "node watch") {
		t.Errorf("/readyz answered %q, want the reason to name the node watch", body)
	}
}

// TestReadyzWaitsForTheNodeWatch: a pod whose node watch never synced is
// not ready, whatever the API server's /readyz says.
func TestReadyzWaitsForTheNodeWatch(t *testing.T) {
	api := newFakeAPI()
	api.fail()
	// Closed after lifeboat stops (cleanups run last first): a server
	// closing waits for the open watch.
	apiSrv := httptest.NewServer(api)
	t.Cleanup(apiSrv.Close)
	md := httptest.NewServer(quietIMDS())
	t.Cleanup(md.Close)

	url := runIMDS(t, apiSrv.URL, md.URL)
	for range 20 {
		if code, body := probe(t, url); code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz answered %d %q before the node watch synced, want 503", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
