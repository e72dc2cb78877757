package check

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"lifeboat.dev/lifeboat/internal/check/pattern"
	"lifeboat.dev/lifeboat/internal/route"
)

// corrected is the rule's pattern with every near-miss detail-type and
// source replaced by the real one.
func corrected(ru rule) string {
	fixed := ru.text
	for _, c := range corrections(ru.p) {
		fixed = strings.ReplaceAll(fixed, jsonString(c[0]), jsonString(c[1]))
	}
	return fixed
}

func onlyIgnored(p *pattern.Pattern) bool {
	dts := p.Values("detail-type")
	if len(dts) == 0 {
		return false
	}
	for _, d := range dts {
		if !route.IsIgnored(d) {
			return false
		}
	}
	return true
}

// hints explain why a pattern matches nothing: detail-types and sources
// that AWS never sends, with the closest real one.
func hints(p *pattern.Pattern) []string {
	if p == nil {
		return nil
	}
	var out []string
	for _, c := range corrections(p) {
		out = append(out, fmt.Sprintf("%s %q is not one AWS sends; did you mean %q?", c[2], c[0], c[1]))
	}
	for _, f := range []struct {
		field string
		known []string
	}{{"detail-type", knownDetailTypes}, {"source", knownSources}} {
		for _, v := range p.Values(f.field) {
			if slices.Contains(f.known, v) || route.IsIgnored(v) {
				continue
			}
			if _, ok := closest(v, f.known); !ok {
				out = append(out, fmt.Sprintf("%s %q is not one AWS sends to lifeboat", f.field, v))
			}
		}
	}
	return out
}

// corrections returns [wrong, right, field] for every value of the pattern's
// detail-type and source that is close to, but not, a real one.
func corrections(p *pattern.Pattern) [][3]string {
	if p == nil {
		return nil
	}
	var out [][3]string
	for _, f := range []struct {
		field string
		known []string
	}{{"detail-type", knownDetailTypes}, {"source", knownSources}} {
		for _, v := range p.Values(f.field) {
			if slices.Contains(f.known, v) || route.IsIgnored(v) {
				continue
			}
			if c, ok := closest(v, f.known); ok {
				out = append(out, [3]string{v, c, f.field})
			}
		}
	}
	return out
}

// closest returns the known string nearest to s by edit distance, if it is
// near enough to be what was meant.
func closest(s string, known []string) (string, bool) {
	best, bestD := "", -1
	for _, k := range known {
		if d := levenshtein(strings.ToLower(s), strings.ToLower(k)); bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	return best, bestD >= 0 && bestD <= max(3, len(best)/3)
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
