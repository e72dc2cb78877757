package testenv

import (
	"bufio"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestProcessCPUKeepsEndedThreads: the CPU time of a thread that has ended
// still counts. moto serves each request on a thread of its own, and
// summing only the live threads showed 3.6 s for minutes of its work; the
// child here is Python too: a thread burns 300 ms of CPU and ends.
func TestProcessCPUKeepsEndedThreads(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 (the testbed's, for moto) is not on PATH: %v", err)
	}
	cmd := exec.Command(py, "-c", `import sys, threading, time
def burn():
    end = time.thread_time() + 0.3
    while time.thread_time() < end:
        pass
t = threading.Thread(target=burn)
t.start()
t.join()
print("ended", flush=True)
sys.stdin.read()
`)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ended\n" {
		t.Fatalf("child said %q, %v; want ended", line, err)
	}
	got, err := ProcessCPU(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// The ended thread counts in ticks: allow two of rounding.
	if got < 300*time.Millisecond-2*clockTick {
		t.Errorf("ProcessCPU = %v after a thread of the process burned 300ms and ended", got)
	}
}

func TestStatTicks(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		line string
		want int64
		bad  bool
	}{
		{line: "42 (moto server) S 1 42 42 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 9 0 100 1000 10", want: 281},
		{line: "42 (a) b) R 1 42 42 0 -1 0 0 0 0 0 7 8 0 0 20 0 1 0 1 1 1", want: 15},
		{line: "42 (short) R 1 2", bad: true},
		{line: "no command", bad: true},
	} {
		p := dir + "/stat"
		if err := os.WriteFile(p, []byte(tc.line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := statTicks(p)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("statTicks(%q) = %d, %v; want %d, error %v", tc.line, got, err, tc.want, tc.bad)
		}
	}
}
