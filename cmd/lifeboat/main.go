// Command lifeboat gets workloads off EC2 instances before AWS takes them
// away. See README.md; `lifeboat help` lists the subcommands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

const usage = `usage: lifeboat <command> [flags]

commands:
  run       handle interruptions (queue or imds mode; see docs/configuration.md)
  check     verify queue, rules, lifecycle hooks and permissions with run's flags:
            lifeboat check [--output table|json] [--timeout 1m] RUN-FLAGS...
  replay    print what lifeboat makes of saved messages: lifeboat replay FILE|DIR...
  version   print the version and build information
`

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lifeboat:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ error }

// run is the whole program, testable: args without the program name.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError{errors.New("no command given")}
	}
	switch args[0] {
	case "run":
		return runHandler(ctx, args[1:], getenv, stderr)
	case "check":
		return checkCommand(ctx, args[1:], getenv, stdout, stderr)
	case "replay":
		return replay(args[1:], stdout)
	case "version", "--version":
		fmt.Fprintln(stdout, versionString())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return usageError{fmt.Errorf("unknown command %q", args[0])}
	}
}

func versionString() string {
	s := "lifeboat " + version
	if bi, ok := debug.ReadBuildInfo(); ok {
		s += " " + bi.GoVersion
		for _, kv := range bi.Settings {
			if kv.Key == "vcs.revision" || kv.Key == "GOOS" || kv.Key == "GOARCH" {
				s += " " + kv.Key + "=" + kv.Value
			}
		}
	}
	return s
}
