package testenv

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
)

// APIRequestCounts reads the apiserver's own /metrics and returns
// apiserver_request_total summed by verb (LIST, GET, WATCH, POST, PUT,
// PATCH, DELETE, APPLY, ...). The counters cover every client, including the
// controllers and kwok: compare two readings taken around the code under
// test rather than absolute values.
func (e *Env) APIRequestCounts(ctx context.Context) (map[string]float64, error) {
	return e.apiRequestCounts(ctx, byVerb)
}

func byVerb(l map[string]string) string { return l["verb"] }

// APIRequestCountsByResource is APIRequestCounts keyed by "VERB resource"
// or "VERB resource/subresource", e.g. "LIST pods", "POST pods/eviction",
// "PATCH nodes".
func (e *Env) APIRequestCountsByResource(ctx context.Context) (map[string]float64, error) {
	return e.apiRequestCounts(ctx, func(l map[string]string) string {
		k := l["verb"] + " " + l["resource"]
		if s := l["subresource"]; s != "" {
			k += "/" + s
		}
		return k
	})
}

func (e *Env) apiRequestCounts(ctx context.Context, key func(map[string]string) string) (map[string]float64, error) {
	raw, err := e.apiMetrics(ctx)
	if err != nil {
		return nil, err
	}
	return sumCounter(raw, "apiserver_request_total", key)
}

// APICounters are the API server's counters a benchmark compares before
// and after a run, from one read of its /metrics:
//
//   - Requests: apiserver_request_total by verb (APIRequestCounts).
//   - Storage: how it served lists, by resource. "etcd list pods" counts
//     the range reads it sent to etcd (etcd_requests_total, operation
//     list: every object of the resource, whatever the field selector; its
//     watch cache's own list at start is one); "cache fallback pods" the
//     consistent lists the watch cache could not serve in time (its 3 s
//     wait) and sent to etcd instead
//     (apiserver_watch_cache_consistent_read_total, fallback="true"): a
//     burst's lists that reach etcd are what grows etcd's memory;
//     "terminated watches pods" the watches the watch cache closed because
//     their client fell behind (apiserver_terminated_watchers_total).
//   - APF: API Priority and Fairness by priority level and FlowSchema
//     (<flow> is "<level>/<flowschema>"). "dispatched <flow>" requests let
//     through, "rejected <flow>" those turned away (429), "wait-seconds
//     <flow>" the time requests queued before they
//     ran (summed). The testbed's components are system:masters (the
//     exempt level): a client running as a ServiceAccount is alone in its
//     level.
type APICounters struct {
	Requests, Storage, APF map[string]float64
}

// APICounters reads the API server's counters (APICounters) at once.
func (e *Env) APICounters(ctx context.Context) (APICounters, error) {
	raw, err := e.apiMetrics(ctx)
	if err != nil {
		return APICounters{}, err
	}
	var c APICounters
	if c.Requests, err = sumCounter(raw, "apiserver_request_total", byVerb); err != nil {
		return c, err
	}
	if c.Storage, err = sumCounters(raw, storageCounters); err != nil {
		return c, err
	}
	c.APF, err = sumCounters(raw, apfCounters)
	return c, err
}

// counter is one metric summed into APICounters, keyed by key(labels);
// a sample whose key is "" is not counted.
type counter struct {
	metric string
	key    func(map[string]string) string
}

var storageCounters = []counter{
	{"etcd_requests_total", func(l map[string]string) string {
		if l["operation"] != "list" {
			return ""
		}
		return "etcd list " + l["resource"]
	}},
	{"apiserver_watch_cache_consistent_read_total", func(l map[string]string) string {
		if l["fallback"] != "true" {
			return ""
		}
		return "cache fallback " + l["resource"]
	}},
	{"apiserver_terminated_watchers_total", func(l map[string]string) string { return "terminated watches " + l["resource"] }},
}

var apfCounters = []counter{
	{"apiserver_flowcontrol_dispatched_requests_total", func(l map[string]string) string { return "dispatched " + apfFlow(l) }},
	{"apiserver_flowcontrol_rejected_requests_total", func(l map[string]string) string { return "rejected " + apfFlow(l) }},
	{"apiserver_flowcontrol_request_wait_duration_seconds_sum", func(l map[string]string) string { return "wait-seconds " + apfFlow(l) }},
	// Seats APF reserved for the requests (the larger of initial and
	// final): a list from the watch cache is estimated by the memory it
	// may use, up to 10 seats.
	{"apiserver_flowcontrol_work_estimated_seats_sum", func(l map[string]string) string { return "seats " + apfFlow(l) }},
	{"apiserver_flowcontrol_work_estimated_seats_count", func(l map[string]string) string { return "estimates " + apfFlow(l) }},
}

// apfFlow is an APF sample's "<priority level>/<FlowSchema>".
func apfFlow(l map[string]string) string { return l["priority_level"] + "/" + l["flow_schema"] }

// sumCounters sums every counter of cs into one map.
func sumCounters(raw []byte, cs []counter) (map[string]float64, error) {
	out := map[string]float64{}
	for _, c := range cs {
		m, err := sumCounter(raw, c.metric, c.key)
		if err != nil {
			return nil, err
		}
		for k, v := range m {
			out[k] += v
		}
	}
	delete(out, "")
	return out, nil
}

func (e *Env) apiMetrics(ctx context.Context) ([]byte, error) {
	raw, err := e.Client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading apiserver metrics: %w", err)
	}
	return raw, nil
}

// sumCounter sums the samples of the counter name by key(labels).
func sumCounter(raw []byte, name string, key func(map[string]string) string) (map[string]float64, error) {
	samples, err := parseCounter(raw, name)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range samples {
		out[key(s.labels)] += s.value
	}
	return out, nil
}

type sample struct {
	labels map[string]string
	value  float64
}

// parseCounter returns the samples of one metric from the Prometheus text
// exposition format.
func parseCounter(raw []byte, name string) ([]sample, error) {
	var out []sample
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		labels := map[string]string{}
		if strings.HasPrefix(rest, "{") {
			var err error
			labels, rest, err = parseLabels(rest[1:])
			if err != nil {
				return nil, fmt.Errorf("parsing %q: %w", line, err)
			}
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("parsing %q: no value", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("parsing %q: %w", line, err)
		}
		out = append(out, sample{labels: labels, value: v})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading metrics: %w", err)
	}
	return out, nil
}

// parseLabels parses `a="x",b="y"}` and returns the labels and what follows
// the closing brace.
func parseLabels(s string) (map[string]string, string, error) {
	labels := map[string]string{}
	for {
		s = strings.TrimLeft(s, " ,")
		if strings.HasPrefix(s, "}") {
			return labels, s[1:], nil
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 || len(s) < eq+2 || s[eq+1] != '"' {
			return nil, "", fmt.Errorf("malformed labels")
		}
		name := strings.TrimSpace(s[:eq])
		s = s[eq+2:]
		var val strings.Builder
		i := 0
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(s[i])
				}
				continue
			}
			val.WriteByte(s[i])
		}
		if i >= len(s) {
			return nil, "", fmt.Errorf("unterminated label value")
		}
		labels[name] = val.String()
		s = s[i+1:]
	}
}

// APIMetricSum reads the apiserver's own /metrics and sums the samples of
// the metric name whose labels include every pair of match (nil: all), e.g.
// apiserver_longrunning_requests with verb WATCH: the watches held now.
func (e *Env) APIMetricSum(ctx context.Context, name string, match map[string]string) (float64, error) {
	raw, err := e.Client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading apiserver metrics: %w", err)
	}
	samples, err := parseCounter(raw, name)
	if err != nil {
		return 0, err
	}
	var sum float64
next:
	for _, s := range samples {
		for k, v := range match {
			if s.labels[k] != v {
				continue next
			}
		}
		sum += s.value
	}
	return sum, nil
}
