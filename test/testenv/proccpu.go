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

// ProcessCPU is the CPU time of process pid so far, every thread's. It
// sums the first field of each live thread's schedstat (nanoseconds: an
// idle process's tenth of a second is below process_cpu_seconds_total's
// 10 ms ticks), and takes the process's utime+stime instead when that is
// more: the kernel keeps the time of threads that have ended there (in
// ticks of the same total), not in any live thread's schedstat. Without it
// a server with a thread per request (moto) showed 3.6 s of CPU over a
// 5,000-notice burst whose requests took it minutes. A process whose
// threads all live reads as before: its ticks, truncated, are never more
// than its threads' nanoseconds.
func ProcessCPU(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("no threads of process %d: %v", pid, err)
	}
	var live time.Duration
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
		live += time.Duration(ns)
	}
	// Read after the threads: it covers every one of them, ended or not.
	total, err := statTicks(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return max(live, time.Duration(total)*clockTick), nil
}

// clockTick is the unit of /proc's utime and stime: USER_HZ, 100 on
// every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// statTicks reads utime+stime (fields 14 and 15) of a /proc stat file.
func statTicks(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("%s: no command name", path)
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3
	if len(f) < 13 {
		return 0, fmt.Errorf("%s: %d fields", path, len(f)+2)
	}
	var sum int64
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		sum += v
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
