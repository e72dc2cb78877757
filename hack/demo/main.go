// Command demo is `make demo`: it starts the testbed on this machine (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok from
// bin/, moto for SQS/EC2/EventBridge, the Auto Scaling simulator), runs the
// real lifeboat binary in queue mode against it, and plays three scenes: a
// Spot interruption, a scale-in with a long pod shutdown, and a warm-pool
// instance joining. It prints a live timeline of what the cluster and the
// simulator show, writes an HTML timeline, and stops everything it started.
//
// It is a demonstration built on the test infrastructure (test/testenv,
// test/awssim); nothing may import it, and it must never reach a real cloud
// account or cluster.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"lifeboat.dev/lifeboat/test/testenv"
)

// config is one run's settings. Times are scaled: AWS's smallest hook
// heartbeat timeout is 30 s and real pods may need hours to stop.
type config struct {
	// OutDir receives the HTML timeline and lifeboat's JSON log.
	OutDir string
	// Lifeboat is the binary to run; empty builds it into the temporary
	// directory.
	Lifeboat string
	// HookTimeout is the heartbeat timeout of both lifecycle hooks.
	HookTimeout time.Duration
	// PodShutdown is how long the scale-in scene's pod takes to stop.
	PodShutdown time.Duration
	// BootDelay is how long the warm-pool instance takes to become a node.
	BootDelay time.Duration
	// Keep keeps the temporary directory (component logs) for debugging.
	Keep bool
	// Color writes ANSI colors to the terminal.
	Color bool
}

func defaultConfig() config {
	return config{
		OutDir:      filepath.Join(testenv.RepoRoot(), "out"),
		HookTimeout: 3 * time.Second,
		PodShutdown: 12 * time.Second,
		BootDelay:   5 * time.Second,
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := runMain(ctx, os.Args[1:], os.Stdout)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, errInterrupted):
		fmt.Fprintln(os.Stderr, "demo: interrupted")
		os.Exit(130)
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func runMain(ctx context.Context, args []string, stdout io.Writer) error {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.StringVar(&cfg.OutDir, "out", cfg.OutDir, "directory for the HTML timeline and lifeboat's log")
	fs.StringVar(&cfg.Lifeboat, "lifeboat", "", "lifeboat binary (default: build it)")
	fs.DurationVar(&cfg.HookTimeout, "hook-timeout", cfg.HookTimeout, "heartbeat timeout of the lifecycle hooks (whole seconds, ≥ 1s; AWS: ≥ 30s)")
	fs.DurationVar(&cfg.PodShutdown, "pod-shutdown", cfg.PodShutdown, "how long the scale-in scene's pod takes to shut down")
	fs.DurationVar(&cfg.BootDelay, "boot-delay", cfg.BootDelay, "how long the warm-pool instance takes to become a Ready node")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the temporary directory with the component logs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg.Color = isTerminal(stdout) && os.Getenv("NO_COLOR") == ""
	_, err := run(ctx, cfg, stdout)
	return err
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
