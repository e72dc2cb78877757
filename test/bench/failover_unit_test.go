package bench

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCountWrites: lifeboat's node PATCHes are counted per node as cordons
// (they set spec.unschedulable) or others, its evictions per pod; failed
// answers, other clients, other nodes and other namespaces are not.
func TestCountWrites(t *testing.T) {
	lines := []string{
		`{"verb":"patch","userAgent":"lifeboat/dev (linux/amd64)","objectRef":{"resource":"nodes","name":"n-0"},"responseStatus":{"code":200},"requestObject":{"spec":{"unschedulable":true}}}`,
		`{"verb":"patch","userAgent":"lifeboat/dev","objectRef":{"resource":"nodes","name":"n-0"},"responseStatus":{"code":200},"requestObject":{"metadata":{"annotations":{"lifeboat.io/drained":"x"}}}}`,
		`{"verb":"patch","userAgent":"lifeboat/dev","objectRef":{"resource":"nodes","name":"n-1"},"responseStatus":{"code":409},"requestObject":{"spec":{"unschedulable":true}}}`,
		`{"verb":"patch","userAgent":"lifeboat/dev","objectRef":{"resource":"nodes","name":"n-1"},"responseStatus":{"code":200},"requestObject":{"spec":{"unschedulable":true}}}`,
		`{"verb":"patch","userAgent":"lifeboat/dev","objectRef":{"resource":"nodes","name":"n-1"},"responseStatus":{"code":200},"requestObject":{"spec":{"unschedulable":true}}}`,
		`{"verb":"patch","userAgent":"kube-controller-manager/v1","objectRef":{"resource":"nodes","name":"n-1"},"responseStatus":{"code":200},"requestObject":{"spec":{"unschedulable":true}}}`,
		`{"verb":"patch","userAgent":"lifeboat/dev","objectRef":{"resource":"nodes","name":"other"},"responseStatus":{"code":200},"requestObject":{"spec":{"unschedulable":true}}}`,
		`{"verb":"create","userAgent":"lifeboat/dev","objectRef":{"resource":"pods","subresource":"eviction","namespace":"ns","name":"n-0-p0"},"responseStatus":{"code":201}}`,
		`{"verb":"create","userAgent":"lifeboat/dev","objectRef":{"resource":"pods","subresource":"eviction","namespace":"ns","name":"n-0-p0"},"responseStatus":{"code":429}}`,
		`{"verb":"create","userAgent":"lifeboat/dev","objectRef":{"resource":"pods","subresource":"eviction","namespace":"ns","name":"n-1-p0"},"responseStatus":{"code":201}}`,
		`{"verb":"create","userAgent":"lifeboat/dev","objectRef":{"resource":"pods","subresource":"eviction","namespace":"ns","name":"n-1-p0"},"responseStatus":{"code":201}}`,
		`{"verb":"create","userAgent":"lifeboat/dev","objectRef":{"resource":"pods","subresource":"eviction","namespace":"floor","name":"n-0-p0"},"responseStatus":{"code":201}}`,
	}
	pods := map[string]string{"n-0-p0": "n-0", "n-1-p0": "n-1", "n-2-p0": "n-2"}
	w, err := countWrites(strings.NewReader(strings.Join(lines, "\n")+"\n"), []string{"n-0", "n-1", "n-2"}, pods, "ns")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want string
	}{
		{"nodes by cordon PATCHes", hist(w.CordonPatches), "{0:1 1:1 2:1}"},
		{"nodes by other PATCHes", hist(w.OtherPatches), "{0:2 1:1}"},
		{"pods by evictions", hist(w.Evictions), "{0:1 1:1 2:1}"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.name, c.got, c.want)
		}
	}
	if w.Codes["patch 409"] != 1 || w.Codes["patch 200"] != 4 || w.Codes["eviction 201"] != 3 || w.Codes["eviction 429"] != 1 {
		t.Errorf("answers %v", w.Codes)
	}
}

// TestSQSLog: receives are counted per message, deletes and hand-backs
// found by receipt handle, and a second receive's delay measured.
func TestSQSLog(t *testing.T) {
	l := newSQSLog()
	t0 := time.Unix(1000, 0)
	l.record("a", "ReceiveMessage", 200, []byte(`{"QueueUrl":"q"}`), []byte(`{"Messages":[{"MessageId":"m1","ReceiptHandle":"h1"},{"MessageId":"m2","ReceiptHandle":"h2"},{"MessageId":"m3","ReceiptHandle":"h3"}]}`), t0)
	l.record("a", "DeleteMessage", 200, []byte(`{"QueueUrl":"q","ReceiptHandle":"h1"}`), []byte(`{}`), t0)
	l.record("a", "ChangeMessageVisibilityBatch", 200, []byte(`{"QueueUrl":"q","Entries":[{"Id":"0","ReceiptHandle":"h2","VisibilityTimeout":0}]}`), []byte(`{}`), t0)
	l.record("a", "ChangeMessageVisibility", 200, []byte(`{"QueueUrl":"q","ReceiptHandle":"h3","VisibilityTimeout":120}`), []byte(`{}`), t0)
	l.record("a", "ReceiveMessage", 200, []byte(`{}`), []byte(`{"Messages":[{"MessageId":"m2","ReceiptHandle":"h2b"}]}`), t0.Add(500*time.Millisecond))
	l.record("a", "DeleteMessage", 500, []byte(`{"ReceiptHandle":"h2b"}`), nil, t0)
	l.record("a", "DeleteMessage", 200, []byte(`{"ReceiptHandle":"h2b"}`), nil, t0)
	l.record("a", "ReceiveMessage", 200, []byte(`{}`), []byte(`{"Messages":[{"MessageId":"m3","ReceiptHandle":"h3b"}]}`), t0.Add(120*time.Second))
	l.record("b", "DeleteMessage", 200, []byte(`{"ReceiptHandle":"h3b"}`), nil, t0.Add(121*time.Second))
	l.record("a", "DeleteMessage", 200, []byte(`{"ReceiptHandle":"h3"}`), nil, t0.Add(122*time.Second))
	m := l.messages([]string{"m1", "m2", "m3", "m4"}, t0)
	if got := hist(m.Receives); got != "{0:1 1:1 2:2}" {
		t.Errorf("messages by receives %s", got)
	}
	if got := hist(m.Deletes); got != "{0:1 1:2 2:1}" {
		t.Errorf("messages by deletes %s", got)
	}
	if m.HandedBack != 1 {
		t.Errorf("handed back %d, want 1 (m2)", m.HandedBack)
	}
	if m.Regained.P50 != 0.5 || m.Regained.Max != 120 {
		t.Errorf("first -> second receive %+v, want p50 0.5 s, max 120 s", m.Regained)
	}
	if m.Extensions != 1 || m.Calls["ChangeMessageVisibility"] != 1 || m.Calls["ChangeMessageVisibilityBatch"] != 1 || m.Calls["DeleteMessage"] != 4 {
		t.Errorf("extensions %d, calls %v: want 1 extension (h3's 120 s), 1 call of each visibility action, 4 deletes answered", m.Extensions, m.Calls)
	}
	want := []string{"0.00 s a received #1", "120.00 s a received #2", "121.00 s b deleted with #2's handle", "122.00 s a deleted with #1's handle"}
	if got := m.Repeated["m3"]; !slices.Equal(got, want) || len(m.Repeated) != 1 {
		t.Errorf("repeated %q, want only m3: %q", m.Repeated, want)
	}
}

func TestLogWarnings(t *testing.T) {
	log := `{"time":"t","level":"INFO","msg":"leading"}
{"time":"t","level":"WARN","msg":"receiving from queue failed","error":"deadline"}
not json
{"time":"t","level":"WARN","msg":"receiving from queue failed"}
{"time":"t","level":"ERROR","msg":"stopping"}
`
	got := logWarnings(log)
	want := map[string]int{"receiving from queue failed": 2, "stopping": 1}
	if !maps.Equal(got, want) {
		t.Errorf("logWarnings = %v, want %v", got, want)
	}
}

// TestLeaseRequests: lifeboat's Lease requests are counted by verb and
// answer, with the longest time the API server took and the longest gap
// between two renewals received (updates answered 200, not the 409);
// other clients' Leases and other resources are not counted.
func TestLeaseRequests(t *testing.T) {
	lines := []string{
		`{"verb":"get","userAgent":"lifeboat/dev","objectRef":{"resource":"leases","namespace":"kube-system","name":"bench-0"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-11-27T20:00:00.000000Z","stageTimestamp":"2026-11-27T20:00:00.010000Z"}`,
		`{"verb":"update","userAgent":"lifeboat/dev","objectRef":{"resource":"leases","namespace":"kube-system","name":"bench-0"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-11-27T20:00:02.500000Z","stageTimestamp":"2026-11-27T20:00:02.600000Z"}`,
		`{"verb":"update","userAgent":"lifeboat/dev","objectRef":{"resource":"leases","namespace":"kube-system","name":"bench-0"},"responseStatus":{"code":409},"requestReceivedTimestamp":"2026-11-27T20:00:04.000000Z","stageTimestamp":"2026-11-27T20:00:04.100000Z"}`,
		`{"verb":"update","userAgent":"lifeboat/dev","objectRef":{"resource":"leases","namespace":"kube-system","name":"bench-0"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-11-27T20:00:05.000000Z","stageTimestamp":"2026-11-27T20:00:12.000000Z"}`,
		`{"verb":"update","userAgent":"lifeboat/dev","objectRef":{"resource":"leases","namespace":"kube-system","name":"bench-0"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-11-27T20:00:14.000000Z","stageTimestamp":"2026-11-27T20:00:14.200000Z"}`,
		`{"verb":"update","userAgent":"kube-controller-manager/v1","objectRef":{"resource":"leases","namespace":"kube-system","name":"kube-controller-manager"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-11-27T20:00:30.000000Z","stageTimestamp":"2026-11-27T20:00:59.000000Z"}`,
		`{"verb":"patch","userAgent":"lifeboat/dev","objectRef":{"resource":"nodes","name":"n-0"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-11-27T20:00:30.000000Z","stageTimestamp":"2026-11-27T20:00:59.000000Z"}`,
	}
	t0 := time.Date(2026, 11, 27, 20, 0, 0, 0, time.UTC)
	got, err := leaseRequests(strings.NewReader(strings.Join(lines, "\n")+"\n"), t0)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"get 200": 1, "update 200": 3, "update 409": 1}; !maps.Equal(got.ByVerb, want) {
		t.Errorf("by verb %v, want %v", got.ByVerb, want)
	}
	near := func(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 }
	if !near(got.MaxSeconds["update"], 7) || !near(got.MaxSeconds["get"], 0.01) || !near(got.SlowestAt, 5) {
		t.Errorf("longest answers %v, slowest received at %v; want update 7 s, get 0.01 s, at 5 s", got.MaxSeconds, got.SlowestAt)
	}
	if !near(got.LongestGap, 9) || !near(got.LongestGapEnd, 14) {
		t.Errorf("longest gap %v s ending at %v s, want 9 s ending at 14 s", got.LongestGap, got.LongestGapEnd)
	}
}

// TestFailoverTableLeaseLost: a run whose leader lost its Lease unsignalled
// says so, with the standby's takeover and the Lease's answers.
func TestFailoverTableLeaseLost(t *testing.T) {
	r := &Result{Failover: &Failover{Mode: failoverNone, LeaseLost: 12.5, NewLeader: 27.25, CordonedAfterEnd: 3, LastCordonAfterEnd: 4,
		Lease: LeaseRequests{ByVerb: map[string]int{"update 200": 2}, MaxSeconds: map[string]float64{"get": 10.784, "update": 6.5}, LongestGap: 9}}}
	got := r.failoverTable()
	for _, want := range []string{
		"the leader lost its Lease (nobody signalled it): its process had exited at 12.50 s; standby leading at 27.25 s",
		"after the old leader's end: 3 nodes cordoned (last 4.00 s after it)",
		"longest answer: get 10.78 s, update 6.50 s",
		"longest gap between renewals 9.00 s",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	if r.Failover.LeaseLost = 0; strings.Contains(r.failoverTable(), "lost its Lease") {
		t.Error("a run whose leader kept its Lease reports it lost")
	}
}
