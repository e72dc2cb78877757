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
	"context"
	"fmt"
	"os"
	"testing"
	"time"

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
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "lifeboat-check-")
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
	kube, err = testenv.New(ctx, testenv.Options{NoScheduler: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the Kubernetes testbed:", err)
		return 1
	}
	defer kube.Close()
	moto, err = testenv.NewMoto(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting moto:", err)
		return 1
	}
	defer moto.Proc.Stop()
	code := m.Run()
	if code != 0 {
		kube.DumpLogs(os.Stderr, 20)
	}
	return code
}
