package testenv

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// BuildLifeboat builds the lifeboat binary into dir and returns its path.
// Tests run the real binary as a process so that it can be killed,
// restarted and observed like in production. It uses go build's default
// flags on purpose: they share the build cache with `go test`, so the suites
// pay no second compile of the dependencies (test/deploy checks the
// release flags of the Makefile and Dockerfile separately).
func BuildLifeboat(dir string) (string, error) {
	bin := filepath.Join(dir, "lifeboat")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/lifeboat")
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building lifeboat: %w\n%s", err, out)
	}
	return bin, nil
}
