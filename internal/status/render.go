package status

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Render prints the nodes as two plain tables: one row per node, then the
// pods left on them. The output is for people; JSON is for machines.
func Render(w io.Writer, nodes []Node) error {
	if len(nodes) == 0 {
		_, err := fmt.Fprintln(w, "lifeboat is handling no nodes")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tINSTANCE\tSTATE\tREASON\tDEADLINE\tLEFT\tPODS\tHEARTBEATS\tLIFECYCLE")
	for _, n := range nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", n.Name, dash(n.InstanceID), n.State, dash(n.Reason),
			deadline(n.Deadline), left(n.SecondsLeft), podCount(n.Pods), n.Heartbeats, lifecycle(n.Lifecycle))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var rows []string
	for _, n := range nodes {
		for _, p := range n.Pods {
			note := ""
			if p.Stays {
				note = "stays (DaemonSet or mirror pod)"
			}
			rows = append(rows, fmt.Sprintf("%s\t%s/%s\t%s\t%s", n.Name, p.Namespace, p.Name, p.State, note))
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "NODE\tPOD\tSTATE\tNOTE")
	for _, r := range rows {
		fmt.Fprintln(tw, r)
	}
	return tw.Flush()
}

// JSON prints the nodes as one JSON document.
func JSON(w io.Writer, nodes []Node, now time.Time) error {
	if nodes == nil {
		nodes = []Node{}
	}
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(struct {
		Time  time.Time `json:"time"`
		Nodes []Node    `json:"nodes"`
	}{now.UTC(), nodes})
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func deadline(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return t.UTC().Format("15:04:05Z")
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

func lifecycle(l *Lifecycle) string {
	if l == nil {
		return "-"
	}
	s := l.State
	if l.Result != "" {
		s += " " + l.Result
	}
	return strings.Join([]string{l.Group + "/" + l.Hook, s}, " ")
}
