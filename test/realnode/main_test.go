// Package realnode runs lifeboat's scenarios on real pods: a kubelet with
// its own containerd on this machine (testenv.RealNode), pods from images
// built from the repository's Go source, and a workload that records its
// own life (preStop, SIGTERM, work finished or cut off) to a file read
// after the pod is gone. Each scenario shows the harm first (without
// lifeboat, or with the field report's mistake: the process is cut off)
// and then lifeboat, the real binary, preventing it.
//
// Tests run one after another: they share one control plane and moto.
package realnode

import (
	"os"
	"slices"
	"testing"

	"lifeboat.dev/lifeboat/test/testenv"
)

var suite *testenv.Suite

func TestMain(m *testing.M) {
	os.Exit(testenv.SuiteMain(m, "realnode", testenv.SuiteOptions{
		// kwok manages only the nodes a test creates with Env.CreateNode
		// (the rollout's burst); the real nodes are the kubelets'. The
		// volume controllers bind and attach TestTimeToRecovery's CSI
		// volumes. The EndpointSlice controller publishes the endpoints
		// TestZeroFailedRequests's client follows.
		// The node proxy dials a node's InternalIP before its Hostname,
		// as kubeadm's API server does (the Hostname resolves nowhere here).
		Kube: testenv.Options{Controllers: append(slices.Clone(testenv.DefaultControllers),
			"persistentvolume-binder-controller", "persistentvolume-attach-detach-controller", "endpointslice-controller"),
			APIServerArgs: []string{"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname"}},
		Moto:   true,
		Images: true,
	}, func(s *testenv.Suite) { suite = s }))
}
