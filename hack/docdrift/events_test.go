package docdrift

import (
	"go/ast"
	"go/types"
	"regexp"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"lifeboat.dev/lifeboat/internal/drainreport"
	"lifeboat.dev/lifeboat/internal/kevents"
)

// sink is a function that records a Kubernetes Event with the reason its
// parameter reason names: client-go's and lifeboat's recorders, and every
// lifeboat function that passes its parameter on to one (report,
// reportOnce, warnAction, ...).
type sink struct {
	reason int // index of the reason parameter
	typ    int // index of the event type parameter, or -1: fixedType
	fixed  string
}

// rootSink: a recorder method, known by its parameters eventtype and
// reason (record.EventRecorder's and kube.EventRecorder's names).
func rootSink(fn *types.Func) (sink, bool) {
	s := sink{reason: -1, typ: -1}
	params := fn.Signature().Params()
	for i := range params.Len() {
		switch params.At(i).Name() {
		case "reason":
			s.reason = i
		case "eventtype":
			s.typ = i
		}
	}
	return s, s.reason >= 0 && s.typ >= 0
}

// emitted is a reason found in the code, with its Event type.
type emitted struct {
	reason, typ string
	where       string
}

// emittedReasons finds every Event reason lifeboat's code can record: the
// reason argument of each call to a sink that is a constant. A reason that
// is neither a constant nor the caller's own reason parameter is an error:
// the test could not tell what it records.
func emittedReasons(t *testing.T) []emitted {
	t.Helper()
	calls := productCalls(t)
	sinks := map[*types.Func]sink{}
	sinkOf := func(fn *types.Func) (sink, bool) {
		if fn == nil {
			return sink{}, false
		}
		if s, ok := sinks[fn]; ok {
			return s, true
		}
		return rootSink(fn)
	}
	// Functions that pass their reason parameter on are sinks too: to a
	// fixed point.
	for changed := true; changed; {
		changed = false
		for _, c := range calls {
			s, ok := sinkOf(c.callee())
			if !ok || c.fn == nil {
				continue
			}
			if _, known := sinkOf(c.fn); known {
				continue
			}
			info := c.pkg.TypesInfo
			ri := paramIndex(info, c.fn, c.expr.Args[s.reason])
			if ri < 0 {
				continue
			}
			fwd := sink{reason: ri, typ: -1, fixed: s.fixed}
			if s.typ >= 0 {
				arg := c.expr.Args[s.typ]
				if ti := paramIndex(info, c.fn, arg); ti >= 0 {
					fwd.typ = ti
				} else if v, ok := constString(info, arg); ok {
					fwd.fixed = v
				} else {
					fwd.fixed = "?"
				}
			}
			sinks[c.fn] = fwd
			changed = true
		}
	}
	var out []emitted
	for _, c := range calls {
		s, ok := sinkOf(c.callee())
		if !ok {
			continue
		}
		info := c.pkg.TypesInfo
		arg := c.expr.Args[s.reason]
		if paramIndex(info, c.fn, arg) >= 0 {
			continue // passed on: counted where the caller's caller names it
		}
		if composed(info, arg) {
			// A drain's ending: drainreport.Compose chose the reason and
			// type from its list (its own test holds the list to it).
			for _, r := range drainreport.Reasons {
				out = append(out, emitted{reason: r.Name, typ: r.Type, where: c.where()})
			}
			continue
		}
		reason, ok := constString(info, arg)
		if !ok {
			t.Errorf("%s: an Event whose reason is not a constant: give it one, so that it can be listed (internal/kevents.Reasons) and documented", c.where())
			continue
		}
		typ := s.fixed
		if s.typ >= 0 {
			if v, ok := constString(info, c.expr.Args[s.typ]); ok {
				typ = v
			} else {
				typ = "?"
			}
		}
		out = append(out, emitted{reason: reason, typ: typ, where: c.where()})
	}
	if len(sinks) < 3 || len(out) < 20 {
		t.Fatalf("found %d functions recording Events and %d Events: the scan is broken", len(sinks), len(out))
	}
	return out
}

// composed reports whether e is the Reason of a drainreport.Report.
func composed(info *types.Info, e ast.Expr) bool {
	sel, ok := ast.Unparen(e).(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Reason" {
		return false
	}
	named, ok := types.Unalias(info.TypeOf(sel.X)).(*types.Named)
	return ok && named.Obj().Name() == "Report" && named.Obj().Pkg() != nil &&
		named.Obj().Pkg().Path() == "lifeboat.dev/lifeboat/internal/drainreport"
}

// listed is internal/kevents.Reasons as "Name Type" lines, sorted.
func listed(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, r := range kevents.Reasons {
		out = append(out, r.Name+" "+r.Type)
	}
	sort.Strings(out)
	if len(out) != len(slices.Compact(slices.Clone(out))) {
		t.Errorf("internal/kevents.Reasons lists a reason twice: %v", out)
	}
	return out
}

// TestEventReasonsListed: every Event reason the code records is in
// internal/kevents.Reasons with the type it is recorded with, and every
// listed reason is recorded somewhere.
func TestEventReasonsListed(t *testing.T) {
	var found []string
	for _, e := range emittedReasons(t) {
		t.Logf("%s: %s (%s)", e.where, e.reason, e.typ)
		found = append(found, e.reason+" "+e.typ)
	}
	sort.Strings(found)
	found = slices.Compact(found)
	if d := cmp.Diff(listed(t), found); d != "" {
		t.Errorf("internal/kevents.Reasons (-) and the Events the code records (+) differ (a reason recorded with two types shows twice):\n%s", d)
	}
}

// TestEventReasonsDocumented: docs/events.md names every reason of
// internal/kevents.Reasons and no other; docs/operations.md's table has a
// row for each, with its type, and no other.
func TestEventReasonsDocumented(t *testing.T) {
	var names []string
	for _, r := range kevents.Reasons {
		names = append(names, r.Name)
	}
	sort.Strings(names)
	names = slices.Compact(names) // a reason recorded with two types is named once

	var inEvents []string
	for _, s := range codeSpans(section(t, "docs/events.md", "## Kubernetes Events on the Node")) {
		if reasonName.MatchString(s) {
			inEvents = append(inEvents, s)
		}
	}
	sort.Strings(inEvents)
	if d := cmp.Diff(names, slices.Compact(inEvents)); d != "" {
		t.Errorf("internal/kevents.Reasons (-) and docs/events.md's Kubernetes Events (+) differ:\n%s", d)
	}

	var inOperations []string
	rows := tableRows(section(t, "docs/operations.md", "## Kubernetes Events"))
	for _, row := range rows {
		if len(row) < 3 {
			t.Errorf("docs/operations.md's Events table: row %q has no type or no description", row)
			continue
		}
		for _, s := range codeSpans(row[0]) {
			inOperations = append(inOperations, s+" "+row[1])
		}
	}
	sort.Strings(inOperations)
	if d := cmp.Diff(listed(t), inOperations); d != "" {
		t.Errorf("internal/kevents.Reasons (-) and docs/operations.md's Kubernetes Events table (+) differ:\n%s", d)
	}
}

// reasonName is what an Event reason looks like (UpperCamelCase).
var reasonName = regexp.MustCompile(`^[A-Z][A-Za-z]+$`)
