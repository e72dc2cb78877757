package testenv

import (
	"fmt"
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
