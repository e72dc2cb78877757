package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildLifeboat builds the lifeboat binary into dir and returns its path.
// Tests run the real binary as a process so that it can be killed,
// restarted and observed like in production. It uses go build's default
// flags on purpose: they share the build cache with `go test`, so the suites
// pay no second compile of the dependencies (test/deploy checks the
// release flags of the Makefile and Dockerfile separately).
//
// Tags select a build: BuildLifeboat(dir, "imdsonly") is lifeboat-imds, the
// DaemonSet's binary.
func BuildLifeboat(dir string, tags ...string) (string, error) {
	bin := filepath.Join(dir, "lifeboat")
	args := []string{"build", "-o", bin}
	if len(tags) > 0 {
		bin += "-" + strings.Join(tags, "-")
		args = []string{"build", "-tags", strings.Join(tags, ","), "-o", bin}
	}
	cmd := exec.Command("go", append(args, "./cmd/lifeboat")...)
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building lifeboat %v: %w\n%s", tags, err, out)
	}
	return bin, nil
}

// Release is a build as the Makefile's release targets make one: static
// (CGO_ENABLED=0), stripped (-s -w), without local paths (-trimpath). The
// benchmarks that weigh a binary's memory or CPU run these, not
// BuildLifeboat's debug builds.
type Release struct {
	// Dir is the module to build in; "": this repository.
	Dir string
	// Pkg is what to build, e.g. "./cmd/lifeboat".
	Pkg string
	// Out is the binary's path.
	Out string
	// Tags are build tags; Version, if set, is main.version.
	Tags    []string
	Version string
	// Env is added to the build's environment (GOFLAGS=-mod=mod).
	Env []string
}

// BuildRelease builds r and returns r.Out.
func BuildRelease(ctx context.Context, r Release) (string, error) {
	ldflags := "-s -w"
	if r.Version != "" {
		ldflags += " -X main.version=" + r.Version
	}
	args := []string{"build", "-trimpath", "-ldflags", ldflags, "-o", r.Out}
	if len(r.Tags) > 0 {
		args = append(args, "-tags", strings.Join(r.Tags, ","))
	}
	cmd := exec.CommandContext(ctx, "go", append(args, r.Pkg)...)
	cmd.Dir = r.Dir
	if cmd.Dir == "" {
		cmd.Dir = RepoRoot()
	}
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0"), r.Env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s in %s: %w\n%s", r.Pkg, cmd.Dir, err, out)
	}
	return r.Out, nil
}
