package pattern

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
)

type op int

const (
	opExact op = iota
	opPrefix
	opSuffix
	opEqualsIgnoreCase
	opWildcard
	opAnythingBut
	opNumeric
	opExists
	opCIDR
)

type matcher struct {
	op op
	// value is the literal of opExact (string, float64, bool or nil).
	value any
	// s is the string operand of prefix, suffix, equals-ignore-case, wildcard.
	s string
	// fold makes prefix and suffix case-insensitive.
	fold bool
	// not holds the excluded values or the matcher of anything-but.
	not []matcher
	// ranges are numeric comparisons, all of which must hold.
	ranges []comparison
	exists bool
	prefix netip.Prefix
}

type comparison struct {
	op string
	n  float64
}

func parseMatchers(v []any, path string) ([]matcher, error) {
	ms := make([]matcher, 0, len(v))
	for i, e := range v {
		m, err := parseMatcher(e, fmt.Sprintf("%s[%d]", path, i))
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

func literal(e any, path string) (any, error) {
	switch x := e.(type) {
	case nil, string, bool:
		return x, nil
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("%s: bad number %s", path, x)
		}
		return f, nil
	}
	return nil, fmt.Errorf("%s: must be a value, not %s", path, jsonKind(e))
}

func parseMatcher(e any, path string) (matcher, error) {
	obj, ok := e.(map[string]any)
	if !ok {
		l, err := literal(e, path)
		return matcher{op: opExact, value: l}, err
	}
	if len(obj) != 1 {
		return matcher{}, fmt.Errorf("%s: a filter object has exactly one key", path)
	}
	var k string
	var arg any
	for k, arg = range obj {
	}
	switch k {
	case "prefix", "suffix":
		o := opPrefix
		if k == "suffix" {
			o = opSuffix
		}
		if s, ok := arg.(string); ok {
			return matcher{op: o, s: s}, nil
		}
		if m, ok := arg.(map[string]any); ok && len(m) == 1 {
			if s, ok := m["equals-ignore-case"].(string); ok {
				return matcher{op: o, s: s, fold: true}, nil
			}
		}
		return matcher{}, fmt.Errorf("%s: %s needs a string", path, k)
	case "equals-ignore-case":
		s, ok := arg.(string)
		if !ok {
			return matcher{}, fmt.Errorf("%s: equals-ignore-case needs a string", path)
		}
		return matcher{op: opEqualsIgnoreCase, s: s}, nil
	case "wildcard":
		s, ok := arg.(string)
		if !ok {
			return matcher{}, fmt.Errorf("%s: wildcard needs a string", path)
		}
		return matcher{op: opWildcard, s: s}, nil
	case "exists":
		b, ok := arg.(bool)
		if !ok {
			return matcher{}, fmt.Errorf("%s: exists needs true or false", path)
		}
		return matcher{op: opExists, exists: b}, nil
	case "anything-but":
		return parseAnythingBut(arg, path)
	case "numeric":
		return parseNumeric(arg, path)
	case "cidr":
		s, ok := arg.(string)
		if !ok {
			return matcher{}, fmt.Errorf("%s: cidr needs a string", path)
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return matcher{}, fmt.Errorf("%s: cidr %q: %w", path, s, err)
		}
		return matcher{op: opCIDR, prefix: p.Masked()}, nil
	default:
		return matcher{}, fmt.Errorf("%s: unknown filter %q", path, k)
	}
}

func parseAnythingBut(arg any, path string) (matcher, error) {
	m := matcher{op: opAnythingBut}
	switch x := arg.(type) {
	case []any:
		if len(x) == 0 {
			return m, fmt.Errorf("%s: anything-but needs values", path)
		}
		for i, e := range x {
			l, err := literal(e, fmt.Sprintf("%s.anything-but[%d]", path, i))
			if err != nil {
				return m, err
			}
			m.not = append(m.not, matcher{op: opExact, value: l})
		}
	case map[string]any:
		inner, err := parseMatcher(x, path+".anything-but")
		if err != nil {
			return m, err
		}
		switch inner.op {
		case opPrefix, opSuffix, opEqualsIgnoreCase, opWildcard:
		default:
			return m, fmt.Errorf("%s: anything-but takes values, prefix, suffix, equals-ignore-case or wildcard", path)
		}
		m.not = []matcher{inner}
	default:
		l, err := literal(x, path+".anything-but")
		if err != nil {
			return m, err
		}
		m.not = []matcher{{op: opExact, value: l}}
	}
	return m, nil
}

func parseNumeric(arg any, path string) (matcher, error) {
	m := matcher{op: opNumeric}
	a, ok := arg.([]any)
	if !ok || len(a) == 0 || len(a)%2 != 0 || len(a) > 4 {
		return m, fmt.Errorf("%s: numeric needs one or two [operator, number] pairs", path)
	}
	for i := 0; i < len(a); i += 2 {
		o, ok := a[i].(string)
		if !ok || !slices.Contains([]string{"=", "<", "<=", ">", ">="}, o) {
			return m, fmt.Errorf("%s: numeric operator %v", path, a[i])
		}
		n, ok := a[i+1].(json.Number)
		if !ok {
			return m, fmt.Errorf("%s: numeric operand %v is not a number", path, a[i+1])
		}
		f, err := n.Float64()
		if err != nil {
			return m, fmt.Errorf("%s: numeric operand %s: %w", path, n, err)
		}
		m.ranges = append(m.ranges, comparison{o, f})
	}
	return m, nil
}
