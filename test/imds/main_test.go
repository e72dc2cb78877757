// Package imds runs the real lifeboat binary in IMDS mode (the DaemonSet
// mode) against the testbed: kube-apiserver, etcd, kube-controller-manager
// and kwok nodes (package testenv), and one amazon-ec2-metadata-mock per
// node as that node's instance metadata service. Tests run one after
// another on one shared control plane, each on its own node.
package imds

import (
	"fmt"
	"os"
	"testing"

	"lifeboat.dev/lifeboat/test/testenv"
)

var (
	kube        *testenv.Env
	lifeboatBin string
)

// LIFEBOAT_IMDS_BUILD=imdsonly runs the suite against lifeboat-imds, the
// IMDS-only build that the chart's DaemonSet runs; `make test` runs the
// package once with each build, so that both are tested the same way.
func TestMain(m *testing.M) {
	var tags []string
	switch b := os.Getenv("LIFEBOAT_IMDS_BUILD"); b {
	case "":
	case "imdsonly":
		tags = []string{b}
	default:
		fmt.Fprintf(os.Stderr, "LIFEBOAT_IMDS_BUILD=%q: want imdsonly or nothing\n", b)
		os.Exit(2)
	}
	// Pods are bound to their node directly: no scheduler needed.
	os.Exit(testenv.SuiteMain(m, "imds", testenv.SuiteOptions{Kube: testenv.Options{NoScheduler: true}, LifeboatTags: tags}, func(s *testenv.Suite) {
		kube, lifeboatBin = s.Kube, s.Lifeboat
	}))
}
