// Package kubediff holds lifeboat's own Kubernetes client (internal/kube:
// REST and Recorder, what the IMDS-only build links instead of client-go's
// clientset and tools/record) against the client-go code it replaced. Each
// test sends the same requests through both to one real kube-apiserver and
// requires the same answers: the same requests on the wire, the same
// objects back, the same API errors; where the two legitimately differ,
// the test asserts that exact difference.
//
// One control plane serves every test: etcd, kube-apiserver and a
// kube-controller-manager running only what the tests need (the disruption
// controller gives PodDisruptionBudgets their status; namespaces get their
// default ServiceAccount and are cleaned up). No kwok and no scheduler:
// nothing but the tests writes the nodes and pods, so two reads of the same
// object agree to the byte.
package kubediff

import (
	"fmt"
	"os"
	"testing"

	"lifeboat.dev/lifeboat/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := contextTimeout(startTimeout)
	defer cancel()
	var err error
	env, err = testenv.New(ctx, testenv.Options{
		NoScheduler: true,
		NoKwok:      true,
		Controllers: []string{"disruption-controller", "serviceaccount-controller", "namespace-controller"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the Kubernetes testbed:", err)
		return 1
	}
	defer env.Close()
	code := m.Run()
	if code != 0 {
		env.DumpLogs(os.Stderr, 20)
	}
	return code
}
