// Package check is `lifeboat check`, the doctor: with the configuration
// `lifeboat run` would use, it verifies before any interruption that the
// plumbing works (queue, queue policy and encryption, the EventBridge rules
// evaluated against real sample events, Auto Scaling lifecycle hooks, AWS
// and Kubernetes permissions, instance metadata) and says how to fix what
// does not.
//
// It only reads. Where AWS offers no read-only way to test a permission it
// calls the API with an identifier that cannot exist (a malformed receipt
// handle, an instance ID no instance has, EC2's DryRun), which AWS
// authorizes before it validates, so nothing can change. It must not be
// used by `lifeboat run` and it decides nothing about interruptions.
package check

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/kubeletshutdown"
	imdssrc "lifeboat.dev/lifeboat/internal/source/imds"
)

// Status is the outcome of one check.
type Status string

const (
	OK   Status = "ok"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Result is one row of the report.
type Result struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Found says what the check saw.
	Found string `json:"found"`
	// Fix says how to repair a warn or fail.
	Fix string `json:"fix,omitempty"`
	// Items are every object a cluster review row is about (its Found
	// names only the first few).
	Items []string `json:"items,omitempty"`
}

// Report is every check's result, in the order they ran.
type Report struct {
	Results []Result `json:"checks"`
}

// Failed reports whether any check failed.
func (r Report) Failed() bool { return r.Count(Fail) > 0 }

// Count returns how many checks have status s.
func (r Report) Count(s Status) int {
	n := 0
	for _, res := range r.Results {
		if res.Status == s {
			n++
		}
	}
	return n
}

// Summary is one line: how many checks, ok, warn and fail.
func (r Report) Summary() string {
	return fmt.Sprintf("%d checks: %d ok, %d warn, %d fail", len(r.Results), r.Count(OK), r.Count(Warn), r.Count(Fail))
}

// WriteTable prints the report as a table; a fix goes on the line below
// its check.
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tFOUND")
	for _, res := range r.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", res.Name, res.Status, oneLine(res.Found))
		if res.Fix != "" && res.Status != OK {
			fmt.Fprintf(tw, "\t\tfix: %s\n", oneLine(res.Fix))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, r.Summary())
	return err
}

// WriteJSON prints the report as JSON.
func (r Report) WriteJSON(w io.Writer) error {
	out := struct {
		Report
		Summary map[Status]int `json:"summary"`
	}{r, map[Status]int{OK: r.Count(OK), Warn: r.Count(Warn), Fail: r.Count(Fail)}}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Clients are the APIs the checks call. A nil AWS client skips its checks
// (IMDS mode has none); KubeErr explains a nil Kube.
type Clients struct {
	SQS         sqsAPI
	Events      eventsAPI
	AutoScaling autoscalingAPI
	STS         stsAPI
	EC2         ec2API
	ELB         elbAPI // Elastic Load Balancing v2 (--wait-for-load-balancers)
	Kube        kubernetes.Interface
	KubeErr     error
	// KubeHost is shown in the Kubernetes result.
	KubeHost string
	// IMDS is the metadata client `lifeboat run` would use (IMDS mode);
	// IMDSErr explains a nil IMDS (no endpoint could be resolved).
	IMDS    *imdssrc.Client
	IMDSErr error
	// Configz reads a node's kubelet /configz; nil: through Kube's node
	// proxy (kubeletshutdown.ProxyFetch).
	Configz kubeletshutdown.Fetch
}

// Run runs every check that applies to cfg's mode and returns the report.
func Run(ctx context.Context, cfg config.Config, c Clients) Report {
	r := &run{cfg: cfg, c: c, perms: newPermissions()}
	switch cfg.Mode {
	case config.ModeQueue:
		r.identity(ctx)
		r.queue(ctx)
		r.loadRules(ctx)
		r.loadGroups(ctx)
		r.eventRules()
		r.groupChecks(ctx)
		r.probePermissions(ctx)
		r.permissionsResult()
	case config.ModeIMDS:
		r.imds(ctx)
	}
	r.kubernetes(ctx)
	if cfg.Mode == config.ModeIMDS {
		r.imdsNode(ctx)
	}
	r.clusterReview(ctx)
	r.kubeletShutdown(ctx)
	return Report{Results: r.results}
}

// run is the state of one check run: what earlier checks learned.
type run struct {
	cfg     config.Config
	c       Clients
	results []Result
	perms   *permissions

	account  string
	queueARN string
	// queueRegion is the queue's region (from its ARN or URL).
	queueRegion    string
	queuePolicyDoc string
	rules          []rule
	rulesErr       error
	groups         []group
	groupsErr      error
	imdsID         string
}

func (r *run) add(name string, s Status, found, fix string) {
	r.results = append(r.results, Result{Name: name, Status: s, Found: found, Fix: fix})
}
