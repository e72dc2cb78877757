package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chartutil"

	"lifeboat.dev/lifeboat/test/testenv"
)

// nested are the values whose keys are the chart's own (documented one by
// one); other maps are Kubernetes fields, documented as a whole.
var nested = []string{"image", "serviceAccount", "rbac", "flowSchemas", "leaderElection", "serviceMonitor", "podMonitor", "prometheusRule"}

// valuePaths are the documented value names of values.yaml.
func valuePaths(t *testing.T) []string {
	t.Helper()
	vals, err := chartutil.ReadValuesFile(filepath.Join(chartDir(), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for k, v := range vals {
		m, isMap := v.(map[string]any)
		if isMap && slices.Contains(nested, k) {
			for sub := range m {
				out = append(out, k+"."+sub)
			}
			continue
		}
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// tableRows returns the first column (a `code` span) and the rest of each
// row of the first table after heading in a markdown file.
func tableRows(t *testing.T, file, heading string) [][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", file))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/%s has no %q section", file, heading)
	}
	var rows [][]string
	inTable := false
	for _, l := range strings.Split(after, "\n") {
		if !strings.HasPrefix(l, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(l, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		name := strings.Trim(cells[0], "`")
		if name == cells[0] || strings.HasPrefix(cells[0], "---") {
			continue // header or separator
		}
		rows = append(rows, append([]string{name}, cells[1:]...))
	}
	return rows
}

// Every value of values.yaml is in docs/install.md's values table and in
// values.schema.json, and the table names no value that does not exist.
func TestValuesDocumented(t *testing.T) {
	paths := valuePaths(t)
	var documented []string
	for _, r := range tableRows(t, "install.md", "## Values") {
		documented = append(documented, r[0])
	}
	sort.Strings(documented)
	if d := cmp.Diff(paths, documented); d != "" {
		t.Errorf("values.yaml (-) and the values table of docs/install.md (+) differ:\n%s", d)
	}
	b, err := os.ReadFile(filepath.Join(chartDir(), "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties map[string]struct {
			Properties map[string]any `json:"properties"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		top, sub, isNested := strings.Cut(p, ".")
		prop, ok := schema.Properties[top]
		if !ok {
			t.Errorf("value %s is not in values.schema.json", p)
			continue
		}
		if isNested {
			if _, ok := prop.Properties[sub]; !ok {
				t.Errorf("value %s is not in values.schema.json", p)
			}
		}
	}
}

// The migration table of docs/migration-from-nth.md is true of the chart:
// a value marked "same" is a lifeboat value; a value mapped to others, or
// unsupported (—), is refused at install time, and what it maps to exists.
func TestMigrationTable(t *testing.T) {
	lifeboat := valuePaths(t)
	isValue := func(p string) bool {
		return slices.Contains(lifeboat, p) || slices.ContainsFunc(lifeboat, func(v string) bool { return strings.HasPrefix(v, p+".") })
	}
	rows := tableRows(t, "migration-from-nth.md", "## Chart values")
	if len(rows) < 50 {
		t.Fatalf("only %d rows in the migration table", len(rows))
	}
	for _, r := range rows {
		nth, target := r[0], r[1]
		t.Run(nth, func(t *testing.T) {
			if target == "same" {
				if !isValue(nth) {
					t.Errorf("%s is marked same, but the chart has no such value", nth)
				}
				return
			}
			if isValue(nth) {
				t.Errorf("%s is a lifeboat value: mark it same", nth)
			}
			if target != "—" {
				for _, v := range strings.Split(target, ",") {
					if v = strings.Trim(strings.TrimSpace(v), "`"); !isValue(v) {
						t.Errorf("%s maps to %s, which is not a value of the chart", nth, v)
					}
				}
			}
			top, _, _ := strings.Cut(nth, ".")
			_, err := render("lb", "lifeboat", map[string]any{"queueURL": exampleQueue, top: true})
			if err == nil || !strings.Contains(err.Error(), top) {
				t.Errorf("installing with %s set: %v; want it refused by name", nth, err)
			}
		})
	}
}
