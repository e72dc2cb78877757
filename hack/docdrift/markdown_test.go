package docdrift

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"lifeboat.dev/lifeboat/test/testenv"
)

// readRepo returns a file of the repository.
func readRepo(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the text under heading (a whole line, e.g. "## Logs")
// in a Markdown file, up to the next heading of the same or a higher level.
func section(t *testing.T, path, heading string) string {
	t.Helper()
	doc := readRepo(t, path)
	_, after, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q section", path, heading)
	}
	level := strings.Index(heading, " ")
	var out strings.Builder
	fenced := false
	for _, l := range strings.SplitAfter(after, "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
		}
		if n := strings.Index(l, " "); !fenced && n > 0 && n <= level && strings.Trim(l[:n], "#") == "" {
			break
		}
		out.WriteString(l)
	}
	return out.String()
}

// tableRows returns the cells of the rows of the first table in text,
// without its header and separator rows.
func tableRows(text string) [][]string {
	var rows [][]string
	inTable := false
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "|") {
			if inTable {
				break
			}
			continue
		}
		if !inTable {
			inTable = true // the header
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if strings.HasPrefix(cells[0], "---") {
			continue
		}
		rows = append(rows, cells)
	}
	return rows
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// codeSpans returns the text of the `code` spans in s.
func codeSpans(s string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}
