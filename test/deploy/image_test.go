package deploy

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"lifeboat.dev/lifeboat/hack/imagebuild"
	"lifeboat.dev/lifeboat/test/testenv"
)

// goBuild is a `go build` command line, normalised for comparison.
type goBuild struct {
	Env      map[string]string // assignments before "go"
	Trimpath bool
	LDFlags  string
	Output   string
	Package  string
	Other    []string // any other flag
}

// parseGoBuild reads "K=V ... go build FLAGS PACKAGE" (already split).
func parseGoBuild(fields []string) (goBuild, error) {
	b := goBuild{Env: map[string]string{}}
	i := 0
	for ; i < len(fields) && strings.Contains(fields[i], "=") && !strings.HasPrefix(fields[i], "-"); i++ {
		k, v, _ := strings.Cut(fields[i], "=")
		b.Env[k] = v
	}
	if i+1 >= len(fields) || fields[i] != "go" || fields[i+1] != "build" {
		return b, fmt.Errorf("not a go build command: %q", fields)
	}
	for i += 2; i < len(fields); i++ {
		switch f := fields[i]; {
		case f == "-trimpath":
			b.Trimpath = true
		case f == "-ldflags" || f == "-o":
			if i+1 >= len(fields) {
				return b, fmt.Errorf("%s without a value", f)
			}
			if f == "-o" {
				b.Output = fields[i+1]
			} else {
				b.LDFlags = fields[i+1]
			}
			i++
		case f == "-tags":
			if i+1 >= len(fields) {
				return b, fmt.Errorf("%s without a value", f)
			}
			b.Other = append(b.Other, f+"="+fields[i+1])
			i++
		case strings.HasPrefix(f, "-ldflags="):
			b.LDFlags = strings.TrimPrefix(f, "-ldflags=")
		case strings.HasPrefix(f, "-"):
			b.Other = append(b.Other, f)
		default:
			if b.Package != "" {
				return b, fmt.Errorf("two packages: %s and %s", b.Package, f)
			}
			b.Package = f
		}
	}
	return b, nil
}

// shellFields splits a shell command line into words as sh would for the
// simple lines used here: quotes, and ${VAR} / $VAR from vars (an unknown
// variable is an error, not an empty string).
func shellFields(s string, vars map[string]string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			if quote == c {
				quote = 0
			} else if quote == 0 {
				quote = c
			} else {
				cur.WriteByte(c)
			}
			inWord = true
		case c == '$':
			name := ""
			if i+1 < len(s) && s[i+1] == '{' {
				end := strings.IndexByte(s[i:], '}')
				if end < 0 {
					return nil, fmt.Errorf("unclosed ${ in %q", s)
				}
				name, i = s[i+2:i+end], i+end
			} else {
				j := i + 1
				for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= '0' && s[j] <= '9') {
					j++
				}
				name, i = s[i+1:j], j-1
			}
			v, ok := vars[name]
			if !ok {
				return nil, fmt.Errorf("variable %s is not set", name)
			}
			cur.WriteString(v)
			inWord = true
		case quote == 0 && (c == ' ' || c == '\t' || c == '\n'):
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed quote in %q", s)
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}

// dockerfile is the repository's Dockerfile as instructions (continuation
// lines joined, comments dropped).
func dockerfile() ([]string, error) {
	f, err := os.Open(filepath.Join(testenv.RepoRoot(), "Dockerfile"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	var cur string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		out = append(out, cur+line)
		cur = ""
	}
	return out, sc.Err()
}

var mountOpt = regexp.MustCompile(`^--[a-z]+=\S+\s+`)

// dockerGoBuild returns the words of the Dockerfile's go build command
// that writes output (/out/lifeboat, /out/lifeboat-imds), with the build
// arguments given.
func dockerGoBuild(output string, args map[string]string) ([]string, error) {
	instrs, err := dockerfile()
	if err != nil {
		return nil, err
	}
	var found []string
	for _, in := range instrs {
		rest, ok := strings.CutPrefix(in, "RUN ")
		if !ok || !strings.Contains(rest, " go build ") || !strings.Contains(rest+" ", " -o "+output+" ") {
			continue
		}
		rest = strings.TrimSpace(rest)
		for mountOpt.MatchString(rest) {
			rest = mountOpt.ReplaceAllString(rest, "")
		}
		found = append(found, rest)
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("the Dockerfile has %d RUN instructions with go build -o %s, want 1", len(found), output)
	}
	return shellFields(found[0], args)
}

// buildWithDockerfile runs the Dockerfile's go build line (for the host's
// platform) in the repository, with the output in dir.
func buildWithDockerfile(dir, version string) (string, error) {
	return buildOutputWithDockerfile(dir, version, "/out/lifeboat")
}

// buildOutputWithDockerfile runs the Dockerfile's go build line of output
// (/out/lifeboat or /out/lifeboat-imds), with the binary in dir.
func buildOutputWithDockerfile(dir, version, output string) (string, error) {
	words, err := dockerGoBuild(output, map[string]string{"TARGETOS": runtime.GOOS, "TARGETARCH": runtime.GOARCH, "VERSION": version})
	if err != nil {
		return "", err
	}
	b, err := parseGoBuild(words)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, filepath.Base(output))
	args := []string{"build"}
	if b.Trimpath {
		args = append(args, "-trimpath")
	}
	args = append(args, b.Other...)
	args = append(args, "-ldflags", b.LDFlags, "-o", bin, b.Package)
	cmd := exec.Command("go", args...)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = os.Environ()
	for k, v := range b.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// The Dockerfile builds with the Makefile's flags, cross-compiles for the
// target platform, and ships the binary non-root on distroless; the binary
// this package tests was built by that very line.
func TestDockerfile(t *testing.T) {
	const version = "v0.0.0-imagetest"
	for _, b := range []struct{ output, target string }{
		{"/out/lifeboat", "build"},
		{"/out/lifeboat-imds", "build-imds"},
	} {
		docker, err := dockerGoBuild(b.output, map[string]string{"TARGETOS": "linux", "TARGETARCH": "arm64", "VERSION": version})
		if err != nil {
			t.Fatal(err)
		}
		db, err := parseGoBuild(docker)
		if err != nil {
			t.Fatal(err)
		}
		mb := makeGoBuild(t, b.target, version)
		if db.Env["GOOS"] != "linux" || db.Env["GOARCH"] != "arm64" {
			t.Errorf("the Dockerfile does not build %s for TARGETOS/TARGETARCH: env %v", b.output, db.Env)
		}
		delete(db.Env, "GOOS")
		delete(db.Env, "GOARCH")
		db.Output, mb.Output = "", ""
		if d := cmp.Diff(mb, db); d != "" {
			t.Errorf("the Dockerfile's go build of %s differs from make %s (-make +Dockerfile):\n%s", b.output, b.target, d)
		}
		if db.Env["CGO_ENABLED"] != "0" || !db.Trimpath || !strings.Contains(db.LDFlags, "-s -w") || !strings.Contains(db.LDFlags, "-X main.version="+version) {
			t.Errorf("go build %+v: want CGO_ENABLED=0, -trimpath, -ldflags \"-s -w -X main.version=...\"", db)
		}
	}

	// The stages: cross-compiling build stage, distroless non-root final stage.
	instrs, err := dockerfile()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build",
		"ARG TARGETOS", "ARG TARGETARCH", "ARG VERSION=dev",
		"FROM gcr.io/distroless/static-debian12:nonroot",
		"COPY --from=build /out/lifeboat /out/lifeboat-imds /usr/local/bin/",
		"USER 65532:65532",
		`ENTRYPOINT ["/usr/local/bin/lifeboat"]`,
	} {
		if !slices.Contains(instrs, want) {
			t.Errorf("the Dockerfile lacks %q", want)
		}
	}
	if last := instrs[slices.IndexFunc(instrs, func(s string) bool { return strings.HasPrefix(s, "FROM gcr.io/distroless") }):]; slices.ContainsFunc(last, func(s string) bool { return strings.HasPrefix(s, "RUN ") }) {
		t.Error("the final stage runs commands; distroless has no shell")
	}

	// The binary under test is the one that line builds: version, static,
	// stripped.
	got, err := exec.Command(lifeboatBin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("lifeboat version: %v\n%s", err, got)
	}
	if !strings.HasPrefix(string(got), "lifeboat "+binVersion+" ") {
		t.Errorf("lifeboat version printed %q, want the version given to the build (%s)", got, binVersion)
	}
	f, err := elf.Open(lifeboatBin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has a dynamic loader (PT_INTERP): not static (CGO_ENABLED=0)")
		}
	}
	if f.Section(".symtab") != nil {
		t.Error("the binary has a symbol table: not stripped (-s)")
	}

	// The build context (.dockerignore) holds what the build reads: every
	// package of the binary is under cmd/ or internal/, and none embeds a
	// test file or testdata.
	ignore, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, keep := range []string{"!go.mod", "!go.sum", "!cmd/", "!internal/"} {
		if !slices.Contains(strings.Split(string(ignore), "\n"), keep) {
			t.Errorf(".dockerignore does not keep %s", strings.TrimPrefix(keep, "!"))
		}
	}
	list := exec.Command("go", "list", "-deps", "-f", `{{if .Module}}{{if eq .Module.Path "lifeboat.dev/lifeboat"}}{{.ImportPath}}|{{join .EmbedFiles ","}}{{end}}{{end}}`, "./cmd/lifeboat")
	list.Dir = testenv.RepoRoot()
	deps, err := list.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	for _, l := range strings.Fields(string(deps)) {
		pkg, embeds, _ := strings.Cut(l, "|")
		rel := strings.TrimPrefix(pkg, "lifeboat.dev/lifeboat/")
		if !strings.HasPrefix(rel, "cmd/") && !strings.HasPrefix(rel, "internal/") {
			t.Errorf("package %s is outside the image's build context (cmd/, internal/)", pkg)
		}
		for _, e := range strings.Split(embeds, ",") {
			if strings.HasSuffix(e, "_test.go") || strings.Contains(e, "testdata/") {
				t.Errorf("package %s embeds %s, which .dockerignore leaves out", pkg, e)
			}
		}
	}
}

// makeGoBuild is the go build line of a Makefile target (make -n).
func makeGoBuild(t *testing.T, target, version string) goBuild {
	t.Helper()
	mk := exec.Command("make", "-s", "-n", target, "VERSION="+version, "GO=go", "BIN=/out")
	mk.Dir = testenv.RepoRoot()
	out, err := mk.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n %s: %v\n%s", target, err, out)
	}
	var line string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "go build") {
			line = l
		}
	}
	words, err := shellFields(line, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := parseGoBuild(words)
	if err != nil {
		t.Fatalf("make %s's build line %q: %v", target, line, err)
	}
	return b
}

// The release image (hack/imagebuild: `make image`, and the image the
// real-node tests run) builds its binaries with the Makefile's go build
// lines, as the Dockerfile does.
func TestImageBuildMatchesMakefile(t *testing.T) {
	const version = "v0.0.0-imagetest"
	targets := map[string]string{"lifeboat": "build", "lifeboat-imds": "build-imds"}
	if len(imagebuild.Binaries) != len(targets) {
		t.Fatalf("hack/imagebuild builds %d binaries, the Makefile %d", len(imagebuild.Binaries), len(targets))
	}
	for _, b := range imagebuild.Binaries {
		target, ok := targets[b.Name]
		if !ok {
			t.Errorf("hack/imagebuild builds %s, which no Makefile target builds", b.Name)
			continue
		}
		ib, err := parseGoBuild(append([]string{"CGO_ENABLED=0", "go"}, imagebuild.GoBuildArgs(b, version, "/out/"+b.Name)...))
		if err != nil {
			t.Fatal(err)
		}
		mb := makeGoBuild(t, target, version)
		if d := cmp.Diff(mb, ib); d != "" {
			t.Errorf("hack/imagebuild's go build of %s differs from make %s (-make +imagebuild):\n%s", b.Name, target, d)
		}
	}
}
