package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ProcessCPU is the CPU time of every thread of process pid so far (the
// first field of each thread's schedstat, in nanoseconds): an idle
// process's tenth of a second is below process_cpu_seconds_total's 10 ms
// ticks.
func ProcessCPU(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("no threads of process %d: %v", pid, err)
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, fmt.Errorf("%s: empty", t)
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", t, err)
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}

// IdleTime is how long an idle benchmark idles: LIFEBOAT_BENCH_IDLE
// (a Go duration) when set, else def; a value that is no duration fails t.
func IdleTime(t testing.TB, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv("LIFEBOAT_BENCH_IDLE")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("LIFEBOAT_BENCH_IDLE: %v", err)
	}
	return d
}
