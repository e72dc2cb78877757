package status

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// printed are two nodes as Build returns them: one draining with pods
// left and its lifecycle action pending, one drained.
var printed = []Node{
	{Name: "ip-10-0-1-5", InstanceID: "i-0123456789abcdef0", Zone: "us-east-1a", InstanceType: "m5.large", State: Handling, Reason: "spot-interruption",
		Events: []string{"rebalance-recommendation", "spot-interruption"}, Deadline: now.Add(90 * time.Second), SecondsLeft: ptr(90),
		Pods: []Pod{{"default", "web", "Terminating", false}, {"default", "db", "Running", false}, {"kube-system", "agent", "Running", true}}, Heartbeats: 2,
		Lifecycle: &Lifecycle{Group: "workers", Hook: "drain", State: "pending"}},
	{Name: "ip-10-0-2-7", State: Drained, Reason: "spot-interruption", Pods: []Pod{}, DrainedAt: now.Add(-time.Minute),
		Lifecycle: &Lifecycle{Group: "workers", Hook: "drain", State: "completed", Result: "ABANDON"}},
}

// fields is the output with each line's runs of blanks made one: the
// tables' structure (which cells, in which order, on which line) without
// their padding.
func fields(s string) []string {
	var lines []string
	for l := range strings.Lines(s) {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return lines
}

func TestPrintTables(t *testing.T) {
	tests := []struct {
		name  string
		nodes []Node
		opts  PrintOptions
		want  []string
	}{
		{
			name:  "table",
			nodes: printed,
			opts:  PrintOptions{Output: OutputTable},
			want: []string{
				"NODE STATE REASON LEFT PODS HEARTBEATS LIFECYCLE",
				"ip-10-0-1-5 handling spot-interruption 1m30s 2 (1 terminating) 2 pending",
				"ip-10-0-2-7 drained spot-interruption - 0 0 completed ABANDON",
				"",
				"NODE POD STATE NOTE",
				"ip-10-0-1-5 default/web Terminating",
				"ip-10-0-1-5 default/db Running",
				"ip-10-0-1-5 kube-system/agent Running stays (DaemonSet or mirror pod)",
			},
		},
		{
			name:  "wide",
			nodes: printed,
			opts:  PrintOptions{Output: OutputWide},
			want: []string{
				"NODE STATE REASON LEFT PODS HEARTBEATS LIFECYCLE INSTANCE ZONE INSTANCE-TYPE EVENTS DEADLINE HOOK DRAINED",
				"ip-10-0-1-5 handling spot-interruption 1m30s 2 (1 terminating) 2 pending i-0123456789abcdef0 us-east-1a m5.large rebalance-recommendation,spot-interruption 2026-11-25T06:01:30Z workers/drain -",
				"ip-10-0-2-7 drained spot-interruption - 0 0 completed ABANDON - - - - unknown workers/drain 2026-11-25T05:59:00Z",
				"",
				"NODE POD STATE NOTE",
				"ip-10-0-1-5 default/web Terminating",
				"ip-10-0-1-5 default/db Running",
				"ip-10-0-1-5 kube-system/agent Running stays (DaemonSet or mirror pod)",
			},
		},
		{
			name:  "no headers: the rows only",
			nodes: printed,
			opts:  PrintOptions{Output: OutputWide, NoHeaders: true},
			want: []string{
				"ip-10-0-1-5 handling spot-interruption 1m30s 2 (1 terminating) 2 pending i-0123456789abcdef0 us-east-1a m5.large rebalance-recommendation,spot-interruption 2026-11-25T06:01:30Z workers/drain -",
				"ip-10-0-2-7 drained spot-interruption - 0 0 completed ABANDON - - - - unknown workers/drain 2026-11-25T05:59:00Z",
				"ip-10-0-1-5 default/web Terminating",
				"ip-10-0-1-5 default/db Running",
				"ip-10-0-1-5 kube-system/agent Running stays (DaemonSet or mirror pod)",
			},
		},
		{
			name:  "no pods left: no pod table",
			nodes: printed[1:],
			opts:  PrintOptions{Output: OutputTable},
			want: []string{
				"NODE STATE REASON LEFT PODS HEARTBEATS LIFECYCLE",
				"ip-10-0-2-7 drained spot-interruption - 0 0 completed ABANDON",
			},
		},
		{name: "no nodes", opts: PrintOptions{Output: OutputTable}, want: []string{"lifeboat is handling no nodes"}},
		{name: "no nodes selected", opts: PrintOptions{Output: OutputWide, Selected: true}, want: []string{"lifeboat is handling none of the selected nodes"}},
		{name: "no nodes, no headers", opts: PrintOptions{Output: OutputTable, NoHeaders: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Print(&b, tt.nodes, now, tt.opts); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, fields(b.String())); diff != "" {
				t.Errorf("Print (-want +got):\n%s\noutput:\n%s", diff, b.String())
			}
			for l := range strings.Lines(b.String()) {
				if strings.HasSuffix(l, " \n") {
					t.Errorf("line %q ends in blanks", l)
				}
			}
		})
	}
}

// The columns line up: each header starts where its cells start.
func TestPrintTableAligns(t *testing.T) {
	var b bytes.Buffer
	if err := Print(&b, printed, now, PrintOptions{Output: OutputTable}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	header, row := lines[0], lines[1]
	for _, col := range []struct{ header, cell string }{{"STATE", "handling"}, {"LEFT", "1m30s"}, {"LIFECYCLE", "pending"}} {
		if h, c := strings.Index(header, col.header), strings.Index(row, col.cell); h != c {
			t.Errorf("%s starts at %d, its cell %q at %d:\n%s", col.header, h, col.cell, c, b.String())
		}
	}
}

// -o json and -o yaml print one versioned List; both read back the same.
func TestPrintDocuments(t *testing.T) {
	want := List{APIVersion: "lifeboat.io/v1alpha1", Kind: "NodeStatusList", Time: now, Items: printed}
	tests := []struct {
		output Output
		nodes  []Node
		want   List
		// starts is how the document begins (the version is its first field).
		starts string
		decode func([]byte, any) error
	}{
		{OutputJSON, printed, want, "{\n  \"apiVersion\": \"lifeboat.io/v1alpha1\",\n  \"kind\": \"NodeStatusList\",", json.Unmarshal},
		{OutputYAML, printed, want, "apiVersion: lifeboat.io/v1alpha1\n", func(b []byte, v any) error { return yaml.Unmarshal(b, v) }},
		{OutputJSON, nil, List{APIVersion: APIVersion, Kind: ListKind, Time: now, Items: []Node{}}, "{", json.Unmarshal},
		{OutputYAML, nil, List{APIVersion: APIVersion, Kind: ListKind, Time: now, Items: []Node{}}, "apiVersion:", func(b []byte, v any) error { return yaml.Unmarshal(b, v) }},
	}
	for _, tt := range tests {
		t.Run(string(tt.output), func(t *testing.T) {
			var b bytes.Buffer
			if err := Print(&b, tt.nodes, now, PrintOptions{Output: tt.output}); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(b.String(), tt.starts) {
				t.Errorf("document starts %q, want %q:\n%s", b.String()[:min(len(b.String()), 80)], tt.starts, b.String())
			}
			var got List
			if err := tt.decode(b.Bytes(), &got); err != nil {
				t.Fatalf("reading back: %v\n%s", err, b.String())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("read back (-want +got):\n%s", diff)
			}
			if tt.nodes == nil && !strings.Contains(b.String(), "items") {
				t.Errorf("no nodes: want an empty items, got:\n%s", b.String())
			}
		})
	}
}

func TestPrintNames(t *testing.T) {
	var b bytes.Buffer
	if err := Print(&b, printed, now, PrintOptions{Output: OutputName}); err != nil {
		t.Fatal(err)
	}
	if want := "node/ip-10-0-1-5\nnode/ip-10-0-2-7\n"; b.String() != want {
		t.Errorf("-o name: %q, want %q", b.String(), want)
	}
}

func TestParseOutput(t *testing.T) {
	for _, s := range []string{"table", "wide", "json", "yaml", "name"} {
		if o, err := ParseOutput(s); err != nil || string(o) != s {
			t.Errorf("ParseOutput(%q) = %q, %v", s, o, err)
		}
	}
	for _, s := range []string{"", "Wide", "jsonpath", "go-template"} {
		_, err := ParseOutput(s)
		if err == nil || !strings.Contains(err.Error(), "table, wide, json, yaml, name") {
			t.Errorf("ParseOutput(%q): %v, want an error listing the valid formats", s, err)
		}
	}
}
