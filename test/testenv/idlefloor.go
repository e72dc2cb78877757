package testenv

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat.dev/lifeboat/hack/imagebuild"
)

// DaemonSetGoEnv is the Go runtime settings the chart gives the IMDS-mode
// DaemonSet at its defaults (values.yaml daemonsetGoGC, daemonsetGoMemLimit,
// daemonsetGoMaxProcs; test/deploy holds the chart to them), for the
// processes the benchmarks run as that DaemonSet would.
var DaemonSetGoEnv = []string{"GOGC=50", "GOMEMLIMIT=20MiB", "GOMAXPROCS=1"}

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
	cmd.Env = append(os.Environ(), DaemonSetGoEnv...)
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

// IdleFloorImage is the floor's image (IdleFloorImageArchive): /idlefloor,
// run as user 65532 as lifeboat's image is.
const IdleFloorImage = "lifeboat.test/idlefloor:1"

// IdleFloorImageArchive packs the floor bin (BuildIdleFloor's) into an
// image of its own, into dir, and returns the path of its archive for
// RealNode.ImportImage: the same binary run as a pod, to hold a
// DaemonSet's pod against on a real node.
func IdleFloorImageArchive(dir, bin string) (string, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	return writeImage(dir, ImageSpec{Ref: IdleFloorImage, Files: []imagebuild.File{{Path: "/idlefloor", Mode: 0o755, Data: data}},
		Entrypoint: []string{"/idlefloor"}, User: "65532"})
}
