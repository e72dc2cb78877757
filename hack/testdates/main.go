// Command testdates is a lint check (make lint): it fails when a test
// could depend on the day it runs. A test that fixes an event's date
// ("2026-11-25T12:00:00Z", time.Date(2026, …)) and lets the code under
// test read the wall clock computes deadlines that pass while the calendar
// moves on: issue 22 found two controller tests that failed every run from
// 13:00 UTC on the day their fixtures were dated.
//
// It reports each test (func TestX, BenchmarkX, FuzzX) that both fixes a
// date and hands the code under test the wall clock (clock.RealClock{}),
// itself or through the package's own helper functions it calls (followed
// by name, any depth). Tests take their times from an injected clock
// instead (internal/clocktest starts one at the fixtures' date). Reading
// the wall clock to measure elapsed time is fine and not reported.
//
// A line that needs both for a reason the check cannot see says so with a
// comment holding "testdates:ok" and the reason.
//
// go vet's analysis framework would do, but this is one pass over the
// syntax trees, by name, and needs no type information.
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var dateString = regexp.MustCompile(`(19|20)\d\d-\d\d-\d\dT\d\d:\d\d`)

// funcFacts is what one function of a package's test files holds: its
// own fixed dates and wall clocks, and the package functions it calls.
type funcFacts struct {
	pos         token.Position
	date, clock string // first found, "" if none
	calls       []string
}

func main() {
	roots := os.Args[1:]
	if len(roots) == 0 {
		roots = []string{"."}
	}
	byDir := map[string]map[string]*funcFacts{}
	fset := token.NewFileSet()
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || d.Name() == "bin" || strings.HasPrefix(d.Name(), ".") && path != root) {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
			if err != nil {
				return err
			}
			dir := filepath.Dir(path)
			if byDir[dir] == nil {
				byDir[dir] = map[string]*funcFacts{}
			}
			collect(fset, f, byDir[dir])
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "testdates:", err)
			os.Exit(2)
		}
	}
	var problems []string
	for _, funcs := range byDir {
		problems = append(problems, check(funcs)...)
	}
	sort.Strings(problems)
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Printf("testdates: %d test(s) fix a date and hand the code the wall clock: take times from an injected clock (internal/clocktest)\n", len(problems))
		os.Exit(1)
	}
}

// check reports the tests among funcs that reach both a fixed date and a
// wall clock.
func check(funcs map[string]*funcFacts) []string {
	var out []string
	for name, f := range funcs {
		if !isTest(name) {
			continue
		}
		date, clock := reach(funcs, name, func(f *funcFacts) string { return f.date }), reach(funcs, name, func(f *funcFacts) string { return f.clock })
		if date != "" && clock != "" {
			out = append(out, fmt.Sprintf("%s: %s fixes a date (%s) and hands the code the wall clock (%s)", f.pos, name, date, clock))
		}
	}
	return out
}

// reach returns the first non-empty get(f) over the functions name calls,
// itself included, followed through the package by name.
func reach(funcs map[string]*funcFacts, name string, get func(*funcFacts) string) string {
	seen := map[string]bool{}
	queue := []string{name}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		f, ok := funcs[n]
		if !ok || seen[n] {
			continue
		}
		seen[n] = true
		if v := get(f); v != "" {
			return v + " in " + n
		}
		queue = append(queue, f.calls...)
	}
	return ""
}

func isTest(name string) bool {
	for _, p := range []string{"Test", "Benchmark", "Fuzz"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// collect adds f's top-level functions (and package-level variables, as
// a function named after the variable) to funcs, leaving out what lines
// marked testdates:ok hold.
func collect(fset *token.FileSet, f *ast.File, funcs map[string]*funcFacts) {
	ok := map[int]bool{}
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			if strings.Contains(c.Text, "testdates:ok") {
				ok[fset.Position(c.Pos()).Line] = true
			}
		}
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				funcs[d.Name.Name] = inspect(fset, d, ok)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				if vs, isVal := spec.(*ast.ValueSpec); isVal {
					for _, n := range vs.Names {
						funcs[n.Name] = inspect(fset, vs, ok)
					}
				}
			}
		}
	}
}

// inspect collects one declaration's facts.
func inspect(fset *token.FileSet, node ast.Node, ok map[int]bool) *funcFacts {
	ff := &funcFacts{pos: fset.Position(node.Pos())}
	set := func(dst *string, n ast.Node, what string) {
		if *dst == "" && !ok[fset.Position(n.Pos()).Line] {
			*dst = what + " at " + fset.Position(n.Pos()).String()
		}
	}
	ast.Inspect(node, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if n.Kind == token.STRING {
				if s, err := strconv.Unquote(n.Value); err == nil {
					if m := dateString.FindString(s); m != "" {
						set(&ff.date, n, strconv.Quote(m))
					}
				}
			}
		case *ast.CallExpr:
			switch fn := n.Fun.(type) {
			case *ast.Ident:
				ff.calls = append(ff.calls, fn.Name)
			case *ast.SelectorExpr:
				if isIdent(fn.X, "time") && fn.Sel.Name == "Date" && len(n.Args) > 0 {
					if lit, isLit := n.Args[0].(*ast.BasicLit); isLit && lit.Kind == token.INT {
						set(&ff.date, n, "time.Date("+lit.Value+", …)")
					}
				}
			}
		case *ast.Ident:
			// A package-level variable read (testClock, fixtures).
			ff.calls = append(ff.calls, n.Name)
		case *ast.CompositeLit:
			if sel, isSel := n.Type.(*ast.SelectorExpr); isSel && isIdent(sel.X, "clock") && sel.Sel.Name == "RealClock" {
				set(&ff.clock, n, "clock.RealClock{}")
			}
		}
		return true
	})
	return ff
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
