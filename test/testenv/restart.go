package testenv

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// relaunches numbers the logs of relaunched processes.
var relaunches atomic.Int64

// Pid returns the process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// relaunch starts the same binary with the same arguments and environment
// again, logging to a new file (name-<n>.log); the returned Process keeps
// the original Name.
func (p *Process) relaunch(logDir string, n int) (*Process, error) {
	q, err := StartProcess(fmt.Sprintf("%s-%d", p.Name, n), p.cmd.Path, p.cmd.Args[1:], p.cmd.Env, logDir)
	if err != nil {
		return nil, err
	}
	q.Name = p.Name
	return q, nil
}

// RestartAPIServer kills kube-apiserver (SIGKILL, as a crashed or
// rescheduled control-plane instance), keeps it down for down, starts it
// again with the same flags, port and certificates, and waits until it is
// ready. Clients see refused connections meanwhile, then their watches end
// and are re-established. etcd keeps the data.
func (e *Env) RestartAPIServer(ctx context.Context, down time.Duration) error {
	e.mu.Lock()
	i := -1
	for j, p := range e.procs {
		if p.Name == "kube-apiserver" {
			i = j // the last: the start attempt that succeeded
		}
	}
	e.mu.Unlock()
	if i < 0 {
		return fmt.Errorf("restarting kube-apiserver: not running in this Env")
	}
	old := e.Processes()[i]
	old.Kill()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	p, err := old.relaunch(e.Dir, int(relaunches.Add(1)))
	if err != nil {
		return fmt.Errorf("restarting kube-apiserver: %w", err)
	}
	e.mu.Lock()
	e.procs[i] = p
	e.mu.Unlock()
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if exited, err := p.Exited(); exited {
			return false, fmt.Errorf("kube-apiserver exited while restarting (%v); log tail:\n%s", err, p.Tail(30))
		}
		_, err := e.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("kube-apiserver did not become ready after a restart: %w", err)
	}
	return nil
}
