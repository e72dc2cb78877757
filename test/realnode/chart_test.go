package realnode

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/test/testenv"
)

// TestChartDaemonSetUpgradeOnRealNode is seed 004 (F5) in IMDS mode with
// lifeboat as a real pod: the chart's DaemonSet (host network, the metadata
// mock as its metadata service, in-cluster configuration from a real
// service-account token, the chart's own RBAC) runs lifeboat's own image on
// a real node; `helm upgrade` to a new image tag completes: the new pod is
// Running and Ready, the old one is gone, nothing is Pending. It logs the
// container's memory working set and CPU while idle as the kubelet reports
// them (what `kubectl top` shows).
func TestChartDaemonSetUpgradeOnRealNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	images := map[string]string{}
	for _, tag := range []string{"1.0.0", "1.1.0"} {
		p, err := testenv.BuildLifeboatImage(dir, tag)
		if err != nil {
			t.Fatal(err)
		}
		images[tag] = p
	}
	node := testenv.StartRealNode(t, suite.Kube, testenv.RealNodeOptions{Images: suite.Images,
		Labels: map[string]string{"realnode.lifeboat.io/chart": "yes"}})
	for _, p := range images {
		if err := node.ImportImage(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	mock := testenv.StartIMDS(t, testenv.IMDSOptions{Scenario: testenv.IMDSQuiet, InstanceID: node.InstanceID, LocalHostname: node.Name})
	ns := suite.Kube.Namespace(t)
	api, err := url.Parse(suite.Kube.URL)
	if err != nil {
		t.Fatal(err)
	}
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	values := func(tag string) map[string]any {
		return map[string]any{
			"mode":                  "imds",
			"image":                 map[string]any{"repository": testenv.LifeboatImageRepository, "tag": tag, "pullPolicy": "Never"},
			"useHostNetwork":        true,
			"instanceMetadataURL":   mock.URL,
			"imdsPollInterval":      "1s",
			"port":                  port,
			"daemonsetNodeSelector": map[string]any{"realnode.lifeboat.io/chart": "yes"},
			// No kube-proxy on the testbed: the in-cluster configuration
			// reaches the API server directly, not through its Service.
			"extraEnv": []any{
				map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": api.Hostname()},
				map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": api.Port()},
			},
		}
	}
	first := renderChart(t, "lifeboat", ns, values("1.0.0"))
	applyObjects(ctx, t, first)
	old := waitDaemonSetPod(ctx, t, ns, "1.0.0", "")
	// The chart's default: the IMDS-only build of the same image, with
	// Go's GC settings for a small heap.
	if c := old.Spec.Containers[0]; !slices.Equal(c.Command, []string{"/usr/local/bin/lifeboat-imds"}) {
		t.Errorf("the DaemonSet's command is %q, want lifeboat-imds", c.Command)
	}
	// Two samples: at the container's first stats, and after 25 s idle
	// (cAdvisor housekeeps each container every 10-15 s).
	for i, wait := range []time.Duration{0, 25 * time.Second} {
		time.Sleep(wait)
		usage := kubeletUsage(ctx, t, node, ns, old.Name)
		t.Logf("lifeboat 1.0.0 Running on the real node as %s; sample %d: kubelet reports memory working set %.1f MiB, CPU %.1f millicores (idle)",
			old.Name, i+1, float64(usage.workingSet)/(1<<20), float64(usage.nanoCores)/1e6)
	}

	start := time.Now()
	applyObjects(ctx, t, renderChart(t, "lifeboat", ns, values("1.1.0")))
	upgraded := waitDaemonSetPod(ctx, t, ns, "1.1.0", old.Name)
	t.Logf("upgrade to 1.1.0 rolled out in %v (%s -> %s)", time.Since(start).Round(time.Millisecond), old.Name, upgraded.Name)
	// The chart probes readiness every 15 s; its startup probe asks /readyz
	// every second, and the kubelet probes readiness at once when that
	// passes: a pod of a rolling update is Ready within about a second of
	// lifeboat being ready, not at the next readiness period. (The first
	// pod's figure is logged, not held: a kubelet that started less than a
	// probe period ago, as this node's did, waits a random part of that
	// period before its first readiness probe.)
	for _, p := range []corev1.Pod{old, upgraded} {
		d, err := readyAfterStart(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s Ready %v after its container started (the API's times, whole seconds)", p.Name, d)
		if p.Name == upgraded.Name && d > 4*time.Second {
			t.Errorf("%s Ready %v after its container started, want within 4 s: a rolling update waits that long on every node; its events:\n%s",
				p.Name, d, podEvents(ctx, ns, p.Name))
		}
	}
}

// podEvents lists a pod's events, one a line (the kubelet's probe
// failures among them).
func podEvents(ctx context.Context, ns, pod string) string {
	l, err := suite.Kube.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range l.Items {
		fmt.Fprintf(&b, "  %s %s %s x%d: %s\n", e.FirstTimestamp.Format(time.TimeOnly), e.Type, e.Reason, e.Count, e.Message)
	}
	return b.String()
}

// readyAfterStart is the time from a pod's first container starting to the
// pod's Ready condition turning true, as the kubelet reported them.
func readyAfterStart(p corev1.Pod) (time.Duration, error) {
	if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
		return 0, fmt.Errorf("pod %s: no running container in its status", p.Name)
	}
	started := p.Status.ContainerStatuses[0].State.Running.StartedAt.Time
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Sub(started), nil
		}
	}
	return 0, fmt.Errorf("pod %s is not Ready", p.Name)
}

// renderChart renders the packaged chart as `helm template` would, in
// install order (testenv.RenderChart).
func renderChart(t testing.TB, release, namespace string, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	r, err := testenv.RenderChart(release, namespace, values)
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	return r.Objects
}

// applyObjects applies objects with server-side apply, as `helm upgrade
// --install` would; cluster-scoped ones are deleted in t's cleanup (the
// namespace takes the rest).
func applyObjects(ctx context.Context, t testing.TB, objs []*unstructured.Unstructured) {
	t.Helper()
	dc, err := dynamic.NewForConfig(suite.Kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(suite.Kube.Client.Discovery()))
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatal(err)
		}
		var res dynamic.ResourceInterface = dc.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			res = dc.Resource(m.Resource).Namespace(o.GetNamespace())
		} else {
			name := o.GetName()
			t.Cleanup(func() { _ = dc.Resource(m.Resource).Delete(context.Background(), name, metav1.DeleteOptions{}) })
		}
		data, err := json.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := res.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: "realnode-test", Force: ptr.To(true)}); err != nil {
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// waitDaemonSetPod waits until the namespace's only lifeboat pod runs the
// image tag, Running and Ready, with no other pod left (gone is the old
// pod's name) and none Pending; it returns that pod.
func waitDaemonSetPod(ctx context.Context, t testing.TB, ns, tag, gone string) corev1.Pod {
	t.Helper()
	var found corev1.Pod
	var last []string
	eventually(ctx, t, 90*time.Second, "one Ready lifeboat pod with tag "+tag, func() bool {
		pods, err := suite.Kube.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		last = last[:0]
		for _, p := range pods.Items {
			last = append(last, fmt.Sprintf("%s %s %s ready=%v", p.Name, p.Spec.Containers[0].Image, p.Status.Phase, testenv.PodReady(&p)))
		}
		if len(pods.Items) != 1 {
			return false
		}
		p := pods.Items[0]
		found = p
		return p.Name != gone && strings.HasSuffix(p.Spec.Containers[0].Image, ":"+tag) && p.Status.Phase == corev1.PodRunning && testenv.PodReady(&p)
	})
	t.Logf("pods: %v", last)
	return found
}

// usage is a container's memory working set, its CPU rate (cAdvisor's
// last housekeeping interval) and its CPU time since it started.
type usage struct{ workingSet, nanoCores, coreNanoSeconds uint64 }

// kubeletUsage reads a pod's memory working set and CPU from the kubelet's
// /stats/summary (what metrics-server, and so `kubectl top`, reads).
func kubeletUsage(ctx context.Context, t testing.TB, node *testenv.RealNode, ns, pod string) usage {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the kubelet's self-signed certificate on loopback
	var u usage
	eventually(ctx, t, 45*time.Second, "the kubelet's stats of "+pod, func() bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:"+strconv.Itoa(node.KubeletPort)+"/stats/summary", nil)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var s struct {
			Pods []struct {
				PodRef     struct{ Name, Namespace string } `json:"podRef"`
				Containers []struct {
					Name string `json:"name"`
					CPU  struct {
						UsageNanoCores       *uint64 `json:"usageNanoCores"`
						UsageCoreNanoSeconds *uint64 `json:"usageCoreNanoSeconds"`
					} `json:"cpu"`
					Memory struct {
						WorkingSetBytes *uint64 `json:"workingSetBytes"`
					} `json:"memory"`
				} `json:"containers"`
			} `json:"pods"`
		}
		if json.NewDecoder(resp.Body).Decode(&s) != nil {
			return false
		}
		for _, p := range s.Pods {
			if p.PodRef.Namespace != ns || p.PodRef.Name != pod {
				continue
			}
			for _, c := range p.Containers {
				// The working set appears with cAdvisor's first
				// housekeeping of the container, CPU with its second.
				if c.CPU.UsageNanoCores != nil && c.Memory.WorkingSetBytes != nil && *c.Memory.WorkingSetBytes > 0 {
					u = usage{workingSet: *c.Memory.WorkingSetBytes, nanoCores: *c.CPU.UsageNanoCores}
					if c.CPU.UsageCoreNanoSeconds != nil {
						u.coreNanoSeconds = *c.CPU.UsageCoreNanoSeconds
					}
					return true
				}
			}
		}
		return false
	})
	return u
}
