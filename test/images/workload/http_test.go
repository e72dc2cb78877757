package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeRecordsReadinessAndStopsGracefully: the server answers / with
// the pod's name, records readiness-passed at the first /readyz only, and
// on stop closes its listener and records how many requests it served.
func TestServeRecordsReadinessAndStopsGracefully(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("WORKLOAD_RECORD_DIR", dir)
	t.Setenv("POD_NAMESPACE", "ns")
	t.Setenv("POD_NAME", "web-1")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	s, err := serve(port)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://127.0.0.1:" + port
	for _, path := range []string{"/readyz", "/readyz", "/", "/"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		if path == "/" && strings.TrimSpace(string(b)) != "web-1" {
			t.Errorf("GET /: %q, want the pod's name", b)
		}
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(base + "/"); err == nil {
		t.Errorf("the server still answers after stop")
	}
	b, err := os.ReadFile(filepath.Join(dir, "ns_web-1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e entry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		got = append(got, e.Event+"="+e.Value)
	}
	if want := []string{"readiness-passed=", "http-stopped=2"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("recorded %v, want %v", got, want)
	}
}
