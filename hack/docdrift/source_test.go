package docdrift

import (
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/types/typeutil"

	"lifeboat.dev/lifeboat/test/testenv"
)

// productPackages are lifeboat's own packages, type-checked, without their
// tests: what the binaries are built from. Both builds are loaded: the full
// one, and the IMDS-only one with the pprof files, whose files only
// cmd/lifeboat has.
var productPackages = sync.OnceValues(func() ([]*packages.Package, error) {
	mode := packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo
	var out []*packages.Package
	for _, load := range []struct {
		tags     string
		patterns []string
	}{
		{"", []string{"./internal/...", "./cmd/..."}},
		{"-tags=imdsonly,pprof", []string{"./cmd/..."}},
	} {
		cfg := &packages.Config{Mode: mode, Dir: testenv.RepoRoot()}
		if load.tags != "" {
			cfg.BuildFlags = []string{load.tags}
		}
		pkgs, err := packages.Load(cfg, load.patterns...)
		if err != nil {
			return nil, err
		}
		out = append(out, pkgs...)
	}
	return out, nil
})

// loadProduct returns productPackages, failing the test on a load or type
// error (a scan of code that does not compile would miss calls).
func loadProduct(t *testing.T) []*packages.Package {
	t.Helper()
	pkgs, err := productPackages()
	if err != nil {
		t.Fatalf("loading lifeboat's packages: %v", err)
	}
	if packages.PrintErrors(pkgs) > 0 {
		t.Fatal("lifeboat's packages have errors (above)")
	}
	if len(pkgs) < 20 {
		t.Fatalf("only %d packages loaded", len(pkgs))
	}
	return pkgs
}

// call is one call expression of product code, with the function it is in.
type call struct {
	pkg  *packages.Package
	fn   *types.Func // the enclosing function declaration
	expr *ast.CallExpr
}

// where is the call's position relative to the repository.
func (c call) where() string {
	p := c.pkg.Fset.Position(c.expr.Pos())
	if rel, err := filepath.Rel(testenv.RepoRoot(), p.Filename); err == nil {
		p.Filename = rel
	}
	return p.String()
}

// callee is the function or method a call calls (generic ones as
// declared), or nil (a conversion, a builtin, a function value).
func (c call) callee() *types.Func {
	fn, _ := typeutil.Callee(c.pkg.TypesInfo, c.expr).(*types.Func)
	if fn == nil {
		return nil
	}
	return fn.Origin()
}

// productCalls returns every call in product code, each once (a package
// loaded in both builds is scanned once per file).
func productCalls(t *testing.T) []call {
	t.Helper()
	var out []call
	seen := map[token.Position]bool{}
	for _, pkg := range loadProduct(t) {
		for _, f := range pkg.Syntax {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				fn, _ := pkg.TypesInfo.Defs[fd.Name].(*types.Func)
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					ce, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					pos := pkg.Fset.Position(ce.Pos())
					if !seen[pos] {
						seen[pos] = true
						out = append(out, call{pkg: pkg, fn: fn, expr: ce})
					}
					return true
				})
			}
		}
	}
	if len(out) < 1000 {
		t.Fatalf("only %d calls found in lifeboat's code", len(out))
	}
	return out
}

// paramIndex returns the index of the parameter of fn that the expression
// e names, or -1.
func paramIndex(info *types.Info, fn *types.Func, e ast.Expr) int {
	id, ok := ast.Unparen(e).(*ast.Ident)
	if !ok || fn == nil {
		return -1
	}
	v := info.Uses[id]
	params := fn.Signature().Params()
	for i := range params.Len() {
		if params.At(i) == v {
			return i
		}
	}
	return -1
}

// constString returns the value of a constant string expression.
func constString(info *types.Info, e ast.Expr) (string, bool) {
	tv, ok := info.Types[e]
	if !ok || tv.Value == nil || tv.Value.Kind() != constant.String {
		return "", false
	}
	return constant.StringVal(tv.Value), true
}
