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
	"sort"
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
