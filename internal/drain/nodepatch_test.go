package drain_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/kube"
)

// nodeServer is an API server for one Node kept as raw JSON, as the real
// one keeps fields a client may not know. GET answers it; PUT replaces it
// and PATCH (JSON merge patch) merges into it, both refused with 409
// Conflict when they carry a resourceVersion that is not the current one.
// before, if set, runs once before the first write is handled: another
// writer's change lands between lifeboat's read and its write. contend is
// how many writes another writer's label update lands before (each of them
// is then refused, as a controller updating the node in a tight loop does).
type nodeServer struct {
	t       *testing.T
	mu      sync.Mutex
	raw     map[string]any
	rv      int
	before  func(raw map[string]any)
	contend int
	writes  []string // methods of the writes received
	reqs    int
}

func newNodeServer(t *testing.T, rawNode string) (*nodeServer, *kube.REST) {
	s := &nodeServer{t: t, rv: 1}
	if err := json.Unmarshal([]byte(rawNode), &s.raw); err != nil {
		t.Fatal(err)
	}
	s.raw["metadata"].(map[string]any)["resourceVersion"] = "1"
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	client, err := kube.NewREST(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return s, client
}

func (s *nodeServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs++
	if r.URL.Path != "/api/v1/nodes/n" {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodGet {
		s.writes = append(s.writes, r.Method)
		if s.before != nil {
			s.before(s.raw)
			s.rv++
			s.before = nil
		}
		if s.contend > 0 {
			s.contend--
			meta := s.raw["metadata"].(map[string]any)
			labels, _ := meta["labels"].(map[string]any)
			if labels == nil {
				labels = map[string]any{}
				meta["labels"] = labels
			}
			labels["example.com/writer"] = strconv.Itoa(s.rv)
			s.rv++
		}
		var in map[string]any
		if err := json.Unmarshal(body, &in); err != nil {
			s.t.Errorf("%s body: %v", r.Method, err)
		}
		if meta, _ := in["metadata"].(map[string]any); meta["resourceVersion"] != nil && meta["resourceVersion"] != strconv.Itoa(s.rv) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Conflict","code":409,"message":"the object has been modified"}`))
			return
		}
		switch r.Method {
		case http.MethodPut:
			s.raw = in
		case http.MethodPatch:
			cur, _ := json.Marshal(s.raw)
			merged, err := jsonpatch.MergePatch(cur, body)
			if err != nil {
				s.t.Errorf("merge patch: %v", err)
			}
			s.raw = nil
			_ = json.Unmarshal(merged, &s.raw)
		}
		s.rv++
	}
	s.raw["metadata"].(map[string]any)["resourceVersion"] = strconv.Itoa(s.rv)
	out, _ := json.Marshal(s.raw)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// node returns the node as a client of this version decodes it (what an
// informer's cache holds: no unknown field).
func (s *nodeServer) node() *corev1.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _ := json.Marshal(s.raw)
	var n corev1.Node
	if err := json.Unmarshal(b, &n); err != nil {
		s.t.Fatal(err)
	}
	return &n
}

func (s *nodeServer) spec() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.raw["spec"].(map[string]any)
}

// A Node as a newer API server holds it: fields this client has no Go
// field for, in spec and status.
const futureNode = `{"kind":"Node","apiVersion":"v1","metadata":{"name":"n","labels":{"a":"b"}},
	"spec":{"providerID":"aws:///us-east-1a/i-0aaaaaaaaaaaaaaaa","futureSpecField":{"keep":true}},
	"status":{"futureStatusField":"kept"}}`

// Issue 22 defect 14: cordons were full-object PUTs of the node as this
// client decodes it, dropping every field newer than the client. Now only
// what changed is sent (a merge patch): a field unknown to the client
// survives cordon and uncordon, and a write is still one request when the
// cache is current (test/bench counts them).
func TestNodeFieldsUnknownToTheClientSurviveCordonAndUncordon(t *testing.T) {
	s, client := newNodeServer(t, futureNode)
	d := drain.New(client, clock.RealClock{}, slog.New(slog.NewTextHandler(io.Discard, nil)),
		drain.Options{NodeCache: func(string) (*corev1.Node, bool) { return s.node(), true }})
	ctx := context.Background()
	for _, step := range []struct {
		name  string
		write func() (bool, error)
	}{
		{"cordon", func() (bool, error) {
			return d.Cordon(ctx, "n", []string{"lifeboat.io/spot-interruption"}, "spot-interruption", map[string]string{"lifeboat.io/events": "[]"})
		}},
		{"uncordon", func() (bool, error) { return d.Uncordon(ctx, "n", "lifeboat.io/", []string{"lifeboat.io/events"}) }},
	} {
		before := s.reqs
		changed, err := step.write()
		if err != nil || !changed {
			t.Fatalf("%s: changed %v, error %v", step.name, changed, err)
		}
		if got := s.reqs - before; got != 1 {
			t.Errorf("%s: %d requests with a current cache, want 1", step.name, got)
		}
		if _, ok := s.spec()["futureSpecField"]; !ok {
			t.Errorf("after %s: spec %v lost the field unknown to the client", step.name, s.spec())
		}
		s.mu.Lock()
		status := s.raw["status"].(map[string]any)
		s.mu.Unlock()
		if status["futureStatusField"] != "kept" {
			t.Errorf("after %s: status %v lost the field unknown to the client", step.name, status)
		}
	}
	if n := s.node(); n.Spec.Unschedulable || len(n.Spec.Taints) != 0 || n.Labels["a"] != "b" {
		t.Errorf("after cordon and uncordon: unschedulable %v, taints %v, labels %v", n.Spec.Unschedulable, n.Spec.Taints, n.Labels)
	}
}

// A write carries the resourceVersion it was decided on: another writer's
// taint landing between lifeboat's read and its write makes the server
// refuse it (409), and the cordon is decided again on a fresh read, so
// both taints stay.
func TestCordonRetriedOnAFreshReadAfterAConcurrentWrite(t *testing.T) {
	s, client := newNodeServer(t, futureNode)
	s.before = func(raw map[string]any) {
		raw["spec"].(map[string]any)["taints"] = []any{map[string]any{"key": "example.com/other", "effect": "NoSchedule"}}
	}
	d := drain.New(client, clock.RealClock{}, slog.New(slog.NewTextHandler(io.Discard, nil)), drain.Options{})
	if _, err := d.Cordon(context.Background(), "n", []string{"lifeboat.io/spot-interruption"}, "spot-interruption", nil); err != nil {
		t.Fatal(err)
	}
	n := s.node()
	var keys []string
	for _, t := range n.Spec.Taints {
		keys = append(keys, t.Key)
	}
	if len(keys) != 2 || !n.Spec.Unschedulable {
		t.Errorf("taints %v, unschedulable %v; want the other writer's and lifeboat's, cordoned", keys, n.Spec.Unschedulable)
	}
	if len(s.writes) != 2 {
		t.Errorf("writes %v; want the refused one and its retry", s.writes)
	}
}

// Another controller updates the node in a tight loop, so lifeboat's
// writes keep meeting 409 Conflict for seconds (test/fault's
// TestKubeNodeConflicts saw the done-events record given up after ten
// refusals in ~4.5 s): the write keeps trying on fresh reads, and lands
// beside the other writer's label.
func TestAnnotationWriteOutlastsAWriterContendingForSeconds(t *testing.T) {
	s, client := newNodeServer(t, futureNode)
	s.contend = 10
	d := drain.New(client, clock.RealClock{}, slog.New(slog.NewTextHandler(io.Discard, nil)), drain.Options{})
	err := d.UpdateAnnotations(context.Background(), "n", func(map[string]string) map[string]string {
		return map[string]string{"lifeboat.io/drained": "recorded"}
	})
	if err != nil {
		t.Fatalf("gave up under contention: %v", err)
	}
	n := s.node()
	if n.Annotations["lifeboat.io/drained"] == "" || n.Labels["example.com/writer"] == "" {
		t.Errorf("annotations %v, labels %v; want lifeboat's annotation and the other writer's label", n.Annotations, n.Labels)
	}
	if len(s.writes) != 11 {
		t.Errorf("%d writes; want the 10 refused and the one that landed", len(s.writes))
	}
}

// The cache lags lifeboat's own writes (here it never catches up): a
// read-modify-write right after another write (the done-events record
// after the lifecycle completion's note) starts from the node that write
// returned, not from the stale cache, so it costs one request and no
// refused write.
func TestWriteAfterOwnWriteCostsOneRequestWhileTheCacheLags(t *testing.T) {
	s, client := newNodeServer(t, futureNode)
	stale := s.node()
	d := drain.New(client, clock.RealClock{}, slog.New(slog.NewTextHandler(io.Discard, nil)),
		drain.Options{NodeCache: func(string) (*corev1.Node, bool) { return stale, true }})
	ctx := context.Background()
	if _, err := d.Cordon(ctx, "n", []string{"lifeboat.io/spot-interruption"}, "spot-interruption", nil); err != nil {
		t.Fatal(err)
	}
	if err := d.SetAnnotations(ctx, "n", map[string]string{"lifeboat.io/lifecycle": "completed"}); err != nil {
		t.Fatal(err)
	}
	before := s.reqs
	if err := d.UpdateAnnotations(ctx, "n", func(map[string]string) map[string]string {
		return map[string]string{"lifeboat.io/done-events": `["a"]`}
	}); err != nil {
		t.Fatal(err)
	}
	if got := s.reqs - before; got != 1 {
		t.Errorf("%d requests for the write after lifeboat's own writes, want 1 (writes %v)", got, s.writes)
	}
	if n := s.node(); !n.Spec.Unschedulable || n.Annotations["lifeboat.io/lifecycle"] != "completed" || n.Annotations["lifeboat.io/done-events"] != `["a"]` {
		t.Errorf("node after the writes: unschedulable %v, annotations %v", n.Spec.Unschedulable, n.Annotations)
	}
}

// UncordonIf decides on the node as the API server has it, not on
// lifeboat's last write nor the cache: the kubelet's report of a new boot
// (the reason to uncordon) is newer than both, and a "no" decided on a
// stale copy writes nothing, so no conflict would correct it (h26-reboot's
// e2e run left the node cordoned that way).
func TestUncordonIfDecidesOnTheServersNode(t *testing.T) {
	s, client := newNodeServer(t, futureNode)
	stale := s.node()
	d := drain.New(client, clock.RealClock{}, slog.New(slog.NewTextHandler(io.Discard, nil)),
		drain.Options{NodeCache: func(string) (*corev1.Node, bool) { return stale, true }})
	ctx := context.Background()
	if _, err := d.Cordon(ctx, "n", []string{"lifeboat.io/scheduled-maintenance"}, "scheduled-maintenance", nil); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock() // the kubelet reports the new boot after lifeboat's write
	s.raw["status"].(map[string]any)["nodeInfo"] = map[string]any{"bootID": "after"}
	s.rv++
	s.raw["metadata"].(map[string]any)["resourceVersion"] = strconv.Itoa(s.rv)
	s.mu.Unlock()
	allowed, changed, err := d.UncordonIf(ctx, "n", "lifeboat.io/", func(n *corev1.Node) (map[string]string, bool) {
		return nil, n.Status.NodeInfo.BootID == "after"
	})
	if err != nil {
		t.Fatal(err)
	}
	if !allowed || !changed {
		t.Errorf("allowed %v, changed %v; want both: the server's node has the new boot", allowed, changed)
	}
	if n := s.node(); n.Spec.Unschedulable || len(n.Spec.Taints) != 0 {
		t.Errorf("node still cordoned: unschedulable %v, taints %v", n.Spec.Unschedulable, n.Spec.Taints)
	}
}

// Another controller writes the node right after lifeboat's cordon (the
// node lifecycle controller's unschedulable taint) and the cache shows
// that newer version: the next read-modify-write (the drained record)
// starts from the cache, not from the node lifeboat's cordon returned, so
// it is not refused (a 1,000-node
// burst had ~420 such refusals, each a 409 and a GET).
func TestWriteStartsFromTheCacheOnceItIsNewerThanOwnWrite(t *testing.T) {
	s, client := newNodeServer(t, futureNode)
	var cached *corev1.Node
	d := drain.New(client, clock.RealClock{}, slog.New(slog.NewTextHandler(io.Discard, nil)),
		drain.Options{NodeCache: func(string) (*corev1.Node, bool) {
			if cached == nil {
				return s.node(), true
			}
			return cached, true
		}})
	ctx := context.Background()
	if _, err := d.Cordon(ctx, "n", []string{"lifeboat.io/spot-interruption"}, "spot-interruption", nil); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock() // another controller's taint lands after the cordon
	spec := s.raw["spec"].(map[string]any)
	spec["taints"] = append(spec["taints"].([]any), map[string]any{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
	s.rv += 5 // resourceVersions grow, not necessarily by one
	s.raw["metadata"].(map[string]any)["resourceVersion"] = strconv.Itoa(s.rv)
	s.mu.Unlock()
	cached = s.node() // the cache has seen it
	before, writesBefore := s.reqs, len(s.writes)
	if err := d.UpdateAnnotations(ctx, "n", func(map[string]string) map[string]string {
		return map[string]string{"lifeboat.io/drained": "recorded"}
	}); err != nil {
		t.Fatal(err)
	}
	if got := s.reqs - before; got != 1 {
		t.Errorf("%d requests for the write after another writer's, want 1 (writes %v)", got, s.writes[writesBefore:])
	}
	n := s.node()
	if len(n.Spec.Taints) != 2 || n.Annotations["lifeboat.io/drained"] == "" {
		t.Errorf("taints %v, annotations %v; want both taints and the record", n.Spec.Taints, n.Annotations)
	}
}
