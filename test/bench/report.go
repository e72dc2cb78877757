package bench

// Report rendering for BenchmarkInterruptionBurst: pure functions from a
// measured Result to a text table, JSON and an SVG chart, so that they can
// be unit-tested without the testbed.

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"html"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// NodeTimes are one node's moments, as seconds since the first message of
// the burst was sent (for a scale-in: since the first lifecycle action
// started). A negative Cordoned, Drained or Completed means never seen;
// Completed (the lifecycle action completed by lifeboat) is only measured
// when Result.Lifecycle is set.
type NodeTimes struct {
	Name      string  `json:"name"`
	Sent      float64 `json:"sent_s"`
	Cordoned  float64 `json:"cordoned_s"`
	Drained   float64 `json:"drained_s"`
	Completed float64 `json:"lifecycle_completed_s,omitempty"`
}

// Percentiles of a latency distribution, in seconds.
type Percentiles struct {
	P50 float64 `json:"p50_s"`
	P90 float64 `json:"p90_s"`
	P99 float64 `json:"p99_s"`
	Max float64 `json:"max_s"`
}

// Result is what one burst measured.
type Result struct {
	Date        string `json:"date"`
	Command     string `json:"command"`
	Kind        string `json:"kind"` // spot, spot-queued or scale-in (see BenchmarkInterruptionBurst)
	Nodes       int    `json:"nodes"`
	PodsPerNode int    `json:"pods_per_node"`
	// Lifecycle is set when every node's interruption is a terminate
	// lifecycle action that lifeboat completes (kind scale-in).
	Lifecycle bool `json:"lifecycle"`
	// SendSeconds is how long the sender needed to put every message on
	// the queue (SendMessageBatch, ten per call).
	SendSeconds float64 `json:"send_s"`
	// ToCordoned and ToDrained are message sent -> node cordoned / marked
	// drained (lifeboat.io/drained), per node.
	ToCordoned Percentiles `json:"to_cordoned"`
	ToDrained  Percentiles `json:"to_drained"`
	// ToCompleted is message sent (action started) -> lifecycle action
	// completed, when Lifecycle.
	ToCompleted Percentiles `json:"to_lifecycle_completed,omitzero"`
	// AllCordoned, AllDrained and AllCompleted are first message sent ->
	// last node cordoned / drained / its action completed.
	AllCordoned  float64 `json:"all_cordoned_s"`
	AllDrained   float64 `json:"all_drained_s"`
	AllCompleted float64 `json:"all_lifecycle_completed_s,omitempty"`
	// APIRequests is the API server's apiserver_request_total by verb,
	// difference over the burst: every client (lifeboat, kwok, the
	// controllers, the benchmark's own informer).
	APIRequests map[string]float64 `json:"apiserver_requests_by_verb"`
	// LifeboatRequests is lifeboat's own lifeboat_kube_requests_total by
	// verb over the burst (events excluded, watches included as GET).
	LifeboatRequests map[string]float64 `json:"lifeboat_requests_by_verb"`
	// StorageReads is how the API server served lists over the burst, by
	// resource (testenv.APICounters.Storage): lists sent to etcd, consistent
	// lists the watch cache could not serve in time.
	StorageReads map[string]float64 `json:"apiserver_storage_reads,omitempty"`
	// APF is API Priority and Fairness over the burst by priority level
	// and FlowSchema (testenv.APICounters.APF): lifeboat, a ServiceAccount
	// in kube-system, is alone in workload-high; the testbed's components
	// are exempt.
	APF map[string]float64 `json:"apiserver_apf,omitempty"`
	// RequestsPerNode is the sum of LifeboatRequests over the nodes
	// drained (0: none drained).
	RequestsPerNode float64 `json:"lifeboat_requests_per_drained_node"`
	// CPU is each process's CPU seconds over the burst (the API server,
	// etcd, kwok, moto, lifeboat, the harness...): the machine's cores are
	// shared, so where the testbed is the bound this says which part.
	CPU map[string]float64 `json:"cpu_s_by_process,omitempty"`
	// PeakRSSMiB is lifeboat's VmHWM at the end of the burst.
	PeakRSSMiB float64 `json:"peak_rss_mib"`
	// AllReceived is first message sent -> lifeboat had received every
	// message (0: not measured).
	AllReceived float64 `json:"all_received_s,omitempty"`
	// Floor is the bare client's time for the same writes (nil: not run),
	// VsFloor lifeboat's as a multiple of it.
	Floor   *Floor   `json:"floor,omitempty"`
	VsFloor *VsFloor `json:"lifeboat_vs_floor,omitempty"`
	// Failover is what a failover run measured (nil: one replica).
	Failover *Failover `json:"failover,omitempty"`
	// Timeline is each node's drain step by step from the API server's
	// audit log (nil: LIFEBOAT_BENCH_AUDIT not set).
	Timeline *Timeline   `json:"timeline,omitempty"`
	PerNode  []NodeTimes `json:"per_node"`
}

// Summarize fills the percentiles and totals from PerNode.
func (r *Result) Summarize() {
	var cord, drain, done []float64
	for _, n := range r.PerNode {
		if r.Lifecycle && n.Completed >= 0 {
			done = append(done, n.Completed-n.Sent)
			r.AllCompleted = max(r.AllCompleted, n.Completed)
		}
		if n.Cordoned >= 0 {
			cord = append(cord, n.Cordoned-n.Sent)
			r.AllCordoned = max(r.AllCordoned, n.Cordoned)
		}
		if n.Drained >= 0 {
			drain = append(drain, n.Drained-n.Sent)
			r.AllDrained = max(r.AllDrained, n.Drained)
		}
	}
	r.ToCordoned = percentiles(cord)
	r.ToDrained = percentiles(drain)
	r.ToCompleted = percentiles(done)
	r.RequestsPerNode = 0
	if len(drain) > 0 {
		var sum float64
		for _, v := range r.LifeboatRequests {
			sum += v
		}
		r.RequestsPerNode = sum / float64(len(drain))
	}
	r.compare()
}

// percentiles uses the nearest-rank method: the p-th percentile of n
// sorted values is the value of rank ceil(p*n).
func percentiles(v []float64) Percentiles {
	if len(v) == 0 {
		return Percentiles{}
	}
	v = slices.Clone(v)
	slices.Sort(v)
	at := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(v)))) - 1
		return v[min(max(i, 0), len(v)-1)]
	}
	return Percentiles{P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: v[len(v)-1]}
}

// CountOf returns how many nodes were cordoned and drained, and how many
// lifecycle actions lifeboat completed (0 unless Lifecycle).
func (r *Result) CountOf() (cordoned, drained, completed int) {
	for _, n := range r.PerNode {
		if n.Cordoned >= 0 {
			cordoned++
		}
		if n.Drained >= 0 {
			drained++
		}
		if r.Lifecycle && n.Completed >= 0 {
			completed++
		}
	}
	return cordoned, drained, completed
}

// JSON renders the result, indented.
func (r *Result) JSON() ([]byte, error) {
	return json.MarshalIndent(r, "", "  ")
}

// Table renders the result as a plain-text report.
func (r *Result) Table() string {
	var b strings.Builder
	cord, drained, completed := r.CountOf()
	fmt.Fprintf(&b, "interruption burst (%s): %d nodes x %d pods (%s)\n", r.kind(), r.Nodes, r.PodsPerNode, r.Date)
	fmt.Fprintf(&b, "messages sent in %.2f s; %d/%d cordoned (last at %.2f s), %d/%d drained (last at %.2f s)",
		r.SendSeconds, cord, r.Nodes, r.AllCordoned, drained, r.Nodes, r.AllDrained)
	if r.Lifecycle {
		fmt.Fprintf(&b, ", %d/%d lifecycle actions completed (last at %.2f s)", completed, r.Nodes, r.AllCompleted)
	}
	fmt.Fprintf(&b, "\n\n%-30s %8s %8s %8s %8s\n", "latency (s)", "p50", "p90", "p99", "max")
	rows := []struct {
		name string
		p    Percentiles
	}{{"message -> cordoned", r.ToCordoned}, {"message -> drained", r.ToDrained}}
	if r.Lifecycle {
		rows = append(rows, struct {
			name string
			p    Percentiles
		}{"message -> lifecycle completed", r.ToCompleted})
	}
	for _, row := range rows {
		fmt.Fprintf(&b, "%-30s %8.3f %8.3f %8.3f %8.3f\n", row.name, row.p.P50, row.p.P90, row.p.P99, row.p.Max)
	}
	verbs := map[string]bool{}
	for v := range r.APIRequests {
		verbs[v] = true
	}
	for v := range r.LifeboatRequests {
		verbs[v] = true
	}
	fmt.Fprintf(&b, "\n%-10s %14s %10s\n", "verb", "apiserver(all)", "lifeboat")
	var sumAll, sumLB float64
	for _, v := range slices.Sorted(func(yield func(string) bool) {
		for k := range verbs {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "%-10s %14.0f %10.0f\n", v, r.APIRequests[v], r.LifeboatRequests[v])
		sumAll += r.APIRequests[v]
		sumLB += r.LifeboatRequests[v]
	}
	fmt.Fprintf(&b, "%-10s %14.0f %10.0f\n", "total", sumAll, sumLB)
	fmt.Fprintf(&b, "lifeboat requests per drained node: %.2f\n", r.RequestsPerNode)
	if len(r.StorageReads) > 0 {
		fmt.Fprintf(&b, "apiserver lists that reached etcd, watches it closed (all clients): %s\n", storageLine(r.StorageReads))
	}
	if l := apfLine(r.APF); l != "" {
		fmt.Fprintf(&b, "API priority and fairness: %s\n", l)
	}
	if len(r.CPU) > 0 {
		fmt.Fprintf(&b, "CPU seconds over the burst, by process: %s\n", cpuLine(r.CPU))
	}
	fmt.Fprintf(&b, "\nlifeboat peak RSS (VmHWM): %.1f MiB\n", r.PeakRSSMiB)
	b.WriteString(r.floorTable())
	b.WriteString(r.failoverTable())
	b.WriteString(r.timelineTable())
	if r.Command != "" {
		fmt.Fprintf(&b, "command: %s\n", r.Command)
	}
	return b.String()
}

// kind is Kind, "spot" when unset.
func (r *Result) kind() string {
	if r.Kind == "" {
		return "spot"
	}
	return r.Kind
}

// SVG renders the cumulative number of messages sent, nodes cordoned, nodes
// drained (and lifecycle actions completed) against time since the first
// message, as a step chart.
func (r *Result) SVG() []byte {
	const (
		w, h                 = 720, 420
		left, right, top, bt = 60, 20, 40, 50
	)
	pw, ph := float64(w-left-right), float64(h-top-bt)
	type serie struct {
		name, color string
		at          func(NodeTimes) float64
	}
	series := []serie{
		{"messages sent", "#999999", func(n NodeTimes) float64 { return n.Sent }},
		{"nodes cordoned", "#1f77b4", func(n NodeTimes) float64 { return n.Cordoned }},
		{"nodes drained", "#d62728", func(n NodeTimes) float64 { return n.Drained }},
	}
	if r.Lifecycle {
		series[0].name = "actions started"
		series = append(series, serie{"actions completed", "#2ca02c", func(n NodeTimes) float64 { return n.Completed }})
	}
	tmax := 0.0
	for _, n := range r.PerNode {
		tmax = max(tmax, n.Sent, n.Cordoned, n.Drained)
		if r.Lifecycle {
			tmax = max(tmax, n.Completed)
		}
	}
	tmax = niceCeil(tmax)
	ymax := float64(max(r.Nodes, len(r.PerNode), 1))
	x := func(t float64) float64 { return float64(left) + t/tmax*pw }
	y := func(c float64) float64 { return float64(top) + ph - c/ymax*ph }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14">%s</text>`+"\n", left,
		html.EscapeString(fmt.Sprintf("lifeboat interruption burst (%s): %d nodes x %d pods (%s)", r.kind(), r.Nodes, r.PodsPerNode, r.Date)))
	// Axes, ticks and grid.
	fmt.Fprintf(&b, `<path d="M%d %d V%d H%d" stroke="black" fill="none"/>`+"\n", left, top, h-bt, w-right)
	for i := 0; i <= 5; i++ {
		t := tmax * float64(i) / 5
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eeeeee"/>`+"\n", x(t), top, x(t), h-bt)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(t), h-bt+16, strconv.FormatFloat(t, 'g', 4, 64))
		c := ymax * float64(i) / 5
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%.0f</text>`+"\n", left-6, y(c)+4, c)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">seconds since the first message was sent</text>`+"\n", float64(left)+pw/2, h-12)
	fmt.Fprintf(&b, `<text x="14" y="%.1f" text-anchor="middle" transform="rotate(-90 14 %.1f)">nodes</text>`+"\n", float64(top)+ph/2, float64(top)+ph/2)
	for i, s := range series {
		var ts []float64
		for _, n := range r.PerNode {
			if t := s.at(n); t >= 0 {
				ts = append(ts, t)
			}
		}
		slices.Sort(ts)
		var d strings.Builder
		fmt.Fprintf(&d, "M%.1f %.1f", x(0), y(0))
		for k, t := range ts {
			fmt.Fprintf(&d, " H%.1f V%.1f", x(t), y(float64(k+1)))
		}
		if len(ts) > 0 {
			fmt.Fprintf(&d, " H%.1f", x(tmax))
		}
		fmt.Fprintf(&b, `<path class="%s" d="%s" stroke="%s" stroke-width="2" fill="none"/>`+"\n",
			strings.ReplaceAll(s.name, " ", "-"), d.String(), s.color)
		ly := top + 10 + 18*i
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", w-right-190, ly, w-right-165, ly, s.color)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s (%d)</text>`+"\n", w-right-158, ly+4, s.name, len(ts))
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// niceCeil rounds t up to a round number (at least 1 s) for the time axis.
func niceCeil(t float64) float64 {
	if t <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(t)))
	for _, m := range []float64{1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if t <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// CountersByLabel sums the samples of one counter in Prometheus text format
// by the value of one label (e.g. lifeboat_kube_requests_total by verb).
func CountersByLabel(text, metric, label string) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, metric+"{")
		if !ok {
			continue
		}
		end := strings.LastIndexByte(rest, '}')
		if end < 0 {
			continue
		}
		f := strings.Fields(rest[end+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		key := ""
		for _, kv := range strings.Split(rest[:end], ",") {
			if k, val, ok := strings.Cut(kv, "="); ok && strings.TrimSpace(k) == label {
				key = strings.Trim(val, `"`)
			}
		}
		out[key] += v
	}
	return out
}

// Diff returns after - before per key, leaving out keys that did not change.
func Diff(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// since converts a moment to seconds since t0, or -1 for the zero time.
func since(t0, t time.Time) float64 {
	if t.IsZero() {
		return -1
	}
	return t.Sub(t0).Seconds()
}

// storageLine prints StorageReads sorted by key, "none" when empty.
func storageLine(m map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// apfLine prints each flow ("<priority level>/<FlowSchema>") but the
// exempt level's in m (Result.APF): requests dispatched, rejected (429),
// their mean queue wait and the mean seats APF reserved for them (when
// counted); "" when there is none.
func apfLine(m map[string]float64) string {
	levels := map[string]bool{}
	for k := range m {
		if _, level, ok := strings.Cut(k, " "); ok && !strings.HasPrefix(level, "exempt/") {
			levels[level] = true
		}
	}
	var parts []string
	for _, l := range slices.Sorted(maps.Keys(levels)) {
		d, r, w := m["dispatched "+l], m["rejected "+l], m["wait-seconds "+l]
		mean := 0.0
		if d > 0 {
			mean = w / d * 1000
		}
		part := fmt.Sprintf("%s %.0f dispatched, %.0f rejected (429), mean queue wait %.0f ms", l, d, r, mean)
		if e := m["estimates "+l]; e > 0 {
			part += fmt.Sprintf(", %.2f seats a request", m["seats "+l]/e)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

// cpuLine is CPU seconds by process, most first, e.g. "kube-apiserver
// 12.3, moto 8.1, total 24.0".
func cpuLine(cpu map[string]float64) string {
	names := slices.SortedFunc(maps.Keys(cpu), func(a, b string) int {
		return cmp.Or(cmp.Compare(cpu[b], cpu[a]), cmp.Compare(a, b))
	})
	parts := make([]string, 0, len(names)+1)
	var total float64
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.1f", n, cpu[n]))
		total += cpu[n]
	}
	return strings.Join(append(parts, fmt.Sprintf("total %.1f", total)), ", ")
}
