package prom

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/prometheus/common/model"

	"lifeboat.dev/lifeboat/test/testenv"
)

// want is what a query must return at the end of the run.
type want struct {
	// series must each match a series of the result (its labels include
	// these); nil: any series.
	series []map[string]string
	// positive: those series' values are above 0; otherwise they are
	// numbers (not NaN).
	positive bool
}

// panelWants are the dashboard's queries the run exercises, by "panel
// title/refId", and what each returns then. Every query of
// deploy/grafana/lifeboat-dashboard.json is here or in panelsNotExercised.
var panelWants = map[string]want{
	"Leader/A":                                             {positive: true}, // the main pair has one leader
	"Event source healthy/A":                               {series: []map[string]string{{"source": "sqs"}}},
	"Nodes in flight, ghost nodes/A":                       {},
	"Nodes in flight, ghost nodes/B":                       {positive: true}, // the blocked node, its instance terminated
	"Actions by result/C":                                  {positive: true, series: []map[string]string{{"forecast": "certain-miss", "outcome": "missed"}}},
	"Queue receive errors/A":                               {positive: true},
	"Events received by kind/A":                            {positive: true, series: []map[string]string{{"kind": "spot-interruption", "source": "sqs"}, {"kind": "lifecycle-launch", "source": "sqs"}}},
	"Messages ignored and rejected/A":                      {positive: true, series: []map[string]string{{"reason": "test-notification"}}},
	"Messages ignored and rejected/B":                      {positive: true, series: []map[string]string{{"reason": "invalid-json"}}},
	"Events for unknown instances/A":                       {positive: true},
	"Signal → cordoned/A":                                  {series: []map[string]string{{"kind": "spot-interruption"}}},
	"Signal → cordoned/B":                                  {series: []map[string]string{{"kind": "spot-interruption"}}},
	"Signal → drained/A":                                   {series: []map[string]string{{"kind": "spot-interruption"}}},
	"Signal → drained/B":                                   {series: []map[string]string{{"kind": "spot-interruption"}}},
	"Action duration/A":                                    {series: []map[string]string{{"action": "cordon"}, {"action": "drain"}}},
	"Action duration/B":                                    {series: []map[string]string{{"action": "cordon"}, {"action": "drain"}}},
	"Actions by result/A":                                  {positive: true, series: []map[string]string{{"action": "cordon", "result": "ok"}, {"action": "drain", "result": "ok"}, {"action": "drain", "result": "deadline"}}},
	"Actions by result/B":                                  {positive: true},
	"Evictions by result/A":                                {positive: true, series: []map[string]string{{"result": "evicted"}, {"result": "blocked"}, {"result": "cut-off"}}},
	"Lifecycle heartbeats, completions and lost actions/A": {positive: true, series: []map[string]string{{"call": "heartbeat", "result": "error"}, {"call": "complete", "result": "gone"}}},
	"Lifecycle heartbeats, completions and lost actions/B": {positive: true, series: []map[string]string{{"transition": "launch"}}},
	"Webhook notifications/A":                              {positive: true, series: []map[string]string{{"result": "sent"}, {"result": "failed"}}},
	"Webhook retries/A":                                    {positive: true},
	"Kubernetes API requests/A":                            {positive: true, series: []map[string]string{{"verb": "PATCH", "resource": "nodes"}, {"verb": "POST", "resource": "pods/eviction"}}},
}

// panelsNotExercised are the dashboard's queries the run leaves out, and
// why. Empty: the run exercises every query.
var panelsNotExercised = map[string]string{
	"Lifecycle heartbeats, completions and lost actions/C": "--wait-for-load-balancers is off in this run (it needs ELBv2 target groups, which this scenario has none of); " +
		"test/e2e TestLoadBalancersBeforeContinue counts lifeboat_load_balancer_waits_total by result",
	"Actions by result/D": "--replacement-first is off by default, and this run keeps the defaults; " +
		"the series exist from the start (internal/metrics TestSeriesStartAtZero); test/realnode TestZeroFailedRequests reads lifeboat_replacements_total{result=\"ready\"} from the binary (1 with the flag, 0 without)",
}

// panelQuery is one query of the dashboard.
type panelQuery struct {
	key  string // "panel title/refId"
	expr string
}

// dashboardQueries returns every query of the Grafana dashboard with its
// template variables substituted: $job by job (as the job variable's
// selection would), Grafana's interval variables by fixed values. A
// variable the test does not know fails it.
func dashboardQueries(job string) ([]panelQuery, error) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "deploy", "grafana", "lifeboat-dashboard.json"))
	if err != nil {
		return nil, err
	}
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var dash struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		return nil, err
	}
	vars := strings.NewReplacer(
		"$job", regexp.QuoteMeta(job),
		"$__rate_interval", "1m", // four scrape intervals of a 15 s scrape, Grafana's floor
		"$__interval", "15s",
		"$__range", "1h",
	)
	var out []panelQuery
	var walk func([]panel) error
	walk = func(ps []panel) error {
		for _, p := range ps {
			for _, tg := range p.Targets {
				if tg.Expr == "" {
					continue
				}
				expr := vars.Replace(tg.Expr)
				if strings.Contains(expr, "$") {
					return fmt.Errorf("panel %q query %s: a template variable the test does not substitute: %s", p.Title, tg.RefID, tg.Expr)
				}
				out = append(out, panelQuery{key: p.Title + "/" + tg.RefID, expr: expr})
			}
			var nested []panel
			for _, raw := range p.Panels {
				var n panel
				if err := json.Unmarshal(raw, &n); err != nil {
					return err
				}
				nested = append(nested, n)
			}
			if err := walk(nested); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(dash.Panels); err != nil {
		return nil, err
	}
	return out, nil
}

// check returns what is wrong with vec given w ("" when nothing).
func (w want) check(vec model.Vector) string {
	if len(vec) == 0 {
		return "no data"
	}
	var problems []string
	matches := func(s *model.Sample, labels map[string]string) bool {
		for k, v := range labels {
			if string(s.Metric[model.LabelName(k)]) != v {
				return false
			}
		}
		return true
	}
	wanted := w.series
	if wanted == nil {
		wanted = []map[string]string{{}}
	}
	for _, labels := range wanted {
		found := false
		for _, s := range vec {
			if !matches(s, labels) {
				continue
			}
			v := float64(s.Value)
			if math.IsNaN(v) || (w.positive && v <= 0) {
				continue
			}
			found = true
		}
		if !found {
			cond := "a number"
			if w.positive {
				cond = "above 0"
			}
			problems = append(problems, fmt.Sprintf("no series with labels %v whose value is %s", labels, cond))
		}
	}
	if len(problems) == 0 {
		return ""
	}
	var got []string
	for _, s := range vec {
		got = append(got, s.String())
	}
	sort.Strings(got)
	return strings.Join(problems, "; ") + "; got " + strings.Join(got, ", ")
}
