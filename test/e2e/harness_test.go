// Package e2e runs the real lifeboat binary in queue mode against the
// testbed: kube-apiserver, etcd, kube-controller-manager and kwok (package
// testenv), moto for SQS/EC2/EventBridge, and the Auto Scaling simulator
// (package awssim). Tests run one after another: they share one cluster and
// moto's default event bus.
package e2e

import (
	"os"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

var (
	kube        *testenv.Env
	moto        *testenv.Moto
	lifeboatBin string
)

const clusterName = "e2e"

func TestMain(m *testing.M) {
	os.Exit(testenv.SuiteMain(m, "e2e", testenv.SuiteOptions{Kube: testenv.Options{NoScheduler: true}, Moto: true}, func(s *testenv.Suite) {
		kube, moto, lifeboatBin = s.Kube, s.Moto, s.Lifeboat
	}))
}

// harness is one test's world (testenv.Scenario): a queue stack in moto,
// an Auto Scaling simulator whose instances become kwok nodes, and
// lifeboat running.
type harness struct {
	*testenv.Scenario

	mu sync.Mutex
	// noJoin lists instances that never become nodes; joinDelay delays the
	// node of an instance (boot time).
	noJoin map[string]bool
	// foreignGroups are another cluster's: their instances never join.
	foreignGroups map[string]bool
	joinDelay     time.Duration
}

type harnessOptions struct {
	// flags are extra lifeboat flags.
	flags []string
	// env is added to lifeboat's environment (NTH-style variables).
	env []string
	// noLifeboat runs the scenario without lifeboat (the "before" pictures).
	noLifeboat bool
}

func newHarness(t *testing.T, o harnessOptions) *harness {
	t.Helper()
	h := &harness{noJoin: map[string]bool{}, foreignGroups: map[string]bool{}}
	h.Scenario = testenv.NewScenario(t, testenv.ScenarioOptions{
		Kube: kube, Moto: moto, ResetMoto: true, LifeboatBin: lifeboatBin,
		ClusterName: clusterName, Prefix: "lb", GroupLabel: "e2e.lifeboat.io/group",
		GroupMaxSize: 10, JoinTimeout: 30 * time.Second, Join: h.join,
	})
	if !o.noLifeboat {
		h.StartLifeboat(testenv.ScenarioLifeboat{Args: o.flags, Env: o.env})
	}
	return h
}

// join keeps the instances in noJoin and in foreignGroups out of the
// cluster and delays the others' nodes by joinDelay.
func (h *harness) join(inst awssim.Instance) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.noJoin[inst.ID] || h.foreignGroups[inst.GroupName] {
		return 0, false
	}
	return h.joinDelay, true
}

func (h *harness) podExists(ns, name string) bool {
	_, err := kube.Client.CoreV1().Pods(ns).Get(h.Ctx, name, metav1.GetOptions{})
	return err == nil
}
