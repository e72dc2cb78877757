// Command lifeboat gets workloads off EC2 instances before AWS takes them
// away. See README.md; `lifeboat --help` lists the subcommands.
//
// This package only parses the command line, wires the internal packages
// together and runs them: the work is in internal/.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"lifeboat.dev/lifeboat/internal/kube"
)

const usage = `lifeboat gets workloads off an EC2 instance before AWS takes it away.

usage: lifeboat <command> [flags]

commands:
  run       handle interruptions: queue mode (SQS, a leader-elected Deployment)
            or imds mode (instance metadata, a DaemonSet)
  check     verify the queue, EventBridge rules, lifecycle hooks and permissions
            with the flags of run
  replay    print what lifeboat makes of saved messages (no AWS or Kubernetes access)
  status    show the nodes lifeboat is handling: reason, deadline, pods left,
            heartbeats, lifecycle action (with your kubeconfig, like kubectl)
  version   print the version and build information

Run 'lifeboat <command> --help' for the flags of a command, each with its
environment variable and default (also in docs/configuration.md).
`

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// As the kubectl plugin (installed as kubectl-lifeboat), kubectl passes
	// the words after "kubectl lifeboat": the same commands, the same code.
	code := execute(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2 // the command line is wrong
)

// execute runs the program and returns its exit code, printing the error
// (if any) on stderr.
func execute(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	err := run(ctx, args, getenv, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "lifeboat:", err)
	}
	return exitCode(err)
}

// exitCode is the exit status of a run that returned err.
func exitCode(err error) int {
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	}
	return exitFailure
}

// usageError is a wrong command line: lifeboat exits 2 and says where
// help is.
type usageError struct {
	err  error
	help string // the command that shows the help: "lifeboat run --help"
}

func (e usageError) Error() string {
	if msg := e.err.Error(); strings.Contains(msg, "\n") {
		return fmt.Sprintf("%s\n(see '%s')", msg, e.help) // every problem, one a line
	}
	return fmt.Sprintf("%v (see '%s')", e.err, e.help)
}
func (e usageError) Unwrap() error { return e.err }

// run is the whole program, testable: args without the program name.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError{errors.New("no command given"), "lifeboat --help"}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return runCommand(ctx, rest, getenv, stdout, stderr)
	case "check":
		return checkCommand(ctx, rest, getenv, stdout, stderr)
	case "replay":
		return replayCommand(rest, stdout)
	case "status":
		return statusCommand(ctx, rest, func(kubeconfig, context string) (kube.Client, error) {
			return userClient(kubeconfig, context, getenv)
		}, stdout)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, versionString())
		return nil
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 && rest[0] != "help" && !isFlag(rest[0]) {
			return run(ctx, []string{rest[0], "--help"}, getenv, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return nil
	}
	if isFlag(cmd) {
		return usageError{fmt.Errorf("unknown flag %s: flags follow the command (lifeboat run --queue-url ...)", cmd), "lifeboat --help"}
	}
	return usageError{fmt.Errorf("unknown command %q", cmd), "lifeboat --help"}
}

func isFlag(s string) bool { return len(s) > 1 && s[0] == '-' }

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
