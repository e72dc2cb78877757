package testenv

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// A component is told its ports on its command line and binds them itself,
// a moment after FreePort found them free: another process can take one in
// between (issue 22, defect 13: etcd "bind: address already in use" in
// test/e2e). None of the components takes an open listener, so a start that
// fails that way is retried on new ports (StartOnFreePorts).

// PortPicker hands out a port for the component who to bind. FreePort is the
// default; a test passes one that takes the port itself to provoke the race.
type PortPicker func(who string) (int, error)

// freePorts is the default PortPicker.
func freePorts(string) (int, error) { return FreePort() }

// portAttempts is how many times a component is started on new ports.
const portAttempts = 5

// StartOnFreePorts picks n ports for the component name, calls start with
// them, and when the component could not bind one (it exited and its log
// says "address already in use") picks new ports and calls start again, up
// to portAttempts times. start starts the component and waits until it
// serves; on error it returns the process it started (nil if none). A
// process that exited although it seemed to serve (another process answered
// on its port) counts as failed. pick nil means FreePort.
func StartOnFreePorts(ctx context.Context, name string, n int, pick PortPicker, start func(ctx context.Context, attempt int, ports []int) (*Process, error)) (*Process, []int, error) {
	if pick == nil {
		pick = freePorts
	}
	for attempt := 1; ; attempt++ {
		ports := make([]int, n)
		for i := range ports {
			p, err := pick(name)
			if err != nil {
				return nil, nil, err
			}
			ports[i] = p
		}
		p, err := start(ctx, attempt, ports)
		if err == nil && p != nil {
			if exited, exitErr := p.Exited(); exited {
				err = fmt.Errorf("%s exited right after it answered (%v): another process serves its port", name, exitErr)
			}
		}
		if err == nil {
			return p, ports, nil
		}
		if p == nil || !portTaken(p) || attempt == portAttempts || ctx.Err() != nil {
			return p, nil, err
		}
		p.Kill()
		fmt.Fprintf(os.Stderr, "testenv: %s could not bind one of the ports %v (taken since FreePort found it free); starting it again on new ports\n", name, ports)
	}
}

// portTaken reports whether p ended because a port it was given was in use.
func portTaken(p *Process) bool {
	if exited, _ := p.Exited(); !exited {
		return false // it failed otherwise (a timeout)
	}
	b, err := os.ReadFile(p.LogPath)
	return err == nil && PortTakenIn(string(b))
}

// PortTakenIn reports whether a component's log says it could not bind a
// port because another process had it ("bind: address already in use",
// Python's "Address already in use").
func PortTakenIn(log string) bool {
	return strings.Contains(strings.ToLower(log), "address already in use")
}

// startAttempt is StartProcess for a start attempt: each attempt logs to its
// own file (name.log, then name-retry2.log, ...); the Process keeps name.
func startAttempt(name string, attempt int, bin string, args, env []string, logDir string) (*Process, error) {
	logName := name
	if attempt > 1 {
		logName = fmt.Sprintf("%s-retry%d", name, attempt)
	}
	p, err := StartProcess(logName, bin, args, env, logDir)
	if err != nil {
		return nil, err
	}
	p.Name = name
	return p, nil
}
