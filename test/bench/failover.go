package bench

// What a failover run of BenchmarkInterruptionBurst (LIFEBOAT_BENCH_FAILOVER)
// measures beyond the burst's times, and the pure functions that count it:
// the API server's audit log (every node PATCH and pod eviction, per node
// and per pod) and the SQS calls of both replicas (per message).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Failover modes (LIFEBOAT_BENCH_FAILOVER).
const (
	// failoverNone: two replicas with leader election, nobody stopped; the
	// same storm as the other modes, to compare with.
	failoverNone = "none"
	// failoverKill: the leader gets SIGKILL at the peak (a crash, a node
	// lost).
	failoverKill = "kill"
	// failoverTerm: the leader gets SIGTERM at the peak (a rollout: helm
	// upgrade).
	failoverTerm = "term"
)

// Failover is what a failover run measured. Times are seconds since the
// burst's start (SIGCONT of both replicas), like NodeTimes.
type Failover struct {
	Mode string `json:"mode"`
	// Signal is when the leader was signalled (0 for none), with how many
	// nodes were cordoned then; OldLeaderEnd when its process had exited.
	Signal           float64 `json:"signal_s,omitempty"`
	CordonedAtSignal int     `json:"cordoned_at_signal,omitempty"`
	OldLeaderEnd     float64 `json:"old_leader_end_s,omitempty"`
	// NewLeader is when the standby's lifeboat_leader gauge read 1 (polled
	// every 0.1 s).
	NewLeader float64 `json:"new_leader_s,omitempty"`
	// CordonedAfterEnd and DrainedAfterEnd count the nodes first seen
	// cordoned / drained after OldLeaderEnd; LastCordonAfterEnd and
	// LastDrainAfterEnd are the last node's cordon and drain less
	// OldLeaderEnd.
	CordonedAfterEnd   int     `json:"cordoned_after_end"`
	DrainedAfterEnd    int     `json:"drained_after_end"`
	LastCordonAfterEnd float64 `json:"last_cordon_after_end_s"`
	LastDrainAfterEnd  float64 `json:"last_drain_after_end_s"`
	// CordonTransitions: nodes by how often the benchmark's informer saw
	// them go from schedulable to cordoned.
	CordonTransitions map[int]int `json:"nodes_by_cordon_transitions"`
	Writes            Writes      `json:"writes"`
	Messages          Messages    `json:"messages"`
	// Warnings are each replica's WARN and ERROR log lines by message
	// ("a" the first leader, "b" the standby): a receive that failed
	// leaves its messages hidden for a visibility timeout.
	Warnings map[string]map[string]int `json:"warnings,omitempty"`
	// LeaseLost is when the first leader's process was seen exited in a
	// run where nobody signalled it (0: it led to the end): it lost its
	// Lease. The standby is then followed as after a kill, and the lost
	// leader's requests are missing from the counts (its metrics ended
	// with it).
	LeaseLost float64 `json:"lease_lost_s,omitempty"`
	// Lease is what the API server's audit log says of lifeboat's requests
	// for the replicas' Lease.
	Lease LeaseRequests `json:"lease_requests"`
}

// LeaseRequests are lifeboat's requests for its Lease as the API server
// answered them (both replicas; only the leader updates it), by verb: how
// many, answered how, and the longest time the API server took, with the
// longest gap between two successive renewals received (updates answered
// 200) and when the slowest request was received (seconds since t0).
type LeaseRequests struct {
	ByVerb        map[string]int     `json:"by_verb_and_answer"`
	MaxSeconds    map[string]float64 `json:"max_s_by_verb"`
	SlowestAt     float64            `json:"slowest_received_at_s"`
	LongestGap    float64            `json:"longest_gap_between_renewals_s"`
	LongestGapEnd float64            `json:"longest_gap_ends_at_s"`
}

// leaseRequests reads lifeboat's Lease requests from an audit log
// (auditPolicy), times relative to t0.
func leaseRequests(log io.Reader, t0 time.Time) (LeaseRequests, error) {
	c := newLeaseCounter(t0)
	err := readAudit(log, c.add)
	return c.out, err
}

// leaseCounter fills LeaseRequests one audit event at a time.
type leaseCounter struct {
	t0          time.Time
	out         LeaseRequests
	slowest     float64
	lastRenewal time.Time
}

func newLeaseCounter(t0 time.Time) *leaseCounter {
	return &leaseCounter{t0: t0, out: LeaseRequests{ByVerb: map[string]int{}, MaxSeconds: map[string]float64{}}}
}

func (c *leaseCounter) add(e *auditEvent) {
	if !strings.HasPrefix(e.UserAgent, "lifeboat/") || e.ObjectRef == nil || e.ObjectRef.Resource != "leases" || e.ResponseStatus == nil {
		return
	}
	out := &c.out
	took := e.Answered.Sub(e.Received).Seconds()
	out.ByVerb[fmt.Sprintf("%s %d", e.Verb, e.ResponseStatus.Code)]++
	out.MaxSeconds[e.Verb] = max(out.MaxSeconds[e.Verb], took)
	if took > c.slowest {
		c.slowest, out.SlowestAt = took, e.Received.Sub(c.t0).Seconds()
	}
	if e.Verb == "update" && e.ResponseStatus.Code == 200 {
		if !c.lastRenewal.IsZero() && e.Received.Sub(c.lastRenewal).Seconds() > out.LongestGap {
			out.LongestGap, out.LongestGapEnd = e.Received.Sub(c.lastRenewal).Seconds(), e.Received.Sub(c.t0).Seconds()
		}
		c.lastRenewal = e.Received
	}
}

// readAudit reads an audit log (JSON lines) once, handing each event to
// every f in turn.
func readAudit(log io.Reader, fs ...func(*auditEvent)) error {
	sc := bufio.NewScanner(log)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("audit log: %w", err)
		}
		for _, f := range fs {
			f(&e)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	return nil
}

// logWarnings counts a JSON log's WARN and ERROR lines by their msg.
func logWarnings(log string) map[string]int {
	out := map[string]int{}
	for line := range strings.SplitSeq(log, "\n") {
		var l struct{ Level, Msg string }
		if json.Unmarshal([]byte(line), &l) != nil || (l.Level != "WARN" && l.Level != "ERROR") {
			continue
		}
		out[l.Msg]++
	}
	return out
}

// Writes are lifeboat's writes to the burst's nodes and pods, from the API
// server's audit log (both replicas: user agent lifeboat/...).
type Writes struct {
	// CordonPatches: nodes by the number of successful PATCHes that set
	// spec.unschedulable; OtherPatches: by the number of other successful
	// node PATCHes (annotations: events, drained).
	CordonPatches map[int]int `json:"nodes_by_cordon_patches"`
	OtherPatches  map[int]int `json:"nodes_by_other_patches"`
	// Evictions: pods by the number of evictions answered 201.
	Evictions map[int]int `json:"pods_by_evictions"`
	// Codes counts every node PATCH and eviction by answer, e.g.
	// "patch 409", "eviction 201".
	Codes map[string]int `json:"answers"`
}

// auditEvent is the part of an audit.k8s.io/v1 Event the count reads.
type auditEvent struct {
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject json.RawMessage `json:"requestObject"`
	// Received and Answered are when the API server received the request
	// and when it had answered it (stage ResponseComplete).
	Received time.Time `json:"requestReceivedTimestamp"`
	Answered time.Time `json:"stageTimestamp"`
}

// countWrites reads an audit log (JSON lines, stage ResponseComplete only)
// and counts lifeboat's writes to the given nodes and to the pods of
// namespace ns on them (pod -> node from pods).
func countWrites(log io.Reader, nodes []string, pods map[string]string, ns string) (Writes, error) {
	c := newWriteCounter(nodes, pods, ns)
	err := readAudit(log, c.add)
	return c.result(), err
}

// writeCounter fills Writes one audit event at a time.
type writeCounter struct {
	nodes                        []string
	pods                         map[string]string
	ns                           string
	mine                         map[string]bool
	cordonsOf, others, evictions map[string]int
	codes                        map[string]int
}

func newWriteCounter(nodes []string, pods map[string]string, ns string) *writeCounter {
	c := &writeCounter{nodes: nodes, pods: pods, ns: ns, mine: map[string]bool{},
		cordonsOf: map[string]int{}, others: map[string]int{}, evictions: map[string]int{}, codes: map[string]int{}}
	for _, n := range nodes {
		c.mine[n] = true
	}
	return c
}

func (c *writeCounter) add(e *auditEvent) {
	if !strings.HasPrefix(e.UserAgent, "lifeboat/") || e.ObjectRef == nil || e.ResponseStatus == nil {
		return
	}
	ref, code := e.ObjectRef, e.ResponseStatus.Code
	ok := code >= 200 && code < 300
	switch {
	case e.Verb == "patch" && ref.Resource == "nodes" && ref.Subresource == "" && c.mine[ref.Name]:
		c.codes[fmt.Sprintf("patch %d", code)]++
		switch {
		case !ok:
		case cordons(e.RequestObject):
			c.cordonsOf[ref.Name]++
		default:
			c.others[ref.Name]++
		}
	case e.Verb == "create" && ref.Resource == "pods" && ref.Subresource == "eviction" && ref.Namespace == c.ns && c.pods[ref.Name] != "":
		c.codes[fmt.Sprintf("eviction %d", code)]++
		if ok {
			c.evictions[ref.Name]++
		}
	}
}

func (c *writeCounter) result() Writes {
	return Writes{Codes: c.codes, CordonPatches: histogram(c.nodes, c.cordonsOf), OtherPatches: histogram(c.nodes, c.others),
		Evictions: histogram(slices.Sorted(maps.Keys(c.pods)), c.evictions)}
}

// cordons reports whether a node PATCH's body sets spec.unschedulable.
func cordons(body json.RawMessage) bool {
	var p struct {
		Spec struct {
			Unschedulable *bool `json:"unschedulable"`
		} `json:"spec"`
	}
	_ = json.Unmarshal(body, &p)
	return p.Spec.Unschedulable != nil && *p.Spec.Unschedulable
}

// histogram counts keys by their count in m (0 for a key not in m).
func histogram(keys []string, m map[string]int) map[int]int {
	h := map[int]int{}
	for _, k := range keys {
		h[m[k]]++
	}
	return h
}

// auditPolicy logs, once each (when answered), every node PATCH or UPDATE
// with its body, every pod eviction, and every pod list and deletion (the
// drain's timeline, readTimeline), and the requests for Leases in
// kube-system, where the replicas' Lease is (leaseRequests; the nodes'
// own Leases, in kube-node-lease, are not logged); nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Request
  verbs: ["patch", "update"]
  resources: [{group: "", resources: ["nodes"]}]
- level: Metadata
  verbs: ["create"]
  resources: [{group: "", resources: ["pods/eviction"]}]
- level: Metadata
  verbs: ["list", "delete"]
  resources: [{group: "", resources: ["pods"]}]
- level: Metadata
  namespaces: ["kube-system"]
  resources: [{group: "coordination.k8s.io", resources: ["leases"]}]
- level: None
`

// failoverTable is the report's lines about a failover run ("" without).
func (r *Result) failoverTable() string {
	f := r.Failover
	if f == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nfailover (%s): two replicas, leader election\n", f.Mode)
	if f.LeaseLost > 0 {
		fmt.Fprintf(&b, "the leader lost its Lease (nobody signalled it): its process had exited at %.2f s; standby leading at %.2f s; the lost leader's requests are not in the counts above\n",
			f.LeaseLost, f.NewLeader)
		fmt.Fprintf(&b, "after the old leader's end: %d nodes cordoned (last %.2f s after it), %d drained (last %.2f s after it)\n",
			f.CordonedAfterEnd, f.LastCordonAfterEnd, f.DrainedAfterEnd, f.LastDrainAfterEnd)
	}
	l := f.Lease
	var longest []string
	for _, v := range slices.Sorted(maps.Keys(l.MaxSeconds)) {
		longest = append(longest, fmt.Sprintf("%s %.2f s", v, l.MaxSeconds[v]))
	}
	fmt.Fprintf(&b, "Lease requests (API server's audit log): %v; longest answer: %s (the slowest received at %.2f s); longest gap between renewals %.2f s (ending at %.2f s)\n",
		l.ByVerb, strings.Join(longest, ", "), l.SlowestAt, l.LongestGap, l.LongestGapEnd)
	if f.Mode != failoverNone {
		fmt.Fprintf(&b, "leader signalled at %.2f s (%d nodes cordoned), exited at %.2f s; standby leading at %.2f s\n",
			f.Signal, f.CordonedAtSignal, f.OldLeaderEnd, f.NewLeader)
		fmt.Fprintf(&b, "after the old leader's end: %d nodes cordoned (last %.2f s after it), %d drained (last %.2f s after it)\n",
			f.CordonedAfterEnd, f.LastCordonAfterEnd, f.DrainedAfterEnd, f.LastDrainAfterEnd)
	}
	fmt.Fprintf(&b, "nodes by cordon transitions seen %s; by cordon PATCHes %s; by other node PATCHes %s; pods by evictions %s\n",
		hist(f.CordonTransitions), hist(f.Writes.CordonPatches), hist(f.Writes.OtherPatches), hist(f.Writes.Evictions))
	fmt.Fprintf(&b, "answers: %v\n", f.Writes.Codes)
	for _, r := range slices.Sorted(maps.Keys(f.Warnings)) {
		fmt.Fprintf(&b, "replica %s: warnings and errors by message %v\n", r, f.Warnings[r])
	}
	m := f.Messages
	fmt.Fprintf(&b, "messages (%d sent) by receives %s, by deletes %s; handed back %d; left visible %d, not visible %d\n",
		m.Sent, hist(m.Receives), hist(m.Deletes), m.HandedBack, m.LeftVisible, m.LeftNotVisible)
	if m.Regained.Max > 0 {
		fmt.Fprintf(&b, "first -> second receive p50 %.2f s, max %.2f s\n", m.Regained.P50, m.Regained.Max)
	}
	if m.Sent > 0 {
		change := m.Calls["ChangeMessageVisibilityBatch"] + m.Calls["ChangeMessageVisibility"]
		fmt.Fprintf(&b, "SQS calls (both replicas, whole run) %v; per message sent: %.2f visibility calls, %.2f extensions\n",
			m.Calls, float64(change)/float64(m.Sent), float64(m.Extensions)/float64(m.Sent))
	}
	for _, id := range slices.Sorted(maps.Keys(m.Repeated)) {
		fmt.Fprintf(&b, "message %s: %s\n", id, strings.Join(m.Repeated[id], "; "))
	}
	return b.String()
}

// hist renders a histogram as {count: keys, ...}, e.g. "{1:1000}".
func hist(h map[int]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(h)) {
		parts = append(parts, fmt.Sprintf("%d:%d", k, h[k]))
	}
	return "{" + strings.Join(parts, " ") + "}"
}
