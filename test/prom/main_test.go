// Package prom checks lifeboat's Prometheus side against real components:
// the chart's ServiceMonitor, PodMonitor and PrometheusRule applied to the
// testbed's kube-apiserver with the Prometheus Operator's own CRDs (from a
// pinned module of the Go proxy), and a real Prometheus (Debian's package,
// started and stopped by the test) scraping the real lifeboat binary while
// an end-to-end scenario runs on the testbed (kube-apiserver, etcd,
// kube-controller-manager, kwok, moto, the Auto Scaling simulator). Every
// query of the Grafana dashboard and every alert of the chart's rule file
// is then evaluated by that Prometheus.
package prom

import (
	"os"
	"testing"

	"lifeboat.dev/lifeboat/test/testenv"
)

var (
	kube        *testenv.Env
	moto        *testenv.Moto
	lifeboatBin string
)

const clusterName = "prom"

func TestMain(m *testing.M) {
	os.Exit(testenv.SuiteMain(m, "prom", testenv.SuiteOptions{Kube: testenv.Options{NoScheduler: true}, Moto: true}, func(s *testenv.Suite) {
		kube, moto, lifeboatBin = s.Kube, s.Moto, s.Lifeboat
	}))
}
