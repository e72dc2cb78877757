package testenv

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// BuildLifeboat builds the lifeboat binary into dir with the Makefile's
// flags and returns its path. Tests run the real binary as a process so
// that it can be killed, restarted and observed like in production.
func BuildLifeboat(dir string) (string, error) {
	bin := filepath.Join(dir, "lifeboat")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/lifeboat")
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building lifeboat: %w\n%s", err, out)
	}
	return bin, nil
}
