// Package pattern evaluates Amazon EventBridge event patterns against
// events, so that `lifeboat check` can say whether a rule matches a real
// event of each kind instead of comparing strings.
//
// It implements the content filters EventBridge documents: exact values
// (strings, numbers compared numerically, booleans, null), prefix, suffix,
// equals-ignore-case, wildcard, anything-but (values, prefix, suffix,
// equals-ignore-case, wildcard), numeric ranges, exists, cidr and $or, with
// EventBridge's flattening of arrays. It is pure: no I/O, no AWS calls.
package pattern

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sort"
	"strings"
)

// Pattern is a parsed event pattern.
type Pattern struct {
	root object
}

// object is a pattern object: every condition must hold.
type object struct {
	fields []field
	ors    [][]object // each $or: one of the alternatives must hold
}

type field struct {
	name     string
	sub      *object   // nested object
	matchers []matcher // leaf: one must match one value
}

// Parse parses an event pattern (the JSON of a rule's EventPattern).
func Parse(raw []byte) (*Pattern, error) {
	v, err := decode(raw)
	if err != nil {
		return nil, fmt.Errorf("event pattern is not JSON: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("event pattern must be a JSON object")
	}
	if len(m) == 0 {
		return nil, errors.New("event pattern is empty")
	}
	o, err := parseObject(m, "")
	if err != nil {
		return nil, err
	}
	return &Pattern{root: o}, nil
}

// Match reports whether the event (a JSON object) matches the pattern.
func (p *Pattern) Match(event []byte) (bool, error) {
	v, err := decode(event)
	if err != nil {
		return false, fmt.Errorf("event is not JSON: %w", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return false, errors.New("event must be a JSON object")
	}
	return p.root.match([]any{v}), nil
}

// Values returns the exact string values the pattern requires at a
// top-level field, such as "detail-type" or "source" (nil when the field is
// not constrained by exact strings). It is meant for hints, not matching.
func (p *Pattern) Values(name string) []string {
	var out []string
	for _, f := range p.root.fields {
		if f.name != name {
			continue
		}
		for _, m := range f.matchers {
			if m.op == opExact {
				if s, ok := m.value.(string); ok {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

func decode(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

func parseObject(m map[string]any, path string) (object, error) {
	var o object
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := joinPath(path, k)
		switch v := m[k].(type) {
		case map[string]any:
			if len(v) == 0 {
				return o, fmt.Errorf("%s: empty object", p)
			}
			sub, err := parseObject(v, p)
			if err != nil {
				return o, err
			}
			o.fields = append(o.fields, field{name: k, sub: &sub})
		case []any:
			if k == "$or" {
				alts, err := parseOr(v, p)
				if err != nil {
					return o, err
				}
				o.ors = append(o.ors, alts)
				continue
			}
			ms, err := parseMatchers(v, p)
			if err != nil {
				return o, err
			}
			o.fields = append(o.fields, field{name: k, matchers: ms})
		default:
			return o, fmt.Errorf("%s: must be an array of values or an object, not %s", p, jsonKind(v))
		}
	}
	return o, nil
}

func parseOr(v []any, path string) ([]object, error) {
	if len(v) < 2 {
		return nil, fmt.Errorf("%s: needs at least two alternatives", path)
	}
	var alts []object
	for i, a := range v {
		m, ok := a.(map[string]any)
		if !ok || len(m) == 0 {
			return nil, fmt.Errorf("%s[%d]: must be a non-empty object", path, i)
		}
		o, err := parseObject(m, path)
		if err != nil {
			return nil, err
		}
		alts = append(alts, o)
	}
	return alts, nil
}

func joinPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	default:
		return "an object"
	}
}

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
