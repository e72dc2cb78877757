package testenv

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LifeboatOptions configure a lifeboat process started by StartLifeboat.
type LifeboatOptions struct {
	// Bin is the binary (BuildLifeboat).
	Bin string
	// Args follow "run"; StartLifeboat adds --listen on a free port.
	Args []string
	// Env is added to the environment; AWSEnv is always added.
	Env []string
	// Dir holds one log file per run (lifeboat-1.log, lifeboat-2.log, ...).
	Dir string

	// pickPort hands out the --listen port (nil: FreePort); a test takes it
	// itself to provoke the race StartOnFreePorts survives.
	pickPort PortPicker
}

// Lifeboat is the real lifeboat binary run as a process in queue mode: it
// can be killed (kill -9), restarted with the same flags and port, scraped
// and its logs read, like in production.
type Lifeboat struct {
	o    LifeboatOptions
	port int

	mu   sync.Mutex
	proc *Process
	runs []*Process
}

// StartLifeboat starts lifeboat and waits until /healthz answers.
func StartLifeboat(ctx context.Context, o LifeboatOptions) (*Lifeboat, error) {
	l := &Lifeboat{o: o}
	_, _, err := StartOnFreePorts(ctx, "lifeboat", 1, o.pickPort, func(ctx context.Context, _ int, ports []int) (*Process, error) {
		l.mu.Lock()
		l.runs = nil // an attempt that could not bind is no run
		l.mu.Unlock()
		l.port = ports[0]
		err := l.start(ctx)
		return l.Process(), err
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Lifeboat) start(ctx context.Context) error {
	l.mu.Lock()
	n := len(l.runs) + 1
	l.mu.Unlock()
	args := append([]string{"run", "--listen", fmt.Sprintf("127.0.0.1:%d", l.port)}, l.o.Args...)
	p, err := StartProcess(fmt.Sprintf("lifeboat-%d", n), l.o.Bin, args, append(AWSEnv(), l.o.Env...), l.o.Dir)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.proc = p
	l.runs = append(l.runs, p)
	l.mu.Unlock()
	if err := WaitHTTP(ctx, p, nil, l.URL()+"/healthz"); err != nil {
		p.Kill()
		return err
	}
	return nil
}

// URL is the address of /metrics, /healthz and /readyz.
func (l *Lifeboat) URL() string { return fmt.Sprintf("http://127.0.0.1:%d", l.port) }

// Process returns the current run.
func (l *Lifeboat) Process() *Process {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.proc
}

// Runs returns how many times lifeboat was started.
func (l *Lifeboat) Runs() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.runs)
}

// Kill ends the current run with SIGKILL, as a crash or an OOM kill would.
func (l *Lifeboat) Kill() { l.Process().Kill() }

// Stop ends the current run with SIGTERM (SIGKILL after 5 s).
func (l *Lifeboat) Stop() { l.Process().Stop() }

// Restart kills the current run if it still runs and starts lifeboat
// again with the same flags and port.
func (l *Lifeboat) Restart(ctx context.Context) error {
	l.Kill()
	return l.start(ctx)
}

// Exited reports whether the current run has ended, and how.
func (l *Lifeboat) Exited() (bool, error) { return l.Process().Exited() }

// Logs returns the log lines of every run, in order.
func (l *Lifeboat) Logs() []string {
	l.mu.Lock()
	runs := append([]*Process(nil), l.runs...)
	l.mu.Unlock()
	var out []string
	for _, p := range runs {
		out = append(out, readLines(p.LogPath)...)
	}
	return out
}

// CurrentLogs returns the log lines of the current run.
func (l *Lifeboat) CurrentLogs() []string { return readLines(l.Process().LogPath) }

// CountLogs counts the lines of every run that contain all of substrs.
func (l *Lifeboat) CountLogs(substrs ...string) int {
	n := 0
	for _, line := range l.Logs() {
		if containsAll(line, substrs) {
			n++
		}
	}
	return n
}

// WaitLog waits until a line of the current run contains all of substrs.
// It fails at once if the run ends meanwhile.
func (l *Lifeboat) WaitLog(ctx context.Context, substrs ...string) error {
	p := l.Process()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, line := range readLines(p.LogPath) {
			if containsAll(line, substrs) {
				return nil
			}
		}
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("lifeboat exited (%v) before logging %q", err, substrs)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for lifeboat to log %q: %w", substrs, ctx.Err())
		case <-tick.C:
		}
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func readLines(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}

// MetricsText returns lifeboat's /metrics.
func (l *Lifeboat) MetricsText(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.URL()+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping lifeboat: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping lifeboat: status %d", resp.StatusCode)
	}
	return io.ReadAll(resp.Body)
}

// Metric returns the sum of the samples of a metric of the current run
// whose labels include every given label (name -> value).
func (l *Lifeboat) Metric(ctx context.Context, name string, labels map[string]string) (float64, error) {
	raw, err := l.MetricsText(ctx)
	if err != nil {
		return 0, err
	}
	return SumMetric(raw, name, labels)
}

// SumMetric sums the samples of one metric in the Prometheus text format
// whose labels include every given label.
func SumMetric(raw []byte, name string, labels map[string]string) (float64, error) {
	samples, err := parseCounter(raw, name)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, s := range samples {
		ok := true
		for k, v := range labels {
			ok = ok && s.labels[k] == v
		}
		if ok {
			sum += s.value
		}
	}
	return sum, nil
}

// RSS returns the resident set size of the current run, from
// /proc/<pid>/status (VmRSS).
func (l *Lifeboat) RSS() (int64, error) {
	p := l.Process()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return 0, fmt.Errorf("reading lifeboat's status: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("unexpected VmRSS line %q", sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parsing VmRSS %q: %w", sc.Text(), err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", p.Pid())
}
