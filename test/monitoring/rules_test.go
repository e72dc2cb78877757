package monitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/test/testenv"
)

// promtoolTests are the promtool unit tests of the rule file.
const promtoolTests = "testdata/alerts_test.yaml"

// promtool returns the path of Debian's promtool; a missing one fails the
// test, naming the package.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not on PATH: install Debian's prometheus package (make deps does as root; or sudo apt-get install -y --no-install-recommends prometheus): %v", err)
	}
	return p
}

// The rule file is valid (promtool check rules) and its unit tests pass
// (promtool test rules).
func TestPromtoolRules(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", ruleFilePath()},
		{"test", "rules", promtoolTests},
	} {
		cmd := exec.Command(bin, args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// unitTests is the part of a promtool tests file this package reads.
type unitTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name        string `json:"name"`
		InputSeries []struct {
			Series string `json:"series"`
		} `json:"input_series"`
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

func readUnitTests(t *testing.T) unitTests {
	t.Helper()
	b, err := os.ReadFile(promtoolTests)
	if err != nil {
		t.Fatal(err)
	}
	var u unitTests
	if err := yaml.Unmarshal(b, &u); err != nil {
		t.Fatal(err)
	}
	return u
}

// Every alert has a unit test in which it fires; the tests load the
// chart's rule file.
func TestPromtoolTestsCoverEveryAlert(t *testing.T) {
	u := readUnitTests(t)
	if len(u.RuleFiles) != 1 {
		t.Fatalf("rule_files %v, want the chart's rule file only", u.RuleFiles)
	}
	if got, err := filepath.Abs(filepath.Join(filepath.Dir(promtoolTests), u.RuleFiles[0])); err != nil || got != ruleFilePath() {
		t.Errorf("the tests load %s, want %s", got, ruleFilePath())
	}
	fires := map[string]bool{}
	for _, tc := range u.Tests {
		for _, a := range tc.AlertRuleTest {
			fires[a.Alertname] = fires[a.Alertname] || len(a.ExpAlerts) > 0
		}
	}
	for _, a := range alerts(t) {
		if !fires[a.Alert] {
			t.Errorf("no promtool test makes %s fire", a.Alert)
		}
	}
}

var leLabel = regexp.MustCompile(`le="([^"]+)"`)

// The histogram series of the unit tests have lifeboat's buckets: the
// boundaries decide what histogram_quantile reads.
func TestPromtoolTestsUseLifeboatsBuckets(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := metrics.New().Register(reg); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range families {
		if f.GetName() != "lifeboat_signal_to_drained_seconds" {
			continue
		}
		for _, b := range f.GetMetric()[0].GetHistogram().GetBucket() {
			want = append(want, strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))
		}
	}
	want = append(want, "+Inf")
	if len(want) < 10 {
		t.Fatalf("lifeboat_signal_to_drained_seconds buckets: %v", want)
	}
	for _, tc := range readUnitTests(t).Tests {
		var got []string
		for _, s := range tc.InputSeries {
			if m := leLabel.FindStringSubmatch(s.Series); m != nil && strings.HasPrefix(s.Series, "lifeboat_signal_to_drained_seconds_bucket") {
				got = append(got, m[1])
			}
		}
		if got == nil {
			continue
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("test %q: bucket boundaries differ from lifeboat's (-lifeboat +test):\n%s", tc.Name, d)
		}
	}
}

// runbookBase is where the alerts' runbooks are: docs/operations.md.
const runbookBase = "https://github.com/lifeboat-dev/lifeboat/blob/main/docs/operations.md#"

// Each alert has a summary, a description and a runbook link to its own
// section of docs/operations.md's Alerts, and that section names no alert
// the file does not have.
func TestRunbooks(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Alerts\n")
	if !ok {
		t.Fatal("docs/operations.md has no Alerts section")
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	var headings []string
	for _, l := range strings.Split(section, "\n") {
		if h, ok := strings.CutPrefix(l, "### "); ok {
			headings = append(headings, h)
		}
	}
	var names []string
	for _, a := range alerts(t) {
		names = append(names, a.Alert)
		if want := runbookBase + strings.ToLower(a.Alert); a.Annotations["runbook_url"] != want {
			t.Errorf("%s: runbook_url %q, want %q", a.Alert, a.Annotations["runbook_url"], want)
		}
		if !slices.Contains(headings, a.Alert) {
			t.Errorf("%s: docs/operations.md's Alerts section has no ### %s", a.Alert, a.Alert)
		}
		if a.Annotations["summary"] == "" || a.Annotations["description"] == "" {
			t.Errorf("%s: no summary or description: %v", a.Alert, a.Annotations)
		}
		if a.Labels["severity"] != "critical" && a.Labels["severity"] != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", a.Alert, a.Labels["severity"])
		}
	}
	if d := cmp.Diff(names, headings); d != "" {
		t.Errorf("docs/operations.md's runbooks are not the alerts of the rule file, in its order (-file +docs):\n%s", d)
	}
}

// docs/metrics.md's table of alerts is the rule file's: names in order,
// severity and for.
func TestAlertsTable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Alerts\n")
	if !ok {
		t.Fatal("docs/metrics.md has no Alerts section")
	}
	var doc [][]string
	for _, l := range strings.Split(section, "\n") {
		if !strings.HasPrefix(l, "| `") {
			if len(doc) > 0 {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), "|")
		for i := range cells {
			cells[i] = strings.Trim(strings.TrimSpace(cells[i]), "`")
		}
		doc = append(doc, cells[:3])
	}
	var file [][]string
	for _, a := range alerts(t) {
		forDur := "—"
		if a.For != nil {
			forDur = string(*a.For)
		}
		file = append(file, []string{a.Alert, a.Labels["severity"], forDur})
	}
	if d := cmp.Diff(file, doc); d != "" {
		t.Errorf("docs/metrics.md's alerts table differs from the rule file (-file +docs):\n%s", d)
	}
}
