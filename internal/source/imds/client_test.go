package imds

import (
	"net/http"
	"net/http/httptest"
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

// TestClientDown: nothing listens; the SDK's retries and timeouts end in an
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
// outage, not "every path is absent": the real SDK's error must be
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
