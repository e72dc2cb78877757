// Package check tests what operators see of lifeboat, on the testbed and
// with the real binary: `lifeboat check` against a correct AWS and
// Kubernetes setup (the CloudFormation template's queue and rules in moto,
// Auto Scaling groups in the simulator, a ServiceAccount under RBAC) and
// against each broken variant; /healthz and /readyz; logs while idle;
// webhooks end to end.
//
// moto quirks that matter here: it does not enforce queue policies (a
// missing events.amazonaws.com grant still delivers, so check reads the
// policy instead of relying on delivery), it drops a queue's policy on any
// SetQueueAttributes that does not repeat it, it reports SqsManagedSseEnabled
// true even for a queue with a KMS key (check looks at KmsMasterKeyId
// first), and it enforces no IAM (denied permissions are covered by the
// unit tests of internal/check with a fake API).
package check

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

// clusterName is the --cluster-name of every test.
const clusterName = "check"

func TestMain(m *testing.M) {
	os.Exit(testenv.SuiteMain(m, "check", testenv.SuiteOptions{Kube: testenv.Options{NoScheduler: true}, Moto: true}, func(s *testenv.Suite) {
		kube, moto, lifeboatBin = s.Kube, s.Moto, s.Lifeboat
	}))
}
