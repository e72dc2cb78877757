package status

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"
)

// Output is a format of lifeboat status -o, as kubectl get's.
type Output string

const (
	// OutputTable: the nodes, then the pods left on them (the default).
	OutputTable Output = "table"
	// OutputWide: the tables with the wide columns (Priority 1) too.
	OutputWide Output = "wide"
	// OutputJSON: a List (apiVersion, kind, time, items).
	OutputJSON Output = "json"
	// OutputYAML: the same List as YAML.
	OutputYAML Output = "yaml"
	// OutputName: node/<name>, one a line, as kubectl get -o name.
	OutputName Output = "name"
)

// Outputs are the valid -o values, the default first.
var Outputs = []Output{OutputTable, OutputWide, OutputJSON, OutputYAML, OutputName}

// ParseOutput reads an -o value; an unknown one is an error that lists the
// valid ones.
func ParseOutput(s string) (Output, error) {
	names := make([]string, len(Outputs))
	for i, o := range Outputs {
		if string(o) == s {
			return o, nil
		}
		names[i] = string(o)
	}
	return "", fmt.Errorf("unknown output format %q: want one of %s", s, strings.Join(names, ", "))
}

// The document -o json and -o yaml print. Its fields are those of Node; a
// change that removes or renames one is a new version.
const (
	APIVersion = "lifeboat.io/v1alpha1"
	ListKind   = "NodeStatusList"
)

// List is the document of -o json and -o yaml.
type List struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Time is when the nodes were read (SecondsLeft counts from it).
	Time  time.Time `json:"time"`
	Items []Node    `json:"items"`
}

// NewList wraps nodes read at now.
func NewList(nodes []Node, now time.Time) List {
	if nodes == nil {
		nodes = []Node{}
	}
	return List{APIVersion: APIVersion, Kind: ListKind, Time: now.UTC(), Items: nodes}
}

// PrintOptions say how Print prints.
type PrintOptions struct {
	Output Output
	// NoHeaders leaves out the tables' header lines (and the line saying
	// no node is listed); table and wide only.
	NoHeaders bool
	// Selected: the nodes were picked by name or label selector (the line
	// saying no node is listed says so).
	Selected bool
}

// Print prints the nodes, read at now, as o says.
//
// JSON and YAML are written with encoding/json and sigs.k8s.io/yaml, not
// cli-runtime's JSONPrinter and YAMLPrinter: those take a runtime.Object,
// which List would have to become (DeepCopyObject) for the same Marshal;
// and cli-runtime is not linked (writeTable says why).
func Print(w io.Writer, nodes []Node, now time.Time, o PrintOptions) error {
	switch o.Output {
	case OutputJSON:
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		return e.Encode(NewList(nodes, now))
	case OutputYAML:
		b, err := yaml.Marshal(NewList(nodes, now))
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case OutputName:
		for _, n := range nodes {
			if _, err := fmt.Fprintf(w, "node/%s\n", n.Name); err != nil {
				return err
			}
		}
		return nil
	case OutputTable, OutputWide:
		return printTables(w, nodes, o)
	}
	return fmt.Errorf("output %q: not one of %v", o.Output, Outputs)
}

// printTables prints one row per node, then the pods left on them.
func printTables(w io.Writer, nodes []Node, o PrintOptions) error {
	if len(nodes) == 0 {
		if o.NoHeaders {
			return nil
		}
		msg := "lifeboat is handling no nodes"
		if o.Selected {
			msg = "lifeboat is handling none of the selected nodes"
		}
		_, err := fmt.Fprintln(w, msg)
		return err
	}
	wide := o.Output == OutputWide
	if err := writeTable(w, nodeColumns, nodeRows(nodes), wide, o.NoHeaders); err != nil {
		return err
	}
	pods := podRows(nodes)
	if len(pods) == 0 {
		return nil
	}
	if !o.NoHeaders { // kubectl separates tables only when it prints headers
		fmt.Fprintln(w)
	}
	return writeTable(w, podColumns, pods, wide, o.NoHeaders)
}

// column is a table's column; a wide one is shown with -o wide only.
type column struct {
	name string
	wide bool
}

// writeTable prints a table the way kubectl's does: upper-case headers,
// columns three spaces apart, no trailing blanks.
//
// cli-runtime's table printer (kubectl's) would do the same from a
// metav1.Table, but it links text/template-like jsonpath, a YAML parser and
// terminal code into every build: lifeboat-imds (the DaemonSet's binary,
// docs/benchmarks.md), stripped, was 23.24 MB with it and 22.86 MB with
// these few lines (22.79 MB before -o wide existed).
func writeTable(w io.Writer, cols []column, rows [][]string, wide, noHeaders bool) error {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 6, 4, 3, ' ', 0)
	line := func(cells []string) {
		var shown []string
		for i, c := range cols {
			if wide || !c.wide {
				shown = append(shown, cells[i])
			}
		}
		fmt.Fprintln(tw, strings.Join(shown, "\t"))
	}
	if !noHeaders {
		names := make([]string, len(cols))
		for i, c := range cols {
			names[i] = c.name
		}
		line(names)
	}
	for _, r := range rows {
		line(r)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for l := range strings.Lines(b.String()) {
		if _, err := fmt.Fprintln(w, strings.TrimRight(l, " \n")); err != nil {
			return err
		}
	}
	return nil
}

// nodeColumns are the node table's, in the order of nodeRows' cells.
var nodeColumns = []column{
	{name: "NODE"}, {name: "STATE"}, {name: "REASON"}, {name: "LEFT"}, {name: "PODS"}, {name: "HEARTBEATS"}, {name: "LIFECYCLE"},
	{name: "INSTANCE", wide: true}, {name: "ZONE", wide: true}, {name: "INSTANCE-TYPE", wide: true}, {name: "EVENTS", wide: true},
	{name: "DEADLINE", wide: true}, {name: "HOOK", wide: true}, {name: "DRAINED", wide: true},
}

func nodeRows(nodes []Node) [][]string {
	var rows [][]string
	for _, n := range nodes {
		hook := "-"
		if n.Lifecycle != nil {
			hook = n.Lifecycle.Group + "/" + n.Lifecycle.Hook
		}
		rows = append(rows, []string{
			n.Name, string(n.State), dash(n.Reason), left(n.SecondsLeft), podCount(n.Pods), fmt.Sprint(n.Heartbeats), lifecycle(n.Lifecycle),
			dash(n.InstanceID), dash(n.Zone), dash(n.InstanceType), dash(strings.Join(n.Events, ",")), timestamp(n.Deadline, "unknown"),
			hook, timestamp(n.DrainedAt, "-"),
		})
	}
	return rows
}

var podColumns = []column{{name: "NODE"}, {name: "POD"}, {name: "STATE"}, {name: "NOTE"}}

func podRows(nodes []Node) [][]string {
	var rows [][]string
	for _, n := range nodes {
		for _, p := range n.Pods {
			note := ""
			if p.Stays {
				note = "stays (DaemonSet or mirror pod)"
			}
			rows = append(rows, []string{n.Name, p.Namespace + "/" + p.Name, p.State, note})
		}
	}
	return rows
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func timestamp(t time.Time, zero string) string {
	if t.IsZero() {
		return zero
	}
	return t.UTC().Format(time.RFC3339)
}

func left(s *int64) string {
	if s == nil {
		return "-"
	}
	if *s < 0 {
		return "passed " + (time.Duration(-*s) * time.Second).String() + " ago"
	}
	return (time.Duration(*s) * time.Second).String()
}

// podCount summarises the pods: how many a drain still has to move.
func podCount(pods []Pod) string {
	moving, terminating := 0, 0
	for _, p := range pods {
		if p.Stays {
			continue
		}
		moving++
		if p.State == "Terminating" {
			terminating++
		}
	}
	s := fmt.Sprint(moving)
	if terminating > 0 {
		s += fmt.Sprintf(" (%d terminating)", terminating)
	}
	return s
}

// lifecycle is the action's state: pending, or completed with its result
// (-o wide's HOOK names the action).
func lifecycle(l *Lifecycle) string {
	if l == nil {
		return "-"
	}
	if l.Result != "" {
		return l.State + " " + l.Result
	}
	return l.State
}
