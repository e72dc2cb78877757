package docdrift

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"lifeboat.dev/lifeboat/test/testenv"
)

// exampleQueue is a queue URL the chart accepts.
const exampleQueue = "https://sqs.us-east-1.amazonaws.com/123456789012/lifeboat"

// chartGrants returns every "resource verb" the chart's ClusterRoles and
// Roles grant, over the renders that between them grant everything: queue
// mode with its defaults, with forceDeleteAtDeadline, with
// deleteGhostNodes, with terminatingCondition, with replacementFirst and
// with planWithKubeletShutdown, with the failover journal, IMDS mode.
func chartGrants(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, values := range []map[string]any{
		{"queueURL": exampleQueue},
		{"queueURL": exampleQueue, "forceDeleteAtDeadline": true},
		{"queueURL": exampleQueue, "deleteGhostNodes": true},
		{"queueURL": exampleQueue, "terminatingCondition": true},
		{"queueURL": exampleQueue, "replacementFirst": true},
		{"queueURL": exampleQueue, "planWithKubeletShutdown": true},
		{"queueURL": exampleQueue, "leaderElection": map[string]any{"failoverJournal": true}},
		{"mode": "imds"},
	} {
		r, err := testenv.RenderChart("lifeboat", "kube-system", values)
		if err != nil {
			t.Fatalf("rendering with %v: %v", values, err)
		}
		for _, o := range r.Objects {
			if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
				continue
			}
			rules, _, err := unstructured.NestedSlice(o.Object, "rules")
			if err != nil {
				t.Fatal(err)
			}
			for _, rule := range rules {
				m, _ := rule.(map[string]any)
				resources, _, _ := unstructured.NestedStringSlice(m, "resources")
				verbs, _, _ := unstructured.NestedStringSlice(m, "verbs")
				for _, res := range resources {
					for _, v := range verbs {
						out = append(out, res+" "+v)
					}
				}
			}
		}
	}
	sort.Strings(out)
	out = slices.Compact(out)
	if len(out) < 10 {
		t.Fatalf("the chart grants only %v", out)
	}
	return out
}

// TestRBACDocumented: docs/install.md's permissions table ("exactly what
// lifeboat uses") names every resource and verb the chart's roles grant,
// and nothing else.
func TestRBACDocumented(t *testing.T) {
	var documented []string
	for _, row := range tableRows(section(t, "docs/install.md", "### Permissions (RBAC)")) {
		if len(row) < 3 {
			t.Errorf("docs/install.md's permissions table: row %q has no verbs or no reason", row)
			continue
		}
		resource, _, _ := strings.Cut(strings.Trim(row[0], "`"), " ")
		for _, v := range strings.FieldsFunc(row[1], func(r rune) bool { return r == ',' || r == ';' }) {
			documented = append(documented, resource+" "+strings.Trim(strings.TrimSpace(v), "`"))
		}
	}
	sort.Strings(documented)
	if d := cmp.Diff(chartGrants(t), slices.Compact(documented)); d != "" {
		t.Errorf("the chart's RBAC (-) and docs/install.md's permissions table (+) differ:\n%s", d)
	}
}
