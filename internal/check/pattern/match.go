package pattern

import (
	"encoding/json"
	"math"
	"net/netip"
	"slices"
	"strings"
)

// match reports whether the object pattern holds for values, the event
// values at the object's path (arrays already flattened).
func (o object) match(values []any) bool {
	for _, f := range o.fields {
		child := children(values, f.name)
		if f.sub != nil {
			if !f.sub.match(child) {
				return false
			}
			continue
		}
		if !matchLeaf(f.matchers, child) {
			return false
		}
	}
	for _, alts := range o.ors {
		if !slices.ContainsFunc(alts, func(a object) bool { return a.match(values) }) {
			return false
		}
	}
	return true
}

// children returns the values of key in every object of values, with
// arrays flattened, as EventBridge does.
func children(values []any, key string) []any {
	var out []any
	for _, v := range values {
		if m, ok := v.(map[string]any); ok {
			if c, present := m[key]; present {
				out = flatten(out, c)
			}
		}
	}
	return out
}

func flatten(out []any, v any) []any {
	if a, ok := v.([]any); ok {
		for _, e := range a {
			out = flatten(out, e)
		}
		return out
	}
	return append(out, v)
}

func matchLeaf(ms []matcher, values []any) bool {
	var leaves []any
	for _, v := range values {
		if _, isObject := v.(map[string]any); !isObject {
			leaves = append(leaves, v)
		}
	}
	for _, m := range ms {
		if m.op == opExists {
			if m.exists == (len(leaves) > 0) {
				return true
			}
			continue
		}
		for _, v := range leaves {
			if m.match(v) {
				return true
			}
		}
	}
	return false
}

func (m matcher) match(v any) bool {
	switch m.op {
	case opExact:
		return equal(m.value, v)
	case opPrefix, opSuffix:
		s, ok := v.(string)
		if !ok {
			return false
		}
		p := m.s
		if m.fold {
			s, p = strings.ToLower(s), strings.ToLower(p)
		}
		if m.op == opPrefix {
			return strings.HasPrefix(s, p)
		}
		return strings.HasSuffix(s, p)
	case opEqualsIgnoreCase:
		s, ok := v.(string)
		return ok && strings.EqualFold(s, m.s)
	case opWildcard:
		s, ok := v.(string)
		return ok && wildcard(m.s, s)
	case opAnythingBut:
		for _, n := range m.not {
			if n.match(v) {
				return false
			}
		}
		return true
	case opNumeric:
		f, ok := number(v)
		if !ok {
			return false
		}
		for _, c := range m.ranges {
			if !compare(f, c) {
				return false
			}
		}
		return true
	case opCIDR:
		s, ok := v.(string)
		if !ok {
			return false
		}
		a, err := netip.ParseAddr(s)
		return err == nil && m.prefix.Contains(a)
	}
	return false
}

func number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil && !math.IsNaN(f)
}

func equal(lit, v any) bool {
	switch l := lit.(type) {
	case nil:
		return v == nil
	case string:
		s, ok := v.(string)
		return ok && s == l
	case bool:
		b, ok := v.(bool)
		return ok && b == l
	case float64:
		f, ok := number(v)
		return ok && f == l
	}
	return false
}

func compare(f float64, c comparison) bool {
	switch c.op {
	case "=":
		return f == c.n
	case "<":
		return f < c.n
	case "<=":
		return f <= c.n
	case ">":
		return f > c.n
	case ">=":
		return f >= c.n
	}
	return false
}

// wildcard matches s against p, where * matches any run of characters and
// \* and \\ stand for a literal * and \.
func wildcard(p, s string) bool {
	type tok struct {
		star bool
		c    byte
	}
	var toks []tok
	for i := 0; i < len(p); i++ {
		switch {
		case p[i] == '\\' && i+1 < len(p):
			i++
			toks = append(toks, tok{c: p[i]})
		case p[i] == '*':
			toks = append(toks, tok{star: true})
		default:
			toks = append(toks, tok{c: p[i]})
		}
	}
	// Classic greedy matching with backtracking to the last star.
	ti, si, starT, starS := 0, 0, -1, 0
	for si < len(s) {
		switch {
		case ti < len(toks) && !toks[ti].star && toks[ti].c == s[si]:
			ti++
			si++
		case ti < len(toks) && toks[ti].star:
			starT, starS = ti, si
			ti++
		case starT >= 0:
			starS++
			ti, si = starT+1, starS
		default:
			return false
		}
	}
	for ti < len(toks) && toks[ti].star {
		ti++
	}
	return ti == len(toks)
}
