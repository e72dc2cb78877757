package docdrift

import (
	"encoding/json"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"lifeboat.dev/lifeboat/test/testenv"
)

// refusedMark begins the schema description of every value of
// aws-node-termination-handler's chart that lifeboat's chart refuses.
const refusedMark = "aws-node-termination-handler value the chart refuses"

// schemaRefused returns the values values.schema.json marks refused, as
// dotted paths (rbac.pspEnabled).
func schemaRefused(t *testing.T) []string {
	t.Helper()
	type property struct {
		Description string
		Properties  map[string]json.RawMessage
	}
	var schema property
	if err := json.Unmarshal([]byte(readRepo(t, "deploy/helm/lifeboat/values.schema.json")), &schema); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(prefix string, props map[string]json.RawMessage)
	walk = func(prefix string, props map[string]json.RawMessage) {
		for name, raw := range props {
			var p property
			if err := json.Unmarshal(raw, &p); err != nil {
				continue // a boolean schema
			}
			if strings.HasPrefix(p.Description, refusedMark) {
				out = append(out, prefix+name)
			}
			walk(prefix+name+".", p.Properties)
		}
	}
	walk("", schema.Properties)
	sort.Strings(out)
	return out
}

// nthRow is a row of docs/migration-from-nth.md's chart values table.
type nthRow struct {
	name, target, note string
}

var (
	seeLink = regexp.MustCompile(` ?\(\[[^\]]*\]\([^)]*\)\)`) // " ([below](#x))"
	link    = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	asValue = regexp.MustCompile("^as `([^`]+)`$")
)

// plain is Markdown as the chart's messages write it: no code spans, link
// texts only, no "(see ...)" links.
func plain(s string) string {
	s = seeLink.ReplaceAllString(s, "")
	s = link.ReplaceAllString(s, "$1")
	return strings.ReplaceAll(s, "`", "")
}

// migrationRows reads the chart values table, with each note that says
// "as above" (the row before) or "as `value`" spelled out.
func migrationRows(t *testing.T) []nthRow {
	t.Helper()
	var rows []nthRow
	notes := map[string]string{}
	for _, cells := range tableRows(section(t, "docs/migration-from-nth.md", "## Chart values")) {
		if len(cells) < 3 {
			t.Fatalf("docs/migration-from-nth.md: row %q has no target or note", cells)
		}
		r := nthRow{name: strings.Trim(cells[0], "`"), target: cells[1], note: cells[2]}
		if r.note == "as above" && len(rows) > 0 {
			r.note = rows[len(rows)-1].note
		}
		if m := asValue.FindStringSubmatch(r.note); m != nil {
			n, ok := notes[m[1]]
			if !ok {
				t.Errorf("docs/migration-from-nth.md: %s is noted as %s, which has no row above it", r.name, m[1])
			}
			r.note = n
		}
		notes[r.name] = r.note
		rows = append(rows, r)
	}
	if len(rows) < 50 {
		t.Fatalf("only %d rows in docs/migration-from-nth.md's chart values table", len(rows))
	}
	return rows
}

// refusal is the line the chart prints for a refused value: the value,
// the note of the migration table, and the values to use instead.
func (r nthRow) refusal() string {
	s := r.name + ": " + plain(r.note)
	if r.target != "—" {
		s += "; use " + plain(r.target) + " instead"
	}
	return s
}

// withValue returns values with the dotted path set to v.
func withValue(values map[string]any, path string, v any) map[string]any {
	top, sub, nested := strings.Cut(path, ".")
	if !nested {
		values[top] = v
		return values
	}
	m, _ := values[top].(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	values[top] = withValue(m, sub, v)
	return values
}

// TestNTHValuesRefusedAsDocumented: the values of aws-node-termination-
// handler's chart that docs/migration-from-nth.md maps elsewhere or marks
// unsupported are exactly those values.schema.json marks refused; each is
// refused by `helm install` (the chart rendered with the Helm SDK, values
// validated against the schema) with one line naming the value, the
// migration table's note and what to use instead; several are refused in
// one message.
func TestNTHValuesRefusedAsDocumented(t *testing.T) {
	var documented []nthRow
	var names []string
	for _, r := range migrationRows(t) {
		if r.target != "same" {
			documented = append(documented, r)
			names = append(names, r.name)
		}
	}
	sort.Strings(names)
	if d := cmp.Diff(names, schemaRefused(t)); d != "" {
		t.Errorf("values docs/migration-from-nth.md says the chart refuses (-) and values values.schema.json marks %q (+) differ:\n%s", refusedMark, d)
	}
	all := map[string]any{"queueURL": exampleQueue}
	for _, r := range documented {
		t.Run(r.name, func(t *testing.T) {
			_, err := testenv.RenderChart("lifeboat", "kube-system", withValue(map[string]any{"queueURL": exampleQueue}, r.name, true))
			if err == nil {
				t.Fatalf("%s=true installs; want it refused", r.name)
			}
			if !strings.Contains(err.Error(), r.refusal()) {
				t.Errorf("%s=true is refused with\n%v\nwant a line\n%s", r.name, err, r.refusal())
			}
		})
		all = withValue(all, r.name, true)
	}
	_, err := testenv.RenderChart("lifeboat", "kube-system", all)
	for _, r := range documented {
		if err == nil || !strings.Contains(err.Error(), r.refusal()) {
			t.Errorf("with every refused value set, the error does not name %s: %v", r.name, err)
		}
	}
	if !slices.ContainsFunc(documented, func(r nthRow) bool { return strings.Contains(r.name, ".") }) {
		t.Error("no nested value (rbac.pspEnabled) among the refused ones: the nested path is untested")
	}
}
