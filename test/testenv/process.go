// Package testenv starts the real components lifeboat's tests run against
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok,
// amazon-ec2-metadata-mock, moto) on free loopback ports, and tears them down.
//
// It is test-only code: nothing under internal/ or cmd/ may import it. A
// component that is missing fails the test with a message naming it and how
// to get it; nothing is skipped.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RepoRoot returns the repository root (the directory holding go.mod).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// BinPath returns the path of a testbed tool built by `make tools`, or an
// error that names the tool and how to build it.
func BinPath(name string) (string, error) {
	p := filepath.Join(RepoRoot(), "bin", name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("testbed component %s is missing at %s: run `make tools` in the repository root (cold build ~10 min)", name, p)
	}
	return p, nil
}

// FreePort returns a free TCP port on 127.0.0.1.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Process is a started component. Its output goes to a log file that is
// printed when the owning test fails.
type Process struct {
	Name    string
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
	once sync.Once
}

// StartProcess starts bin with args, logging to a file in logDir.
func StartProcess(name, bin string, args []string, env []string, logDir string) (*Process, error) {
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating log for %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.Env = append(os.Environ(), env...)
	// Own process group, so a stop reaches children (moto_server is a shim).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop ends the process group: SIGTERM, then SIGKILL after a grace of 5 s.
func (p *Process) Stop() {
	p.once.Do(func() {
		pgid := -p.cmd.Process.Pid
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second): // lifeboat's stop waits out its long polls (5 s) and hands messages back
			_ = syscall.Kill(pgid, syscall.SIGKILL)
			<-p.done
		}
	})
}

// Kill ends the process group at once (SIGKILL), as a crash would.
func (p *Process) Kill() {
	p.once.Do(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	})
}

// Tail returns the last n lines of the process log.
func (p *Process) Tail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// WaitHTTP polls url until it answers with a status below 500 or ctx ends.
// A process that exits meanwhile fails the wait at once.
func WaitHTTP(ctx context.Context, p *Process, client *http.Client, url string) error {
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Second}
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		if p != nil {
			if exited, err := p.Exited(); exited {
				return fmt.Errorf("%s exited while starting (%v); log tail:\n%s", p.Name, err, p.Tail(30))
			}
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return nil
			}
			lastErr = fmt.Errorf("status %d", resp.StatusCode)
		} else {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("waiting for %s: %w", url, ctx.Err()), lastErr)
		case <-tick.C:
		}
	}
}

// dumpOnFailure registers a cleanup that prints the tail of each log when t failed.
func dumpOnFailure(t testing.TB, procs ...*Process) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		w := failureLog(t)
		for _, p := range procs {
			fmt.Fprintf(w, "---- %s log (%s), last 40 lines ----\n%s\n", p.Name, p.LogPath, p.Tail(40))
		}
	})
}

// failureLog returns where a failed test's component logs go: straight to
// the test binary's stderr, headed by the test's name, not into the test's
// own log. go test prints a test's log after its cleanups, so the failure
// messages stay the last lines before FAIL, where a CI summary that keeps
// only the tail still shows them.
func failureLog(t testing.TB) io.Writer {
	fmt.Fprintf(os.Stderr, "==== %s failed; the logs of its components follow, its own messages come after them ====\n", t.Name())
	return os.Stderr
}
