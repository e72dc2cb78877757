package realnode

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	imdssrc "lifeboat.dev/lifeboat/internal/source/imds"
	"lifeboat.dev/lifeboat/test/testenv"
)

// metadataAddress is the metadata service's link-local address, where
// lifeboat reads when no endpoint is set.
const metadataAddress = "169.254.169.254"

// TestChartDefaultsOnRealNodeInItsOwnNetwork is issue 22, "as shipped",
// IMDS mode: the chart's DaemonSet with its default values runs as a real
// pod on a real node whose network is its own, as an EC2 instance's is.
// The node's containerd and kubelet, and so the host-network pod, run in a
// network namespace the test made for it, where the metadata mock answers
// at the real address, 169.254.169.254 port 80 (IMDSv2 tokens required),
// and nowhere on the machine's own interfaces. Set are only the mode, the
// image and, because the testbed has no kube-proxy, the API server's
// address (KUBERNETES_SERVICE_HOST/PORT in extraEnv, a forward
// into the namespace): no metadata endpoint, no poll interval, no port, no
// node selector (the cluster name is refused in IMDS mode). A Spot notice from the mock must make the pod cordon,
// taint and drain its node, the workload's preStop and SIGTERM handler
// running to their end, as its own record shows.
//
// The workload is on the pod network (the node's bridge, inside the
// namespace); it needs no route out.
func TestChartDefaultsOnRealNodeInItsOwnNetwork(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const tag = "1.0.0-netns"
	archive, err := testenv.BuildLifeboatImage(t.TempDir(), tag)
	if err != nil {
		t.Fatal(err)
	}
	netns := testenv.NewNetns(t)
	netns.AddAddress(t, metadataAddress+"/32")
	if hostAddress(t, metadataAddress) {
		t.Fatalf("%s is on the machine's own interfaces; the test needs it only inside the node's namespace", metadataAddress)
	}
	node := testenv.StartRealNode(t, suite.Kube, testenv.RealNodeOptions{Images: suite.Images, Netns: netns})
	if err := node.ImportImage(ctx, archive); err != nil {
		t.Fatal(err)
	}
	imds := testenv.IMDSOptions{Scenario: testenv.IMDSQuiet, IMDSv2Only: true, InstanceID: node.InstanceID, LocalHostname: node.Name}
	mock := testenv.StartIMDSIn(t, netns, metadataAddress, 80, imds)

	ns := suite.Kube.Namespace(t)  // lifeboat's release
	wns := suite.Kube.Namespace(t) // the workload
	work := testenv.WorkloadSpec{Namespace: wns, Name: "worker", Node: node.Name, RecordDir: t.TempDir(),
		PreStop: 2 * time.Second, Shutdown: 2 * time.Second, Grace: 30 * time.Second}
	startWorkloads(ctx, t, work)

	api, apiPort, err := net.SplitHostPort(netns.Reach(t, strings.TrimPrefix(suite.Kube.URL, "https://")))
	if err != nil {
		t.Fatal(err)
	}
	objs := renderChart(t, "lifeboat", ns, map[string]any{
		"mode":  "imds",
		"image": map[string]any{"repository": testenv.LifeboatImageRepository, "tag": tag},
		// No kube-proxy on the testbed: the in-cluster configuration
		// reaches the API server directly, through the namespace's veth.
		"extraEnv": []any{
			map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": api},
			map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": apiPort},
		},
	})
	assertNoMetadataEndpoint(t, objs)
	applyObjects(ctx, t, objs)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("---- lifeboat's container log ----\n%s", containerLogs(node, ns))
		}
	})
	pod := waitDaemonSetPod(ctx, t, ns, tag, "")
	if pod.Spec.NodeName != node.Name || !pod.Spec.HostNetwork {
		t.Fatalf("lifeboat's pod is on node %q (host network %v); want %s, on the host network", pod.Spec.NodeName, pod.Spec.HostNetwork, node.Name)
	}
	if n := nodeNow(ctx, t, node.Name); n.Spec.Unschedulable {
		t.Fatalf("the node is cordoned before any notice")
	}
	t.Logf("lifeboat pod %s Ready on the host network of node %s (namespace %s, metadata mock at %s)", pod.Name, node.Name, netns.Name, mock.URL)

	imds.Scenario = testenv.IMDSSpot
	if err := mock.Restart(ctx, imds); err != nil {
		t.Fatal(err)
	}
	noticed := time.Now()
	if _, err := suite.Kube.WaitPodGone(ctx, wns, work.Name); err != nil {
		t.Fatal(err)
	}
	rec := readRecord(t, work)
	t.Logf("%s: %s; gone %.2fs after the Spot notice appeared", work.Name, rec, time.Since(noticed).Seconds())
	assertGracefulShutdown(t, rec, work)
	eventually(ctx, t, 20*time.Second, "the node cordoned, tainted and marked drained", func() bool {
		n := nodeNow(ctx, t, node.Name)
		return n.Spec.Unschedulable && testenv.HasTaint(n, "lifeboat.io/spot-interruption") && n.Annotations["lifeboat.io/drained"] != ""
	})
	eventually(ctx, t, 20*time.Second, "a Drained Event about the node", func() bool {
		evs, err := suite.Kube.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node.Name + ",reason=Drained"})
		return err == nil && len(evs.Items) > 0
	})
	if _, err := suite.Kube.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("lifeboat's own pod: %v; want it still there (a DaemonSet pod is not drained)", err)
	}
	if log := containerLogs(node, ns); strings.Contains(log, "missing port") {
		t.Errorf("lifeboat's log reports a missing port:\n%s", log)
	}
}

// assertNoMetadataEndpoint fails t unless the rendered DaemonSet leaves
// the metadata endpoint to lifeboat's default: no --imds-endpoint, no
// endpoint variable.
func assertNoMetadataEndpoint(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	i := slices.IndexFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "DaemonSet" })
	if i < 0 {
		t.Fatal("the chart rendered no DaemonSet in imds mode")
	}
	var ds appsv1.DaemonSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[i].Object, &ds); err != nil {
		t.Fatal(err)
	}
	c := ds.Spec.Template.Spec.Containers[0]
	for _, a := range c.Args {
		if strings.Contains(a, "imds-endpoint") {
			t.Fatalf("the DaemonSet sets %s", a)
		}
	}
	for _, e := range c.Env {
		if e.Name == imdssrc.EnvEndpoint || e.Name == imdssrc.EnvEndpointMode || e.Name == "LIFEBOAT_IMDS_ENDPOINT" {
			t.Fatalf("the DaemonSet sets %s", e.Name)
		}
	}
}

// hostAddress reports whether ip is on one of the machine's interfaces.
func hostAddress(t *testing.T, ip string) bool {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(addrs, func(a net.Addr) bool {
		n, ok := a.(*net.IPNet)
		return ok && n.IP.String() == ip
	})
}

// nodeNow reads a Node; it fails t on error.
func nodeNow(ctx context.Context, t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := suite.Kube.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// containerLogs returns the logs the kubelet wrote for the containers of
// namespace ns on node (read from its disk: the API server cannot reach a
// kubelet inside a network namespace).
func containerLogs(node *testenv.RealNode, ns string) string {
	files, _ := filepath.Glob(filepath.Join(node.Dir, "pod-logs", ns+"_*", "*", "*.log"))
	var b strings.Builder
	for _, f := range files {
		data, _ := os.ReadFile(f)
		b.WriteString("== " + f + "\n")
		b.Write(data)
	}
	return b.String()
}
