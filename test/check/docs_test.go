package check

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"lifeboat.dev/lifeboat/test/testenv"
)

var (
	// testNamespace is a namespace kube.Namespace made for a test:
	// t-<test name>-<5 random characters>.
	testNamespace = regexp.MustCompile(`\bt-[a-z0-9-]+-[a-z0-9]{5}\b`)
	localURL      = regexp.MustCompile(`https://127\.0\.0\.1:[0-9]+`)
)

// normalized are the lines of check's table output with what changes from
// run to run (test namespaces, the API server's port) replaced.
func normalized(out string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		l = testNamespace.ReplaceAllString(l, "t-NAMESPACE")
		l = localURL.ReplaceAllString(l, "https://127.0.0.1:PORT")
		lines = append(lines, strings.TrimRight(l, " "))
	}
	return lines
}

// checkDocSample holds the first fenced block after the headings (each
// found after the one before) in a doc, which shows "real output" of
// lifeboat check, to out (this run's table): every line of the sample is a
// line of out, and a sample that leaves nothing out (no "…" line) has
// every line of out. Test namespaces and the API server's port may differ.
func checkDocSample(t *testing.T, doc, out string, headings ...string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), doc))
	if err != nil {
		t.Fatal(err)
	}
	after := string(b)
	for _, h := range headings {
		var ok bool
		if _, after, ok = strings.Cut(after, "\n"+h+"\n"); !ok {
			t.Fatalf("%s has no %q section (under %q)", doc, h, headings)
		}
	}
	heading := strings.Join(headings, " ")
	_, block, ok := strings.Cut(after, "\n```")
	if !ok {
		t.Fatalf("%s %q has no code block", doc, heading)
	}
	_, block, _ = strings.Cut(block, "\n") // the fence's info string
	block, _, _ = strings.Cut(block, "\n```")
	sample := normalized(block)
	got := normalized(out)
	partial := slices.Contains(sample, "…")
	var missing []string
	for _, l := range sample {
		if l != "…" && !slices.Contains(got, l) {
			missing = append(missing, l)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s %q shows lines lifeboat check no longer prints (update the sample from this run's output, logged above):\n%s", doc, heading, strings.Join(missing, "\n"))
	}
	if !partial {
		if d := cmp.Diff(sample, got); d != "" {
			t.Errorf("%s %q (-) is not lifeboat check's output (+):\n%s", doc, heading, d)
		}
	}
}
