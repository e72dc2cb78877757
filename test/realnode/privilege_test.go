package realnode

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/test/testenv"
)

// TestIMDSPodScopedToItsNode is issue 14 item 8 on a real node: the
// chart's IMDS DaemonSet (lifeboat's own image, on the host network by
// default, the chart's RBAC) runs on a real node against a metadata mock
// that requires IMDSv2 tokens. The token the kubelet mounted in lifeboat's
// pod, read from the node's disk as whoever took over the node would, names
// the node (kubernetes.io.node.name). Without the chart's admission
// policies that token cordons another node and deletes a pod there (the
// harm); with them both are refused with the policy's message, while the
// pod still deletes a pod on its own node and, on a Spot notice, cordons,
// taints and drains its own node (the workload's preStop and SIGTERM
// handler finish), annotates it and reports a Drained Event about it.
//
// The other node is a Node object no kubelet serves (without kwok's
// annotation, so kwok leaves it alone too; a kwok node is the same kind of
// object to the API server).
func TestIMDSPodScopedToItsNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const tag = "1.0.0-scope"
	archive, err := testenv.BuildLifeboatImage(t.TempDir(), tag)
	if err != nil {
		t.Fatal(err)
	}
	node := testenv.StartRealNode(t, suite.Kube, testenv.RealNodeOptions{Images: suite.Images,
		Labels: map[string]string{"realnode.lifeboat.io/scope": "yes"}})
	if err := node.ImportImage(ctx, archive); err != nil {
		t.Fatal(err)
	}
	other := bareNode(ctx, t)
	imds := testenv.IMDSOptions{Scenario: testenv.IMDSQuiet, IMDSv2Only: true, InstanceID: node.InstanceID, LocalHostname: node.Name}
	mock := testenv.StartIMDS(t, imds)

	ns := suite.Kube.Namespace(t)  // lifeboat's release
	wns := suite.Kube.Namespace(t) // the workloads, on both nodes
	work := testenv.WorkloadSpec{Namespace: wns, Name: "worker", Node: node.Name, RecordDir: t.TempDir(),
		PreStop: time.Second, Shutdown: time.Second, Grace: 30 * time.Second}
	ownVictim := work
	ownVictim.Name, ownVictim.PreStop = "own-victim", 0
	startWorkloads(ctx, t, work, ownVictim)
	harmVictim := barePod(ctx, t, wns, "away-0", other)
	victim := barePod(ctx, t, wns, "away", other)

	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	api, err := url.Parse(suite.Kube.URL)
	if err != nil {
		t.Fatal(err)
	}
	values := func(nodeScoped bool) map[string]any {
		return map[string]any{
			"mode":                  "imds",
			"image":                 map[string]any{"repository": testenv.LifeboatImageRepository, "tag": tag, "pullPolicy": "Never"},
			"rbac":                  map[string]any{"nodeScoped": nodeScoped},
			"forceDeleteAtDeadline": true, // grants pods delete
			"instanceMetadataURL":   mock.URL,
			"imdsPollInterval":      "500ms",
			"evictionBackoff":       "500ms",
			"port":                  port,
			"daemonsetNodeSelector": map[string]any{"realnode.lifeboat.io/scope": "yes"},
			// No kube-proxy on the testbed: the in-cluster configuration
			// reaches the API server directly, not through its Service.
			"extraEnv": []any{
				map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": api.Hostname()},
				map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": api.Port()},
			},
		}
	}
	applyObjects(ctx, t, renderChart(t, "scope", ns, values(false)))
	pod := waitDaemonSetPod(ctx, t, ns, tag, "")

	// On the host network (the chart's default; its port answers on the
	// host's loopback, which a pod-network pod's would not), lifeboat got
	// IMDSv2 tokens: the mock refuses requests without one, and the pod is
	// Ready only once its last poll answered.
	if !pod.Spec.HostNetwork {
		t.Fatalf("lifeboat's pod is not on the host network by default")
	}
	if code := httpStatus(ctx, t, mock.URL+"/latest/meta-data/instance-id"); code != http.StatusUnauthorized {
		t.Fatalf("the mock answers %d to a request without a token; want 401 (IMDSv2 only)", code)
	}
	if m := httpBody(ctx, t, fmt.Sprintf("http://127.0.0.1:%d/metrics", port)); !strings.Contains(m, `lifeboat_source_healthy{source="imds"} 1`) {
		t.Fatalf("lifeboat's metrics do not say the metadata source is healthy:\n%s", m)
	}
	t.Logf("lifeboat pod %s on the host network (serving on the host's 127.0.0.1:%d) reads IMDSv2 (tokens required) and is Ready", pod.Name, port)

	token := podToken(t, node, &pod)
	claim, err := testenv.TokenNodeClaim(token)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := suite.Kube.ClientForToken(token)
	if err != nil {
		t.Fatal(err)
	}
	user, seen, err := testenv.WhoAmI(ctx, lb)
	if err != nil {
		t.Fatal(err)
	}
	if claim != node.Name || seen != node.Name {
		t.Fatalf("the pod's token names node %q and the API server sees %s=%q; want %s (ServiceAccountTokenPodNodeInfo)", claim, testenv.NodeClaimKey, seen, node.Name)
	}
	t.Logf("the token the kubelet mounted in %s: claim kubernetes.io.node.name=%s; the API server sees user %s with %s=%s", pod.Name, claim, user, testenv.NodeClaimKey, seen)

	// The harm: without the policies, the pod's token changes another node.
	if err := testenv.CordonNode(ctx, lb, other, false); err != nil {
		t.Fatalf("without the policies, cordoning %s with the pod's token: %v", other, err)
	}
	t.Logf("without the policies: the token of %s's lifeboat pod cordoned node %s", node.Name, other)
	setUnschedulable(ctx, t, other, false)
	if err := testenv.DeletePod(ctx, lb, wns, harmVictim, false); err != nil {
		t.Fatalf("without the policies, deleting %s on %s with the pod's token: %v", harmVictim, other, err)
	}
	t.Logf("without the policies: the token of %s's lifeboat pod deleted pod %s on node %s", node.Name, harmVictim, other)

	applyObjects(ctx, t, renderChart(t, "scope", ns, values(true)))
	eventually(ctx, t, 20*time.Second, "the policies to refuse dry-run writes on the other node", func() bool {
		return testenv.CordonNode(ctx, lb, other, true) != nil && testenv.DeletePod(ctx, lb, wns, victim, true) != nil
	})
	refused := []struct {
		what, want string
		do         func() error
	}{
		{"cordon node " + other, "ValidatingAdmissionPolicy 'scope-lifeboat-own-node' with binding 'scope-lifeboat-own-node' denied request: lifeboat on node " +
			node.Name + " may change only its own node, not node " + other,
			func() error { return testenv.CordonNode(ctx, lb, other, false) }},
		{"delete pod " + victim + " on node " + other, "ValidatingAdmissionPolicy 'scope-lifeboat-own-node-pods' with binding 'scope-lifeboat-own-node-pods' denied request: lifeboat on node " +
			node.Name + " may delete only pods on its own node, not " + wns + "/" + victim + " on node " + other,
			func() error { return testenv.DeletePod(ctx, lb, wns, victim, false) }},
	}
	for _, r := range refused {
		err := r.do()
		if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), r.want) {
			t.Errorf("with the policies, %s with the pod's token: %v; want 403 %q", r.what, err, r.want)
			continue
		}
		t.Logf("with the policies, %s with the pod's token is refused: %v", r.what, err)
	}
	if err := testenv.DeletePod(ctx, lb, wns, ownVictim.Name, false); err != nil {
		t.Errorf("with the policies, deleting pod %s on its own node: %v", ownVictim.Name, err)
	}

	// A Spot notice: lifeboat, in the pod, drains its own node.
	imds.Scenario = testenv.IMDSSpot
	if err := mock.Restart(ctx, imds); err != nil {
		t.Fatal(err)
	}
	if _, err := suite.Kube.WaitPodGone(ctx, wns, work.Name); err != nil {
		t.Fatal(err)
	}
	rec := readRecord(t, work)
	t.Logf("%s: %s", work.Name, rec)
	assertGracefulShutdown(t, rec, work)
	var n *corev1.Node
	eventually(ctx, t, 20*time.Second, "the real node cordoned, tainted and marked drained", func() bool {
		n, err = suite.Kube.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		return err == nil && n.Spec.Unschedulable && testenv.HasTaint(n, "lifeboat.io/spot-interruption") && n.Annotations["lifeboat.io/drained"] != ""
	})
	eventually(ctx, t, 20*time.Second, "a Drained Event about the real node", func() bool {
		evs, err := suite.Kube.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node.Name + ",reason=Drained"})
		return err == nil && len(evs.Items) > 0
	})
	o, err := suite.Kube.Client.CoreV1().Nodes().Get(ctx, other, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Spec.Unschedulable || len(o.Annotations) != 0 {
		t.Errorf("node %s was changed: unschedulable %v, annotations %v", other, o.Spec.Unschedulable, o.Annotations)
	}
	if _, err := suite.Kube.Client.CoreV1().Pods(wns).Get(ctx, victim, metav1.GetOptions{}); err != nil {
		t.Errorf("pod %s on node %s: %v; want it still there", victim, other, err)
	}
}

// bareNode creates a Node object that no kubelet serves, deleted in t's
// cleanup, and returns its name.
func bareNode(ctx context.Context, t *testing.T) string {
	t.Helper()
	name := testenv.UniqueName("ip-10-0-9") + ".ec2.internal"
	_, err := suite.Kube.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Spec:       corev1.NodeSpec{ProviderID: testenv.ProviderID("us-east-1a", testenv.RandomInstanceID())},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = suite.Kube.DeleteNode(context.Background(), name) })
	return name
}

// barePod creates a pod bound to node without waiting for it (nothing runs
// it); its grace period of 0 lets a delete remove it at once.
func barePod(ctx context.Context, t *testing.T, ns, name, node string) string {
	t.Helper()
	_, err := suite.Kube.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](0), AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "app", Image: testenv.PauseImage}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// podToken reads the service-account token the kubelet wrote for a pod
// (its projected volume under the kubelet's root), as anyone with root on
// the node can.
func podToken(t *testing.T, node *testenv.RealNode, pod *corev1.Pod) string {
	t.Helper()
	pattern := filepath.Join(node.Dir, "kubelet", "pods", string(pod.UID), "volumes", "kubernetes.io~projected", "*", "token")
	paths, err := filepath.Glob(pattern)
	if err != nil || len(paths) != 1 {
		t.Fatalf("the token of pod %s: %d files match %s (%v)", pod.Name, len(paths), pattern, err)
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func setUnschedulable(ctx context.Context, t *testing.T, node string, v bool) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := suite.Kube.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Unschedulable = v
		_, err = suite.Kube.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("setting %s unschedulable=%v: %v", node, v, err)
	}
}

func httpStatus(ctx context.Context, t *testing.T, u string) int {
	t.Helper()
	resp := httpGet(ctx, t, u)
	resp.Body.Close()
	return resp.StatusCode
}

func httpBody(ctx context.Context, t *testing.T, u string) string {
	t.Helper()
	resp := httpGet(ctx, t, u)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func httpGet(ctx context.Context, t *testing.T, u string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return resp
}
