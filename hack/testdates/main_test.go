package main

import (
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

func problems(t *testing.T, files map[string]string) []string {
	t.Helper()
	fset := token.NewFileSet()
	funcs := map[string]*funcFacts{}
	for name, src := range files {
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		collect(fset, f, funcs)
	}
	return check(funcs)
}

func TestCheck(t *testing.T) {
	const helpers = `package p
func body() []byte { return []byte(` + "`" + `{"time":"2026-11-25T12:00:00Z"}` + "`" + `) }
func start() *C { return New(clock.RealClock{}) }
`
	for _, tc := range []struct {
		name string
		test string
		want string // "" means no report
	}{
		{"the controller's bomb: date and wall clock through helpers in another file",
			`package p
func TestBomb(t *testing.T) { c := start(); c.Submit(body()) }`, "TestBomb fixes a date"},
		{"a time.Date fixture with a real clock in the test itself",
			`package p
func TestBomb(t *testing.T) { New(clock.RealClock{}).Do(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)) }`, "TestBomb fixes a date (time.Date(2026"},
		{"an injected clock",
			`package p
func TestFine(t *testing.T) { New(clocktest.AtEpoch()).Submit(body()) }`, ""},
		{"wall clock only to measure elapsed time",
			`package p
func TestFine(t *testing.T) { s := time.Now(); New(clocktest.AtEpoch()).Submit(body()); _ = time.Since(s) }`, ""},
		{"a wall clock without a date",
			`package p
func TestFine(t *testing.T) { start().Run() }`, ""},
		{"marked with a reason",
			`package p
func TestFine(t *testing.T) { New(clock.RealClock{}).Parse("2026-11-25T12:00:00Z") } // testdates:ok parsing only, no deadline`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := problems(t, map[string]string{"helpers_test.go": helpers, "x_test.go": tc.test})
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("reported %q, want nothing", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Errorf("reported %q, want one report containing %q", got, tc.want)
			}
		})
	}
}
