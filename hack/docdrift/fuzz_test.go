package docdrift

import (
	"regexp"
	"strings"
	"testing"
)

// fuzzBudgets returns every -fuzztime budget a file sets for the fuzz
// targets: the Makefile's FUZZTIME default and any FUZZTIME= a command
// passes.
func fuzzBudgets(text string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`FUZZTIME\s*\??=\s*(\S+)`).FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestFuzzBudgetIsACount keeps CI's fuzz run on a count of inputs. With a
// duration, Go 1.26's fuzz coordinator can fail the target with its own
// deadline ("context deadline exceeded", no failing input) when a worker
// on a loaded machine misses it (go.dev/issue/75804): CI went red that way
// on 2cf0698 with `make fuzz FUZZTIME=30s`.
func TestFuzzBudgetIsACount(t *testing.T) {
	count := regexp.MustCompile(`^[0-9]+x$`)
	for _, path := range []string{"Makefile", ".ci/run", "docs/testing.md", "docs/reliability.md"} {
		text := readRepo(t, path)
		for _, b := range fuzzBudgets(text) {
			if strings.HasPrefix(b, "<") || strings.HasPrefix(b, "$(") {
				continue // a placeholder (FUZZTIME=<N>x) or the Makefile's own message
			}
			if !count.MatchString(b) {
				t.Errorf("%s sets FUZZTIME=%s; want a count of inputs like 200000x", path, b)
			}
		}
		if path == "Makefile" && len(fuzzBudgets(text)) == 0 {
			t.Error("the Makefile sets no FUZZTIME default")
		}
	}
	if !strings.Contains(readRepo(t, ".ci/run"), "make fuzz") {
		t.Error(".ci/run no longer runs make fuzz")
	}
}

func TestFuzzBudgets(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"FUZZTIME ?= 200000x\n", "200000x"},
		{"make fuzz FUZZTIME=30s\n", "30s"},
		{"make fuzz\n", ""},
	} {
		if got := strings.Join(fuzzBudgets(tc.text), ","); got != tc.want {
			t.Errorf("fuzzBudgets(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}
