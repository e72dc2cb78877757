package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestReadTimeline: each node's steps come from lifeboat's answered
// requests and kwok's deletions, in the burst's namespace only; a refused
// eviction counts by its answer and its pod as retried; the floor's pods
// give evicted -> deleted.
func TestReadTimeline(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)
	at := func(s float64) string {
		return t0.Add(time.Duration(s * float64(time.Second))).Format(time.RFC3339Nano)
	}
	ev := func(verb, ua, ref, uri string, code int, recv, ans float64, body string) string {
		if body == "" {
			body = "null"
		}
		return fmt.Sprintf(`{"stage":"ResponseComplete","verb":%q,"userAgent":%q,"objectRef":%s,"requestURI":%q,"responseStatus":{"code":%d},"requestReceivedTimestamp":%q,"stageTimestamp":%q,"requestObject":%s}`,
			verb, ua, ref, uri, code, at(recv), at(ans), body)
	}
	node := func(n string) string { return fmt.Sprintf(`{"resource":"nodes","name":%q}`, n) }
	evict := func(ns, p string) string {
		return fmt.Sprintf(`{"resource":"pods","subresource":"eviction","namespace":%q,"name":%q}`, ns, p)
	}
	pod := func(ns, p string) string { return fmt.Sprintf(`{"resource":"pods","namespace":%q,"name":%q}`, ns, p) }
	const lb, kwok = "lifeboat/dev", "kwok/v0.8"
	cordon, drained := `{"spec":{"unschedulable":true}}`, `{"metadata":{"annotations":{"lifeboat.io/drained":"x"}}}`
	lines := []string{
		ev("patch", lb, node("n-0"), "/api/v1/nodes/n-0", 200, 0.9, 1, cordon),
		ev("patch", lb, node("n-0"), "/api/v1/nodes/n-0", 200, 1.9, 2, cordon), // a second cordon: the first counts
		ev("list", lb, `{"resource":"pods"}`, "/api/v1/pods?fieldSelector=spec.nodeName%3Dn-0", 200, 2.5, 3, ""),
		ev("list", lb, `{"resource":"pods"}`, "/api/v1/pods?fieldSelector=spec.nodeName%3Dother", 200, 2.5, 2.6, ""),
		ev("create", lb, evict("ns", "n-0-p0"), "", 429, 4, 4.5, ""),
		ev("create", lb, evict("ns", "n-0-p0"), "", 201, 6, 7, ""),
		ev("create", lb, evict("ns", "n-0-p1"), "", 201, 5, 5.5, ""),
		ev("create", kwok, evict("ns", "n-0-p1"), "", 201, 5, 5.5, ""), // not lifeboat's: not counted
		ev("delete", kwok, pod("ns", "n-0-p1"), "", 200, 6, 6.5, ""),
		ev("delete", kwok, pod("ns", "n-0-p0"), "", 200, 8, 8.5, ""),
		ev("delete", kwok, pod("ns", "n-0-p0"), "", 404, 9, 9, ""),
		ev("patch", lb, node("n-0"), "/api/v1/nodes/n-0", 200, 9, 10, drained),
		ev("create", lb, evict("other", "n-0-p0"), "", 201, 1, 1, ""), // another namespace
		ev("create", "floor", evict("floor", "f-0-p0"), "", 201, 1, 2, ""),
		ev("delete", kwok, pod("floor", "f-0-p0"), "", 200, 3, 3.5, ""),
		`{"stage":"ResponseStarted","verb":"watch","objectRef":{"resource":"pods"}}`,
	}
	pods := map[string]string{"n-0-p0": "n-0", "n-0-p1": "n-0"}
	tl, err := readTimeline(strings.NewReader(strings.Join(lines, "\n")+"\n"), pods, "ns", "floor", t0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]float64{ // step -> at, gap
		"cordoned":       {1, 0},
		"pods listed":    {3, 2},
		"eviction sent":  {4, 1},
		"evicted":        {7, 3},
		"pods deleted":   {8.5, 1.5},
		"drained record": {10, 1.5},
	}
	if len(tl.Steps) != len(want) {
		t.Fatalf("steps %v, want %d", tl.Steps, len(want))
	}
	for _, s := range tl.Steps {
		w := want[s.Name]
		if !near(s.At.Max, w[0]) || !near(s.At.P50, w[0]) || !near(s.Gap.Max, w[1]) {
			t.Errorf("%s: at %v gap %v, want at %v gap %v", s.Name, s.At, s.Gap, w[0], w[1])
		}
	}
	if tl.EvictionAnswers[201] != 2 || tl.EvictionAnswers[429] != 1 || len(tl.EvictionAnswers) != 2 {
		t.Errorf("eviction answers %v, want 201: 2, 429: 1", tl.EvictionAnswers)
	}
	if tl.RetriedPods != 1 || !near(tl.RetryDelay.Max, 3) {
		t.Errorf("retried %d pods, delay %v; want 1, 3 s", tl.RetriedPods, tl.RetryDelay)
	}
	if tl.FloorEvictedToGone == nil || !near(tl.FloorEvictedToGone.P50, 1.5) {
		t.Errorf("floor evicted -> gone %v, want 1.5 s", tl.FloorEvictedToGone)
	}
	if s := (&Result{Timeline: tl}).timelineTable(); !strings.Contains(s, "pods deleted") || !strings.Contains(s, "201: 2, 429: 1") || strings.Contains(s, "bare client") {
		t.Errorf("table:\n%s", s)
	}
	if s := (&Result{Timeline: tl, Floor: &Floor{AllEvicted: 3.5}}).timelineTable(); !strings.Contains(s, "every eviction accepted at 7.00 s: 2.00 x the bare client's 3.50 s") {
		t.Errorf("table with a floor:\n%s", s)
	}
}

func near(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 }
