package bench

import (
	"os"

	"lifeboat.dev/lifeboat/test/testenv"
)

// burstProcesses are the processes whose CPU a burst report gives, by
// name: the testbed's components (the last started under each name), moto,
// lifeboat (nil: none) and the harness itself. All share the machine's
// cores: where the testbed is the bound, this says which part of it.
func burstProcesses(env *testenv.Env, moto *testenv.Moto, lifeboat []*testenv.Process) map[string]int {
	pids := map[string]int{"harness": os.Getpid()}
	for _, p := range env.Processes() {
		pids[p.Name] = p.Pid()
	}
	if moto != nil {
		pids["moto"] = moto.Proc.Pid()
	}
	for i, p := range lifeboat {
		name := "lifeboat"
		if i > 0 {
			name = "lifeboat-standby"
		}
		pids[name] = p.Pid()
	}
	return pids
}

// cpuNow reads each process's CPU time so far (testenv.ProcessCPU);
// a process that has ended is left out.
func cpuNow(pids map[string]int) map[string]float64 {
	out := map[string]float64{}
	for name, pid := range pids {
		if d, err := testenv.ProcessCPU(pid); err == nil {
			out[name] = d.Seconds()
		}
	}
	return out
}

// cpuSince is each process's CPU seconds since before (read by cpuNow);
// a process missing from either side is left out.
func cpuSince(before map[string]float64, pids map[string]int) map[string]float64 {
	after := cpuNow(pids)
	out := map[string]float64{}
	for name, v := range after {
		if w, ok := before[name]; ok {
			out[name] = v - w
		}
	}
	return out
}
