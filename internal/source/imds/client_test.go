package imds

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/event"
)

// httpIMDS emulates the metadata service over HTTP: tokens on PUT
// /latest/api/token (or 404 when tokens are off), GETs under
// /latest/meta-data/ (401 without a token when v2 is required).
type httpIMDS struct {
	tokens     bool // the token endpoint exists
	requireV2  bool
	rejectAll  bool // every token is refused (401), as after a restart of the service
	mu         sync.Mutex
	puts, gets int
	v1Gets     int
	docs       map[string]string
}

func (h *httpIMDS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.URL.Path == "/latest/api/token" {
		h.puts++
		if !h.tokens || r.Method != http.MethodPut {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds") == "" {
			http.Error(w, "missing TTL", http.StatusBadRequest)
			return
		}
		w.Header().Set("X-aws-ec2-metadata-token-ttl-seconds", "300")
		_, _ = w.Write([]byte("tok"))
		return
	}
	h.gets++
	tok := r.Header.Get("X-aws-ec2-metadata-token")
	if tok == "" {
		h.v1Gets++
		if h.requireV2 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
	} else if tok != "tok" || h.rejectAll {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	body, ok := h.docs[strings.TrimPrefix(r.URL.Path, "/latest/meta-data/")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	_, _ = w.Write([]byte(body))
}

func TestClientModes(t *testing.T) {
	docs := map[string]string{PathInstanceID: testInstance, PathTargetState: "Terminated"}
	tests := []struct {
		name       string
		tokens     bool // the service has a token endpoint
		requireV2  bool
		allowV1    bool
		wantErr    bool
		wantV1Gets bool
	}{
		{"IMDSv2 only", true, true, false, false, false},
		{"IMDSv2 only, fallback allowed but unused", true, true, true, false, false},
		{"no token endpoint, v1 not allowed: an outage", false, false, false, true, false},
		{"no token endpoint, --imds-allow-v1: IMDSv1", false, false, true, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &httpIMDS{tokens: tt.tokens, requireV2: tt.requireV2, docs: docs}
			srv := httptest.NewServer(h)
			defer srv.Close()
			s := New(NewClient(srv.URL, tt.allowV1), clock.RealClock{}, discard, Options{})
			var r recorder
			for range 3 {
				err := s.Poll(t.Context(), r.submit)
				if (err != nil) != tt.wantErr {
					t.Fatalf("Poll error = %v, want error %v", err, tt.wantErr)
				}
			}
			var want [][]event.Kind
			if !tt.wantErr {
				want = [][]event.Kind{{event.LifecycleTerminate}}
			}
			if d := cmp.Diff(want, r.kinds()); d != "" {
				t.Errorf("submitted (-want +got):\n%s", d)
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			if (h.v1Gets > 0) != tt.wantV1Gets {
				t.Errorf("IMDSv1 GETs = %d, want some: %v", h.v1Gets, tt.wantV1Gets)
			}
			if tt.tokens && h.puts != 1 {
				t.Errorf("token PUTs = %d over 3 polls, want 1 (cached)", h.puts)
			}
		})
	}
}

// TestClientDown: nothing listens; the client's retries and timeouts end in an
// error well within a poll's budget.
func TestClientDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	s := New(NewClient(url, false), clock.RealClock{}, discard, Options{})
	start := time.Now()
	if err := s.Poll(t.Context(), func([]event.Event) { t.Error("submitted while down") }); err == nil {
		t.Fatal("Poll against a closed port: no error")
	}
	if d := time.Since(start); d > 6*time.Second {
		t.Errorf("a failed poll took %v", d)
	}
}

// A token endpoint that starts answering 404 after lifeboat has its
// instance ID (tokens rejected with 401, no new one to be had) is an
// outage, not "every path is absent": the client's error must be
// recognised as a token failure.
func TestClientTokenLostIsAnOutage(t *testing.T) {
	h := &httpIMDS{tokens: true, requireV2: true, docs: map[string]string{PathInstanceID: testInstance}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	s := New(NewClient(srv.URL, false), clock.RealClock{}, discard, Options{})
	if err := s.Poll(t.Context(), func([]event.Event) {}); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	h.tokens = false
	h.rejectAll = true
	h.mu.Unlock()
	err := s.Poll(t.Context(), func([]event.Event) {})
	if err == nil {
		t.Fatal("Poll without a usable token: no error")
	}
	if !tokenFailed(err) {
		t.Errorf("error not recognised as a token failure: %v", err)
	}
}

// TestClientToken: one token for many reads over one kept-alive
// connection; a new token when the cached one is about to expire and after
// a 401.
func TestClientToken(t *testing.T) {
	h := &httpIMDS{tokens: true, requireV2: true, docs: map[string]string{PathInstanceID: testInstance}}
	srv := httptest.NewUnstartedServer(h)
	var mu sync.Mutex
	conns := 0
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	c := NewClient(srv.URL, false)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	get := func() {
		t.Helper()
		body, err := c.Get(t.Context(), PathInstanceID)
		if err != nil || string(body) != testInstance {
			t.Fatalf("Get = %q, %v", body, err)
		}
	}
	puts := func() int { h.mu.Lock(); defer h.mu.Unlock(); return h.puts }
	for range 20 {
		get()
	}
	if p := puts(); p != 1 {
		t.Errorf("token PUTs after 20 reads = %d, want 1", p)
	}
	mu.Lock()
	if conns != 1 {
		t.Errorf("connections for 20 reads = %d, want 1 (kept alive)", conns)
	}
	mu.Unlock()
	now = now.Add(tokenTTL - tokenMargin)
	get()
	if p := puts(); p != 2 {
		t.Errorf("token PUTs after the token's time = %d, want 2", p)
	}
	h.mu.Lock()
	h.rejectAll = true // the service restarted: tokens it gave are refused
	h.mu.Unlock()
	go func() { // accept tokens again once the client asked for a new one
		for puts() < 3 {
			time.Sleep(time.Millisecond)
		}
		h.mu.Lock()
		h.rejectAll = false
		h.mu.Unlock()
	}()
	get()
	if p := puts(); p < 3 {
		t.Errorf("token PUTs after a 401 = %d, want a new token", p)
	}
}

// flaky answers 503 to the first n GETs, then serves h.
type flaky struct {
	mu sync.Mutex
	n  int
	h  http.Handler
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	fail := r.Method == http.MethodGet && f.n > 0
	if fail {
		f.n--
	}
	f.mu.Unlock()
	if fail {
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	f.h.ServeHTTP(w, r)
}

// TestClientRetries: a 5xx is tried again, up to 3 attempts in all; a 404
// is an answer, not retried.
func TestClientRetries(t *testing.T) {
	tests := []struct {
		name     string
		failures int
		path     string
		wantCode int // 0: the body
	}{
		{"two 503s, then the answer", 2, PathInstanceID, 0},
		{"three 503s: the error", 3, PathInstanceID, http.StatusServiceUnavailable},
		{"404 at once", 0, PathSpot, http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &httpIMDS{tokens: true, requireV2: true, docs: map[string]string{PathInstanceID: testInstance}}
			srv := httptest.NewServer(&flaky{n: tt.failures, h: h})
			defer srv.Close()
			body, err := NewClient(srv.URL, false).Get(t.Context(), tt.path)
			var herr *HTTPError
			switch {
			case tt.wantCode == 0 && (err != nil || string(body) != testInstance):
				t.Fatalf("Get = %q, %v; want %q", body, err, testInstance)
			case tt.wantCode != 0 && (!errors.As(err, &herr) || herr.Code != tt.wantCode):
				t.Fatalf("Get error = %v, want HTTP %d", err, tt.wantCode)
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			if tt.path == PathSpot && h.gets != 1 {
				t.Errorf("GETs for a 404 = %d, want 1", h.gets)
			}
		})
	}
}

// TestClientConnections: the client reads on over a connection the
// service closes after each answer, or drops while idle, and gives up on
// one that never answers within the header timeout of each attempt.
func TestClientConnections(t *testing.T) {
	docs := map[string]string{PathInstanceID: testInstance}
	t.Run("Connection: close", func(t *testing.T) {
		srv := httptest.NewUnstartedServer(&httpIMDS{tokens: true, requireV2: true, docs: docs})
		srv.Config.SetKeepAlivesEnabled(false)
		srv.Start()
		defer srv.Close()
		c := NewClient(srv.URL, false)
		for range 3 {
			if body, err := c.Get(t.Context(), PathInstanceID); err != nil || string(body) != testInstance {
				t.Fatalf("Get = %q, %v", body, err)
			}
		}
	})
	t.Run("idle connection dropped", func(t *testing.T) {
		srv := httptest.NewServer(&httpIMDS{tokens: true, requireV2: true, docs: docs})
		defer srv.Close()
		c := NewClient(srv.URL, false)
		for range 3 {
			if body, err := c.Get(t.Context(), PathInstanceID); err != nil || string(body) != testInstance {
				t.Fatalf("Get = %q, %v", body, err)
			}
			srv.CloseClientConnections()
		}
	})
	t.Run("no answer", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() { // accept and say nothing
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
			}
		}()
		start := time.Now()
		_, err = NewClient("http://"+ln.Addr().String(), false).Get(t.Context(), PathInstanceID)
		if err == nil {
			t.Fatal("Get from a service that never answers: no error")
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("gave up after %v, want about 3 × 500 ms plus backoff", d)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			conn, err := ln.Accept()
			if err == nil {
				defer conn.Close()
				time.Sleep(5 * time.Second)
			}
		}()
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		if _, err := NewClient("http://"+ln.Addr().String(), false).Get(ctx, PathInstanceID); err == nil {
			t.Fatal("Get after its context ended: no error")
		}
		if d := time.Since(start); d > 400*time.Millisecond {
			t.Errorf("a canceled Get returned after %v", d)
		}
	})
}

// TestClientLongBody: a body over maxBody is cut there, and the rest of it
// does not become the next read's answer (closing the body reads it off
// the connection, which stays in use).
func TestClientLongBody(t *testing.T) {
	long := strings.Repeat("x", maxBody+100)
	h := &httpIMDS{tokens: true, requireV2: true, docs: map[string]string{PathInstanceID: testInstance, PathSpot: long}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := NewClient(srv.URL, false)
	body, err := c.Get(t.Context(), PathSpot)
	if err != nil || len(body) != maxBody {
		t.Fatalf("Get of a long body = %d bytes, %v; want %d", len(body), err, maxBody)
	}
	if body, err := c.Get(t.Context(), PathInstanceID); err != nil || string(body) != testInstance {
		t.Fatalf("the read after a long body = %.40q, %v; want %q", body, err, testInstance)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gets != 2 {
		t.Errorf("GETs for two reads = %d, want 2 (none failed on the rest of the long body)", h.gets)
	}
}

// deadlineConn records the deadlines set on a connection.
type deadlineConn struct {
	net.Conn
	mu          sync.Mutex
	read, write time.Time   // in force now (zero: none)
	set         []time.Time // every deadline set other than none
}

func (d *deadlineConn) record(read, write bool, t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if read {
		d.read = t
	}
	if write {
		d.write = t
	}
	if !t.IsZero() {
		d.set = append(d.set, t)
	}
}

func (d *deadlineConn) SetDeadline(t time.Time) error {
	d.record(true, true, t)
	return d.Conn.SetDeadline(t)
}

func (d *deadlineConn) SetReadDeadline(t time.Time) error {
	d.record(true, false, t)
	return d.Conn.SetReadDeadline(t)
}

func (d *deadlineConn) SetWriteDeadline(t time.Time) error {
	d.record(false, true, t)
	return d.Conn.SetWriteDeadline(t)
}

// TestClientLeavesNoDeadline: a read over the kept-alive connection sets
// no deadline beyond the header timeout when the body comes with the
// headers (as the metadata service sends it), and leaves the connection
// with none. A deadline is a runtime timer: left armed, or moved later
// (the header timeout's to the read's 5 s), it still wakes the idle
// process when it was first due, between two polls (issue 28 item 3).
func TestClientLeavesNoDeadline(t *testing.T) {
	srv := httptest.NewServer(&httpIMDS{tokens: true, requireV2: true, docs: map[string]string{PathInstanceID: testInstance}})
	defer srv.Close()
	c := NewClient(srv.URL, false)
	if _, err := c.Get(t.Context(), PathInstanceID); err != nil { // dials, gets a token
		t.Fatal(err)
	}
	rec := &deadlineConn{Conn: c.conn}
	c.conn = rec
	for i := range 3 {
		if body, err := c.Get(t.Context(), PathInstanceID); err != nil || string(body) != testInstance {
			t.Fatalf("Get = %q, %v", body, err)
		}
		end := time.Now()
		rec.mu.Lock()
		if !rec.read.IsZero() || !rec.write.IsZero() {
			t.Errorf("read %d: the idle connection has deadlines read %v, write %v from now; want none", i, rec.read.Sub(end), rec.write.Sub(end))
		}
		for _, d := range rec.set {
			if d.After(end.Add(headerTimeout)) {
				t.Errorf("read %d: a deadline %v from the read's end, want at most the header timeout (%v)", i, d.Sub(end), headerTimeout)
			}
		}
		rec.set = nil
		rec.mu.Unlock()
	}
	if c.conn != rec {
		t.Error("the connection was not kept")
	}
}

// TestClientSlowBody: a body that comes after the headers, later than the
// header timeout, is still read by the read's deadline.
func TestClientSlowBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/latest/api/token" {
			_, _ = w.Write([]byte("tok"))
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(testInstance)))
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(headerTimeout + 200*time.Millisecond)
		_, _ = w.Write([]byte(testInstance))
	}))
	defer srv.Close()
	if body, err := NewClient(srv.URL, false).Get(t.Context(), PathInstanceID); err != nil || string(body) != testInstance {
		t.Fatalf("Get of a body %v after its headers = %q, %v; want %q", headerTimeout+200*time.Millisecond, body, err, testInstance)
	}
}
