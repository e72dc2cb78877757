// Package fault injects faults into the real lifeboat binary running in
// queue mode on the testbed (kube-apiserver, etcd, kube-controller-manager
// and kwok from package testenv, moto, the Auto Scaling simulator) and
// checks the outcome, not just the absence of a crash: crashes (kill -9)
// at chosen and random points, AWS throttling/5xx/timeouts/resets through a
// fault-injecting proxy, Kubernetes API server restarts, conflicts and
// priority-and-fairness 429s, bad input, duplicates and reordering, and a
// soak that watches memory, goroutines and file descriptors.
//
// Randomness comes from one seed, printed by every test that uses it; set
// LIFEBOAT_FAULT_SEED to replay a run. Long variants: LIFEBOAT_FAULT_ITERATIONS
// (crash iterations beyond one per named kill point), LIFEBOAT_SOAK_DURATION
// (soak length, default 45s). docs/reliability.md records the figures.
package fault

import (
	"os"
	"strconv"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/test/testenv"
)

var (
	kube        *testenv.Env
	moto        *testenv.Moto
	lifeboatBin string
)

const clusterName = "fault"

func TestMain(m *testing.M) {
	os.Exit(testenv.SuiteMain(m, "fault", testenv.SuiteOptions{Kube: testenv.Options{NoScheduler: true}, Moto: true}, func(s *testenv.Suite) {
		kube, moto, lifeboatBin = s.Kube, s.Moto, s.Lifeboat
	}))
}

// seed returns the run's seed: LIFEBOAT_FAULT_SEED, or the clock. Each test
// logs it so that a failure can be replayed.
func seed(t *testing.T) uint64 {
	t.Helper()
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv("LIFEBOAT_FAULT_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("LIFEBOAT_FAULT_SEED=%q: want an unsigned integer", v)
		}
		s = n
	}
	t.Logf("seed %d (replay with LIFEBOAT_FAULT_SEED=%d go test ./test/fault -run '^%s$')", s, s, t.Name())
	return s
}

// envInt reads a positive integer from the environment, or def.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, v)
	}
	return n
}

// envDuration reads a duration from the environment, or def.
func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration", name, v)
	}
	return d
}
