package metrics

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

// capture is a Registerer that keeps the collectors, so that metric vectors
// without children (which Gather leaves out) can be described.
type capture struct{ cs []prometheus.Collector }

func (c *capture) Register(x prometheus.Collector) error { c.cs = append(c.cs, x); return nil }
func (c *capture) MustRegister(xs ...prometheus.Collector) {
	c.cs = append(c.cs, xs...)
}
func (c *capture) Unregister(prometheus.Collector) bool { return false }

type described struct {
	name      string
	labels    []string
	histogram bool
}

var (
	fqName    = regexp.MustCompile(`fqName: "([^"]+)"`)
	varLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
)

// registered describes every metric New registers.
func registered(t *testing.T) map[string]described {
	t.Helper()
	var c capture
	if err := New().Register(&c); err != nil {
		t.Fatal(err)
	}
	out := map[string]described{}
	for _, col := range c.cs {
		ch := make(chan *prometheus.Desc, 16)
		col.Describe(ch)
		close(ch)
		for d := range ch {
			s := d.String()
			m := fqName.FindStringSubmatch(s)
			if m == nil {
				t.Fatalf("cannot read the name of %s", s)
			}
			var labels []string
			if l := varLabels.FindStringSubmatch(s); l != nil && l[1] != "" {
				labels = strings.Split(l[1], ",")
			}
			_, h1 := col.(*prometheus.HistogramVec)
			_, h2 := col.(prometheus.Histogram)
			out[m[1]] = described{name: m[1], labels: labels, histogram: h1 || h2}
		}
	}
	if len(out) < 10 {
		t.Fatalf("only %d metrics described: %v", len(out), out)
	}
	return out
}

// Labels are bounded: never a node, instance, pod or event.
func TestLabelsBounded(t *testing.T) {
	forbidden := []string{"node", "nodename", "instance_id", "instanceid", "instance", "pod", "event_id", "eventid", "id", "name", "token", "queue", "url"}
	for name, d := range registered(t) {
		if !strings.HasPrefix(name, "lifeboat_") {
			t.Errorf("metric %s does not start with lifeboat_", name)
		}
		for _, l := range d.labels {
			if slices.Contains(forbidden, strings.ToLower(l)) {
				t.Errorf("metric %s has the unbounded label %q", name, l)
			}
		}
	}
}

// docs/metrics.md documents every metric.
func TestMetricsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range registered(t) {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/metrics.md does not document %s", name)
			continue
		}
		for _, l := range d.labels {
			if !strings.Contains(string(doc), "`"+l+"`") {
				t.Errorf("docs/metrics.md does not name label %q of %s", l, name)
			}
		}
	}
}

// notOnDashboard are metrics deliberately left off the dashboard, and why.
var notOnDashboard = map[string]string{}

var promName = regexp.MustCompile(`\blifeboat_[a-z0-9_]+`)

// The Grafana dashboard parses, queries only metrics that exist, and shows
// every metric (but those in notOnDashboard).
func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "lifeboat-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr  string `json:"expr"`
				RefID string `json:"refId"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	if dash.Title == "" || dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("dashboard without title, uid or panels")
	}
	metrics := registered(t)
	used := map[string]bool{}
	resolve := func(token string) (string, bool) {
		if _, ok := metrics[token]; ok {
			return token, true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(token, suffix); ok && metrics[base].histogram {
				return base, true
			}
		}
		return "", false
	}
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Expr == "" || tg.RefID == "" {
				t.Errorf("panel %q: a target without expr or refId", p.Title)
			}
			if !balanced(tg.Expr) {
				t.Errorf("panel %q: unbalanced brackets in %s", p.Title, tg.Expr)
			}
			if len(promName.FindAllString(tg.Expr, -1)) == 0 {
				t.Errorf("panel %q: %s queries no lifeboat metric", p.Title, tg.Expr)
			}
		}
	}
	// Every lifeboat_ name anywhere in the dashboard (queries, variables) must exist.
	for _, token := range promName.FindAllString(string(raw), -1) {
		base, ok := resolve(token)
		if !ok {
			t.Errorf("the dashboard uses %s, which internal/metrics does not register", token)
			continue
		}
		used[base] = true
	}
	for name := range metrics {
		if !used[name] && notOnDashboard[name] == "" {
			t.Errorf("metric %s is not on the dashboard", name)
		}
	}
}

// balanced reports whether (), [] and {} nest properly outside quotes.
func balanced(s string) bool {
	var stack []rune
	pairs := map[rune]rune{')': '(', ']': '[', '}': '{'}
	quoted := false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
		case quoted:
		case r == '(' || r == '[' || r == '{':
			stack = append(stack, r)
		case pairs[r] != 0:
			if len(stack) == 0 || stack[len(stack)-1] != pairs[r] {
				return false
			}
			stack = stack[:len(stack)-1]
		}
	}
	return len(stack) == 0 && !quoted
}

// docs/metrics.md's list of the bounded labels ("Labels are bounded: ...")
// names every label of every metric, and no other.
func TestBoundedLabelsListed(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "Labels are bounded:")
	if !ok {
		t.Fatal(`docs/metrics.md has no "Labels are bounded:" list`)
	}
	list, _, _ := strings.Cut(after, ".")
	var listed []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(list, -1) {
		listed = append(listed, m[1])
	}
	var labels []string
	for _, d := range registered(t) {
		labels = append(labels, d.labels...)
	}
	slices.Sort(listed)
	slices.Sort(labels)
	if d := cmp.Diff(slices.Compact(labels), listed); d != "" {
		t.Errorf("the metrics' labels (-) and docs/metrics.md's list of bounded labels (+) differ:\n%s", d)
	}
}
