package testenv

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// BuildIdleFloor builds test/bench/idlefloor (the least a Go poller does to
// read the Spot notice once a second) as the release binaries are built
// (static, stripped), into dir.
func BuildIdleFloor(ctx context.Context, dir string) (string, error) {
	return BuildRelease(ctx, Release{Pkg: "./test/bench/idlefloor", Out: filepath.Join(dir, "idlefloor")})
}

// StartIdleFloor starts the floor bin against the metadata service at
// endpoint with the chart's Go settings and the given timeout per read,
// and returns once it polls (its token fetched); it is stopped when tb
// ends, which fails if the floor wrote errors.
func StartIdleFloor(ctx context.Context, tb testing.TB, bin, endpoint, timeout string) *exec.Cmd {
	tb.Helper()
	cmd := exec.CommandContext(ctx, bin, "--endpoint", endpoint, "--interval", "1s", "--timeout", timeout)
	cmd.Env = append(os.Environ(), "GOGC=50", "GOMEMLIMIT=20MiB", "GOMAXPROCS=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting idlefloor: %v", err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if stderr.Len() > 0 {
			tb.Errorf("idlefloor wrote errors: %s", stderr.String())
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "polling" {
		tb.Fatalf("idlefloor did not start polling (%q, %v); its errors follow", line, err) // by the cleanup, after Wait
	}
	return cmd
}
