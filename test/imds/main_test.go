// Package imds runs the real lifeboat binary in IMDS mode (the DaemonSet
// mode) against the testbed: kube-apiserver, etcd, kube-controller-manager
// and kwok nodes (package testenv), and one amazon-ec2-metadata-mock per
// node as that node's instance metadata service. Tests run one after
// another on one shared control plane, each on its own node.
package imds

import (
	"os"
	"testing"

	"lifeboat.dev/lifeboat/test/testenv"
)

var (
	kube        *testenv.Env
	lifeboatBin string
)

func TestMain(m *testing.M) {
	// Pods are bound to their node directly: no scheduler needed.
	os.Exit(testenv.SuiteMain(m, "imds", testenv.SuiteOptions{Kube: testenv.Options{NoScheduler: true}}, func(s *testenv.Suite) {
		kube, lifeboatBin = s.Kube, s.Lifeboat
	}))
}
