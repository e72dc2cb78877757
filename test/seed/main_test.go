// Package seed holds the first tests against the real test environment
// (test/testenv): they pin down the Kubernetes behaviour lifeboat relies on
// (evictions and PodDisruptionBudgets, grace periods as kwok plays them,
// kwok nodes staying Ready, scheduling) so that a broken testbed shows up
// here rather than as a mysterious lifeboat failure.
//
// The package shares one Env, started in TestMain; every test works in its
// own namespace and on its own nodes.
package seed

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/test/testenv"
)

// env is the package's shared test environment.
var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	e, err := testenv.New(ctx, testenv.Options{})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the test environment: %v\n", err)
		return 1
	}
	defer e.Close()
	fmt.Printf("testenv: control plane up in %v\n", e.StartupTime.Round(time.Millisecond))
	env = e
	code := m.Run()
	if code != 0 {
		e.DumpLogs(os.Stderr, 60)
	}
	return code
}
