package bench

// Where each node's drain spent its time, read from the API server's audit
// log (LIFEBOAT_BENCH_AUDIT=1): when lifeboat's cordon, pod list,
// evictions and drained record were answered, and when kwok deleted the
// evicted pods. lifeboat's own log says when it acted; only the API
// server says when a request arrived, how long it queued and when the
// kubelet's stand-in finished the pod.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Timeline is a burst's drains step by step, per node. Steps are in the
// order a drain takes them; each has its time since the burst's start and
// its gap since the step before, as percentiles over the nodes that have
// both.
type Timeline struct {
	Steps []TimelineStep `json:"steps"`
	// EvictionAnswers counts lifeboat's evictions of the burst's pods by
	// answer (201, 429, ...).
	EvictionAnswers map[int]int `json:"eviction_answers"`
	// RetriedPods is how many pods had an eviction answered other than 201
	// before the one that was; RetryDelay their time from the first
	// attempt's arrival to the accepted one's answer.
	RetriedPods int         `json:"retried_pods"`
	RetryDelay  Percentiles `json:"retry_delay"`
	// FloorEvictedToGone is, for the floor's pods, eviction answered ->
	// pod deleted (nil: no floor in the log).
	FloorEvictedToGone *Percentiles `json:"floor_evicted_to_gone,omitempty"`
}

// TimelineStep is one step of every node's drain.
type TimelineStep struct {
	Name string      `json:"name"`
	At   Percentiles `json:"at"`
	Gap  Percentiles `json:"gap"`
}

// Timeline step names, in a drain's order.
var timelineSteps = []string{
	"cordoned",       // lifeboat's first cordon PATCH answered
	"pods listed",    // lifeboat's first list of the node's pods answered
	"eviction sent",  // the node's first eviction arrived
	"evicted",        // the node's last pod's eviction answered 201
	"pods deleted",   // the node's last evicted pod deleted (kwok)
	"drained record", // lifeboat's other node PATCH answered
}

// timelineEvent is the part of an audit.k8s.io/v1 Event the timeline reads.
type timelineEvent struct {
	auditEvent
	Stage      string    `json:"stage"`
	RequestURI string    `json:"requestURI"`
	Received   time.Time `json:"requestReceivedTimestamp"`
	Answered   time.Time `json:"stageTimestamp"`
}

// readTimeline reads an audit log (auditPolicy) and returns the timeline
// of the burst's nodes (pods: pod -> node, in namespace ns) since t0, and
// the floor's evicted -> deleted for pods of namespace floorNS ("": none).
func readTimeline(log io.Reader, pods map[string]string, ns, floorNS string, t0 time.Time) (*Timeline, error) {
	type podTimes struct {
		firstTry, evicted, deleted time.Time
		refused                    int // answers other than 201 before evicted
	}
	mine, floor := map[string]*podTimes{}, map[string]*podTimes{}
	nodes := map[string][]time.Time{}
	for _, node := range pods {
		nodes[node] = make([]time.Time, len(timelineSteps))
	}
	earliest := func(t *time.Time, v time.Time) {
		if t.IsZero() || v.Before(*t) {
			*t = v
		}
	}
	tl := &Timeline{EvictionAnswers: map[int]int{}}
	sc := bufio.NewScanner(log)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var e timelineEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		ref := e.ObjectRef
		if e.Stage != "ResponseComplete" || ref == nil || e.ResponseStatus == nil {
			continue
		}
		code, lifeboat := e.ResponseStatus.Code, strings.HasPrefix(e.UserAgent, "lifeboat/")
		ok := code >= 200 && code < 300
		var table map[string]*podTimes
		isFloor := floorNS != "" && ref.Namespace == floorNS
		switch {
		case ref.Namespace == ns:
			table = mine
		case isFloor:
			table = floor
		}
		pt := func() *podTimes {
			if table[ref.Name] == nil {
				table[ref.Name] = &podTimes{}
			}
			return table[ref.Name]
		}
		switch {
		case e.Verb == "create" && ref.Resource == "pods" && ref.Subresource == "eviction" && table != nil:
			if isFloor || lifeboat && pods[ref.Name] != "" {
				if !isFloor {
					tl.EvictionAnswers[code]++
				}
				p := pt()
				earliest(&p.firstTry, e.Received)
				switch {
				case code == 201:
					earliest(&p.evicted, e.Answered)
				case p.evicted.IsZero():
					p.refused++
				}
			}
		case e.Verb == "delete" && ref.Resource == "pods" && ref.Subresource == "" && table != nil && ok:
			earliest(&pt().deleted, e.Answered)
		case e.Verb == "list" && ref.Resource == "pods" && lifeboat && ok:
			q, err := url.ParseRequestURI(e.RequestURI)
			if err != nil {
				continue
			}
			node, found := strings.CutPrefix(q.Query().Get("fieldSelector"), "spec.nodeName=")
			if t, mineNode := nodes[node]; found && mineNode {
				earliest(&t[1], e.Answered)
			}
		case e.Verb == "patch" && ref.Resource == "nodes" && ref.Subresource == "" && lifeboat && ok:
			t, mineNode := nodes[ref.Name]
			if !mineNode {
				continue
			}
			if cordons(e.RequestObject) {
				earliest(&t[0], e.Answered)
			} else {
				t[5] = e.Answered
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	var retry []float64
	for name, p := range mine {
		t := nodes[pods[name]]
		if t == nil {
			continue
		}
		earliest(&t[2], p.firstTry)
		if !p.evicted.IsZero() && p.evicted.After(t[3]) {
			t[3] = p.evicted
		}
		if !p.deleted.IsZero() && p.deleted.After(t[4]) {
			t[4] = p.deleted
		}
		if !p.evicted.IsZero() && p.refused > 0 {
			retry = append(retry, p.evicted.Sub(p.firstTry).Seconds())
		}
	}
	tl.RetriedPods, tl.RetryDelay = len(retry), percentiles(retry)
	for i, name := range timelineSteps {
		var at, gap []float64
		for _, t := range nodes {
			if t[i].IsZero() {
				continue
			}
			at = append(at, t[i].Sub(t0).Seconds())
			if i > 0 && !t[i-1].IsZero() {
				gap = append(gap, t[i].Sub(t[i-1]).Seconds())
			}
		}
		tl.Steps = append(tl.Steps, TimelineStep{Name: name, At: percentiles(at), Gap: percentiles(gap)})
	}
	if len(floor) > 0 {
		var lag []float64
		for _, p := range floor {
			if !p.evicted.IsZero() && !p.deleted.IsZero() {
				lag = append(lag, p.deleted.Sub(p.evicted).Seconds())
			}
		}
		pc := percentiles(lag)
		tl.FloorEvictedToGone = &pc
	}
	return tl, nil
}

// timelineTable is the report's lines about the timeline ("" without).
func (r *Result) timelineTable() string {
	tl := r.Timeline
	if tl == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("\ndrain timeline from the API server's audit log (s; at: since the first message, gap: since the step above)\n")
	fmt.Fprintf(&b, "%-16s %8s %8s %8s %8s   %8s %8s %8s %8s\n", "step", "at p50", "p90", "p99", "max", "gap p50", "p90", "p99", "max")
	for _, s := range tl.Steps {
		fmt.Fprintf(&b, "%-16s %8.2f %8.2f %8.2f %8.2f   %8.2f %8.2f %8.2f %8.2f\n", s.Name,
			s.At.P50, s.At.P90, s.At.P99, s.At.Max, s.Gap.P50, s.Gap.P90, s.Gap.P99, s.Gap.Max)
	}
	codes := make([]string, 0, len(tl.EvictionAnswers))
	for _, c := range slices.Sorted(maps.Keys(tl.EvictionAnswers)) {
		codes = append(codes, fmt.Sprintf("%d: %d", c, tl.EvictionAnswers[c]))
	}
	fmt.Fprintf(&b, "lifeboat's evictions by answer: %s; %d pods evicted after a refusal, first try -> accepted p50 %.2f s, max %.2f s\n",
		strings.Join(codes, ", "), tl.RetriedPods, tl.RetryDelay.P50, tl.RetryDelay.Max)
	if f := tl.FloorEvictedToGone; f != nil {
		fmt.Fprintf(&b, "floor: eviction answered -> pod deleted p50 %.2f s, p90 %.2f s, max %.2f s\n", f.P50, f.P90, f.Max)
	}
	// lifeboat's own part ends when its last eviction is accepted; what
	// follows is the kubelets' (here kwok's) shutdown of the pods.
	for _, s := range tl.Steps {
		if s.Name == "evicted" && s.At.Max > 0 && r.Floor != nil && r.Floor.AllEvicted > 0 {
			fmt.Fprintf(&b, "every eviction accepted at %.2f s: %.2f x the bare client's %.2f s\n", s.At.Max, s.At.Max/r.Floor.AllEvicted, r.Floor.AllEvicted)
		}
	}
	return b.String()
}
