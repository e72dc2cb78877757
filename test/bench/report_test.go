package bench

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	tests := []struct {
		name       string
		res        Result
		cordon     Percentiles
		drain      Percentiles
		allDrained float64
		completed  Percentiles
		series     int               // SVG series; 3 when 0
		paths      map[string]string // SVG path class -> its d attribute
		table      []string
	}{{
		name: "three nodes, all done",
		res: Result{Nodes: 3, PodsPerNode: 2, Date: "2026-11-22",
			APIRequests:      map[string]float64{"PUT": 5, "LIST": 4},
			LifeboatRequests: map[string]float64{"PUT": 3},
			PeakRSSMiB:       64.5,
			PerNode: []NodeTimes{
				{Name: "a", Sent: 0, Cordoned: 0.5, Drained: 1},
				{Name: "b", Sent: 0, Cordoned: 1, Drained: 2},
				{Name: "c", Sent: 1, Cordoned: 4, Drained: 5},
			}},
		cordon:     Percentiles{P50: 1, P90: 3, P99: 3, Max: 3},
		drain:      Percentiles{P50: 2, P90: 4, P99: 4, Max: 4},
		allDrained: 5,
		// Time axis 0..5 s over 640 px from x=60; node axis 0..3 over 330 px from y=370.
		paths: map[string]string{
			"messages-sent":  "M60.0 370.0 H60.0 V260.0 H60.0 V150.0 H188.0 V40.0 H700.0",
			"nodes-cordoned": "M60.0 370.0 H124.0 V260.0 H188.0 V150.0 H572.0 V40.0 H700.0",
			"nodes-drained":  "M60.0 370.0 H188.0 V260.0 H316.0 V150.0 H700.0 V40.0 H700.0",
		},
		table: []string{
			"3/3 cordoned (last at 4.00 s), 3/3 drained (last at 5.00 s)",
			"message -> cordoned               1.000    3.000    3.000    3.000",
			"message -> drained                2.000    4.000    4.000    4.000",
			"PUT                     5          3",
			"total                   9          3",
			"lifeboat requests per drained node: 1.00",
			"peak RSS (VmHWM): 64.5 MiB",
		},
	}, {
		name: "one node never drained",
		res: Result{Nodes: 2, PodsPerNode: 1,
			PerNode: []NodeTimes{
				{Name: "a", Sent: 0, Cordoned: 0.2, Drained: 0.4},
				{Name: "b", Sent: 0, Cordoned: 0.3, Drained: -1},
			}},
		cordon:     Percentiles{P50: 0.2, P90: 0.3, P99: 0.3, Max: 0.3},
		drain:      Percentiles{P50: 0.4, P90: 0.4, P99: 0.4, Max: 0.4},
		allDrained: 0.4,
		paths: map[string]string{
			"nodes-drained": "M60.0 370.0 H316.0 V205.0 H700.0",
		},
		table: []string{"2/2 cordoned (last at 0.30 s), 1/2 drained (last at 0.40 s)", "lifeboat requests per drained node: 0.00"},
	}, {
		name: "scale-in: lifecycle actions completed",
		res: Result{Kind: "scale-in", Lifecycle: true, Nodes: 2, PodsPerNode: 1,
			PerNode: []NodeTimes{
				{Name: "a", Sent: 0, Cordoned: 0.5, Drained: 1, Completed: 1.5},
				{Name: "b", Sent: 1, Cordoned: 1.5, Drained: 3, Completed: -1},
			}},
		cordon:     Percentiles{P50: 0.5, P90: 0.5, P99: 0.5, Max: 0.5},
		drain:      Percentiles{P50: 1, P90: 2, P99: 2, Max: 2},
		allDrained: 3,
		completed:  Percentiles{P50: 1.5, P90: 1.5, P99: 1.5, Max: 1.5},
		series:     4,
		// Time axis 0..3 s over 640 px; node axis 0..2 over 330 px.
		paths: map[string]string{
			"actions-started":   "M60.0 370.0 H60.0 V205.0 H273.3 V40.0 H700.0",
			"actions-completed": "M60.0 370.0 H380.0 V205.0 H700.0",
		},
		table: []string{
			"interruption burst (scale-in): 2 nodes x 1 pods",
			"1/2 lifecycle actions completed (last at 1.50 s)",
			"message -> lifecycle completed    1.500    1.500    1.500    1.500",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.res
			r.Summarize()
			if r.ToCordoned != tt.cordon || r.ToDrained != tt.drain || r.AllDrained != tt.allDrained || r.ToCompleted != tt.completed {
				t.Errorf("summary: cordon %+v drain %+v all drained %v completed %+v; want %+v %+v %v %+v",
					r.ToCordoned, r.ToDrained, r.AllDrained, r.ToCompleted, tt.cordon, tt.drain, tt.allDrained, tt.completed)
			}

			js, err := r.JSON()
			if err != nil {
				t.Fatal(err)
			}
			var back Result
			if err := json.Unmarshal(js, &back); err != nil {
				t.Fatal(err)
			}
			if back.ToDrained != tt.drain || len(back.PerNode) != len(tt.res.PerNode) || back.PeakRSSMiB != tt.res.PeakRSSMiB {
				t.Errorf("JSON round trip lost data:\n%s", js)
			}
			for _, key := range []string{`"to_cordoned"`, `"p99_s"`, `"apiserver_requests_by_verb"`, `"lifeboat_requests_by_verb"`, `"peak_rss_mib"`} {
				if !strings.Contains(string(js), key) {
					t.Errorf("JSON has no %s:\n%s", key, js)
				}
			}

			table := r.Table()
			for _, want := range tt.table {
				if !strings.Contains(table, want) {
					t.Errorf("table has no %q:\n%s", want, table)
				}
			}

			// The SVG is well-formed XML with one path per series.
			svg := r.SVG()
			dec := xml.NewDecoder(strings.NewReader(string(svg)))
			got := map[string]string{}
			for {
				tok, err := dec.Token()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("SVG is not well-formed: %v\n%s", err, svg)
				}
				if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "path" {
					var class, d string
					for _, a := range se.Attr {
						switch a.Name.Local {
						case "class":
							class = a.Value
						case "d":
							d = a.Value
						}
					}
					if class != "" {
						got[class] = d
					}
				}
			}
			wantSeries := tt.series
			if wantSeries == 0 {
				wantSeries = 3
			}
			if len(got) != wantSeries {
				t.Errorf("SVG has %d series paths, want %d: %v", len(got), wantSeries, got)
			}
			for class, want := range tt.paths {
				if got[class] != want {
					t.Errorf("SVG path %s:\n got %s\nwant %s", class, got[class], want)
				}
			}
		})
	}
}

func TestCountersByLabel(t *testing.T) {
	text := `# HELP lifeboat_kube_requests_total Requests.
# TYPE lifeboat_kube_requests_total counter
lifeboat_kube_requests_total{resource="nodes",verb="PUT"} 3
lifeboat_kube_requests_total{resource="pods",verb="LIST"} 2
lifeboat_kube_requests_total{resource="pods/eviction",verb="POST"} 100
lifeboat_kube_requests_total{resource="nodes",verb="PATCH"} 1
lifeboat_kube_requests_total{resource="pods",verb="POST"} 1.5
lifeboat_kube_requests_totalx{verb="PUT"} 9
`
	got := CountersByLabel(text, "lifeboat_kube_requests_total", "verb")
	want := map[string]float64{"PUT": 3, "LIST": 2, "POST": 101.5, "PATCH": 1}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %v, want %v", k, got[k], v)
		}
	}
	if d := Diff(map[string]float64{"PUT": 1, "LIST": 2}, got); d["PUT"] != 2 || d["POST"] != 101.5 || len(d) != 3 {
		t.Errorf("Diff: %v", d)
	}
}

func TestReportFloor(t *testing.T) {
	tests := []struct {
		name  string
		res   Result
		want  *VsFloor
		table []string
		not   []string
	}{{
		name: "floor and receiving measured",
		res: Result{Nodes: 2, PodsPerNode: 2, AllReceived: 0.4, CPU: map[string]float64{"moto": 2, "kube-apiserver": 3.25, "etcd": 0.5},
			Floor: &Floor{Nodes: 2, Pods: 4, Concurrency: 32, AllCordoned: 0.5, AllEvicted: 1, AllGone: 2.5, CPU: map[string]float64{"kwok": 1}},
			PerNode: []NodeTimes{
				{Name: "a", Sent: 0, Cordoned: 0.5, Drained: 2},
				{Name: "b", Sent: 0, Cordoned: 1, Drained: 5},
			}},
		want: &VsFloor{Cordoned: 2, Drained: 2},
		table: []string{
			"lifeboat received all 2 messages at 0.40 s",
			"bare client (32 requests at once, no rate limit; 2 nodes, 4 pods): all cordoned 0.50 s, all evicted 1.00 s, all pods gone 2.50 s",
			"lifeboat / bare client: all cordoned 2.00 x, all drained 2.00 x (pods gone)",
			"CPU seconds over the burst, by process: kube-apiserver 3.2, moto 2.0, etcd 0.5, total 5.8",
			"bare client: CPU seconds, by process: kwok 1.0, total 1.0",
		},
	}, {
		name: "moto's delivery measured: the cordons against the longer of the two floors",
		res: Result{Nodes: 2, PodsPerNode: 1,
			Floor: &Floor{Nodes: 2, Pods: 2, Concurrency: 32, AllCordoned: 0.5, AllEvicted: 1, AllGone: 2, AllReceived: 1.25, Receivers: 4},
			PerNode: []NodeTimes{
				{Name: "a", Sent: 0, Cordoned: 1, Drained: 2},
				{Name: "b", Sent: 0, Cordoned: 2.5, Drained: 3},
			}},
		want: &VsFloor{Cordoned: 5, Drained: 1.5, CordonedWithQueue: 2},
		table: []string{
			"bare SQS client (4 receives at once, ten messages each, nothing else): moto handed it all 2 messages in 1.25 s",
			"lifeboat / the longer of the bare client's cordons and moto's delivery: all cordoned 2.00 x",
		},
	}, {
		name: "the whole job's floor measured: the times against it too",
		res: Result{Nodes: 2, PodsPerNode: 1,
			Floor: &Floor{Nodes: 2, Pods: 2, Concurrency: 32, AllCordoned: 0.5, AllEvicted: 1, AllGone: 2,
				Pipeline: &PipelineFloor{AllReceived: 0.75, AllCordoned: 1.25, AllGone: 2.5, AllDeleted: 2.25, CPU: map[string]float64{"moto": 0.5}}},
			PerNode: []NodeTimes{
				{Name: "a", Sent: 0, Cordoned: 1, Drained: 2},
				{Name: "b", Sent: 0, Cordoned: 2.5, Drained: 3.75},
			}},
		want: &VsFloor{Cordoned: 5, Drained: 1.875, CordonedPipeline: 2, DrainedPipeline: 1.5},
		table: []string{
			"bare client doing the whole job (receive, cordon, evict, delete; moto sharing the cores): all received 0.75 s, all cordoned 1.25 s, all pods gone 2.50 s, all messages deleted 2.25 s",
			"lifeboat / the bare client doing the whole job: all cordoned 2.00 x, all drained 1.50 x",
			"bare client doing the whole job: CPU seconds, by process: moto 0.5, total 0.5",
		},
	}, {
		name: "lifeboat drained nothing: no drain ratio",
		res: Result{Nodes: 1, PodsPerNode: 1,
			Floor:   &Floor{Nodes: 1, Pods: 1, Concurrency: 32, AllCordoned: 0.25, AllEvicted: 0.5, AllGone: 1},
			PerNode: []NodeTimes{{Name: "a", Sent: 0, Cordoned: 0.5, Drained: -1}}},
		want:  &VsFloor{Cordoned: 2, Drained: 0},
		table: []string{"all cordoned 2.00 x, all drained 0.00 x"},
		not:   []string{"lifeboat received", "bare SQS client", "moto's delivery", "the whole job"},
	}, {
		name:  "no floor",
		res:   Result{Nodes: 1, PodsPerNode: 1, PerNode: []NodeTimes{{Name: "a", Sent: 0, Cordoned: 0.5, Drained: 1}}},
		table: []string{"peak RSS"},
		not:   []string{"bare client", "received", "CPU seconds"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.res
			r.Summarize()
			switch {
			case tt.want == nil && r.VsFloor != nil:
				t.Errorf("VsFloor = %+v, want none", *r.VsFloor)
			case tt.want != nil && (r.VsFloor == nil || *r.VsFloor != *tt.want):
				t.Errorf("VsFloor = %+v, want %+v", r.VsFloor, *tt.want)
			}
			table := r.Table()
			for _, want := range tt.table {
				if !strings.Contains(table, want) {
					t.Errorf("table has no %q:\n%s", want, table)
				}
			}
			for _, not := range tt.not {
				if strings.Contains(table, not) {
					t.Errorf("table has %q:\n%s", not, table)
				}
			}
			js, err := r.JSON()
			if err != nil {
				t.Fatal(err)
			}
			var back Result
			if err := json.Unmarshal(js, &back); err != nil {
				t.Fatal(err)
			}
			if (back.Floor == nil) != (tt.res.Floor == nil) || (back.VsFloor == nil) != (tt.want == nil) || back.AllReceived != tt.res.AllReceived {
				t.Errorf("JSON round trip lost the floor:\n%s", js)
			}
			if tt.res.Floor != nil {
				for _, key := range []string{`"floor"`, `"all_pods_gone_s"`, `"lifeboat_vs_floor"`, `"all_drained"`} {
					if !strings.Contains(string(js), key) {
						t.Errorf("JSON has no %s:\n%s", key, js)
					}
				}
			}
		})
	}
}

func TestAPFLine(t *testing.T) {
	for _, tc := range []struct {
		in   map[string]float64
		want string
	}{
		{in: nil, want: ""},
		{in: map[string]float64{"dispatched exempt/exempt": 9}, want: ""},
		{in: map[string]float64{"dispatched workload-high/kube-system-service-accounts": 200, "rejected workload-high/kube-system-service-accounts": 3,
			"wait-seconds workload-high/kube-system-service-accounts": 10, "dispatched exempt/exempt": 9},
			want: "workload-high/kube-system-service-accounts 200 dispatched, 3 rejected (429), mean queue wait 50 ms"},
		{in: map[string]float64{"dispatched workload-high/lifeboat-node-writes": 5000, "wait-seconds workload-high/lifeboat-node-writes": 5,
			"dispatched workload-high/kube-system-service-accounts": 100, "wait-seconds workload-high/kube-system-service-accounts": 100},
			want: "workload-high/kube-system-service-accounts 100 dispatched, 0 rejected (429), mean queue wait 1000 ms; workload-high/lifeboat-node-writes 5000 dispatched, 0 rejected (429), mean queue wait 1 ms"},
		{in: map[string]float64{"dispatched workload-high/kube-system-service-accounts": 100, "seats workload-high/kube-system-service-accounts": 550, "estimates workload-high/kube-system-service-accounts": 110},
			want: "workload-high/kube-system-service-accounts 100 dispatched, 0 rejected (429), mean queue wait 0 ms, 5.00 seats a request"},
	} {
		if got := apfLine(tc.in); got != tc.want {
			t.Errorf("apfLine(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
