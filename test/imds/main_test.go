// Package imds runs the real lifeboat binary in IMDS mode (the DaemonSet
// mode) against the testbed: kube-apiserver, etcd, kube-controller-manager
// and kwok nodes (package testenv), and one amazon-ec2-metadata-mock per
// node as that node's instance metadata service. Tests run one after
// another on one shared control plane, each on its own node.
package imds

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/test/testenv"
)

var (
	kube        *testenv.Env
	lifeboatBin string
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "lifeboat-imds-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if lifeboatBin, err = testenv.BuildLifeboat(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Pods are bound to their node directly: no scheduler needed.
	kube, err = testenv.New(ctx, testenv.Options{NoScheduler: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the Kubernetes testbed:", err)
		return 1
	}
	defer kube.Close()
	code := m.Run()
	if code != 0 {
		kube.DumpLogs(os.Stderr, 20)
	}
	return code
}
