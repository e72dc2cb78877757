package realnode

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"lifeboat.dev/lifeboat/test/testenv"
)

// BenchmarkDaemonSetIdleOnRealNode measures the chart's IMDS-mode
// DaemonSet at its defaults (the IMDS-only build, its Go settings, its
// poll interval) idle on a real node for LIFEBOAT_BENCH_IDLE (default
// 10m), from 30 s after the pod is Ready: its CPU as the kubelet reports it
// (the container's usageCoreNanoSeconds in /stats/summary, what
// metrics-server and `kubectl top` read) beside the process's own (every
// thread's schedstat, read on the host), both as seconds an hour, and the
// kubelet's working set. Only the settings the testbed needs are given:
// the metadata mock (quiet, IMDSv2 only) and the API server's address.
// With LIFEBOAT_BENCH_NTH_SOURCE set to a checkout of
// aws-node-termination-handler, NTH's DaemonSet, built from it and
// installed from its own chart at its defaults (startNTH), idles on the
// same node in the same window and is measured alike. With
// LIFEBOAT_BENCH_OLD_PROBES=1 a second release of the chart, the same but
// for the probes it had before session 26 (oldProbes), idles beside it.
// The floor runs on the host in the same window: test/bench/idlefloor,
// net/http reading the Spot path of the same mock once a second with a 5 s
// timeout and nothing else, with the chart's Go settings; each process's
// figure is printed with its ratio to the floor's. The same floor also runs
// as a pod on the node's network (startFloorPod): what a pod that does
// nothing but poll costs there.
//
//	LIFEBOAT_BENCH_IDLE=10m flock /tmp/lifeboat-testbed.lock go test -count=1 -timeout 30m -run '^$' -bench DaemonSetIdleOnRealNode -benchtime 1x ./test/realnode/
func BenchmarkDaemonSetIdleOnRealNode(b *testing.B) {
	idle := testenv.IdleTime(b, 10*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), idle+5*time.Minute)
	defer cancel()
	dir := b.TempDir()
	image, err := testenv.BuildLifeboatImage(dir, "idle")
	if err != nil {
		b.Fatal(err)
	}
	node := testenv.StartRealNode(b, suite.Kube, testenv.RealNodeOptions{Images: suite.Images,
		Labels: map[string]string{"realnode.lifeboat.io/idle": "yes"}})
	if err := node.ImportImage(ctx, image); err != nil {
		b.Fatal(err)
	}
	mock := testenv.StartIMDS(b, testenv.IMDSOptions{Scenario: testenv.IMDSQuiet, IMDSv2Only: true, InstanceID: node.InstanceID, LocalHostname: node.Name})
	ns := suite.Kube.Namespace(b)
	api, err := url.Parse(suite.Kube.URL)
	if err != nil {
		b.Fatal(err)
	}
	port, err := testenv.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	selector := map[string]any{"realnode.lifeboat.io/idle": "yes"}
	apiEnv := []any{ // no kube-proxy on the testbed (TestChartDaemonSetUpgradeOnRealNode)
		map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": api.Hostname()},
		map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": api.Port()},
	}
	values := func(port int) map[string]any {
		return map[string]any{
			"mode":                  "imds",
			"image":                 map[string]any{"repository": testenv.LifeboatImageRepository, "tag": "idle", "pullPolicy": "Never"},
			"useHostNetwork":        true,
			"instanceMetadataURL":   mock.URL,
			"port":                  port,
			"daemonsetNodeSelector": selector,
			"extraEnv":              apiEnv,
		}
	}
	applyObjects(ctx, b, renderChart(b, "lifeboat", ns, values(port)))
	pod := waitDaemonSetPod(ctx, b, ns, "idle", "")
	sides := []idleSide{{name: "lifeboat", ns: ns, pod: pod.Name, pid: hostPID(b, "/usr/local/bin/lifeboat-imds", string(pod.UID))}}
	if os.Getenv("LIFEBOAT_BENCH_OLD_PROBES") == "1" {
		oldNS := suite.Kube.Namespace(b)
		oldPort, err := testenv.FreePort()
		if err != nil {
			b.Fatal(err)
		}
		objs := renderChart(b, "lifeboat-old-probes", oldNS, values(oldPort))
		oldProbes(b, objs)
		applyObjects(ctx, b, objs)
		old := waitDaemonSetPod(ctx, b, oldNS, "idle", "")
		sides = append(sides, idleSide{name: "old_probes", ns: oldNS, pod: old.Name, pid: hostPID(b, "/usr/local/bin/lifeboat-imds", string(old.UID))})
	}
	if nth := startNTH(ctx, b, node, mock.URL, selector, apiEnv); nth != nil {
		sides = append(sides, idleSide{name: "nth", ns: nth.ns, pod: nth.name, pid: nth.pid})
	}
	floorBin, err := testenv.BuildIdleFloor(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	floorPod := startFloorPod(ctx, b, node, dir, floorBin, mock.URL)
	sides = append(sides, idleSide{name: "floor_pod", ns: floorPod.Namespace, pod: floorPod.Name, pid: hostPID(b, "/idlefloor", string(floorPod.UID))})
	floor := testenv.StartIdleFloor(ctx, b, floorBin, mock.URL, "5s")
	sides = append(sides, idleSide{name: "floor", pid: floor.Process.Pid})
	for range b.N {
		time.Sleep(30 * time.Second)
		t0 := time.Now()
		for k := range sides {
			if sides[k].pod != "" {
				sides[k].k0 = kubeletUsage(ctx, b, node, sides[k].ns, sides[k].pod)
			}
			sides[k].p0 = processCPU(b, sides[k].pid)
		}
		time.Sleep(idle)
		t1 := time.Now()
		perHour := func(d time.Duration) float64 { return d.Seconds() * float64(time.Hour) / float64(t1.Sub(t0)) }
		// Every figure first (the pods' as the kubelet reports them), then
		// each with its ratio to the floor on the host and to the floor pod.
		own, kubelet, ws := make([]float64, len(sides)), make([]float64, len(sides)), make([]float64, len(sides))
		var floorHost, floorPod float64
		for k, s := range sides {
			own[k] = perHour(processCPU(b, s.pid) - s.p0)
			if s.pod != "" {
				k1 := kubeletUsage(ctx, b, node, s.ns, s.pod)
				kubelet[k], ws[k] = perHour(time.Duration(k1.coreNanoSeconds-s.k0.coreNanoSeconds)), float64(k1.workingSet)/(1<<20)
			}
			switch s.name {
			case "floor":
				floorHost = own[k]
			case "floor_pod":
				floorPod = kubelet[k]
			}
		}
		for k, s := range sides {
			if s.pod == "" {
				fmt.Printf("floor (test/bench/idlefloor on the host, net/http reading the Spot path once a second, 5 s timeout, the chart's Go settings), same window: %.2f s/h\n", own[k])
				b.ReportMetric(own[k], "floor_cpu_s/h")
				continue
			}
			fmt.Printf("%s idle on a real node, %v (%s to %s UTC): kubelet %.2f s/h CPU (%.2f × the floor on the host, %.2f × the floor pod), the process's threads %.2f s/h; working set %.1f MiB\n",
				s.name, t1.Sub(t0).Round(time.Second), t0.UTC().Format("15:04:05"), t1.UTC().Format("15:04:05"), kubelet[k], kubelet[k]/floorHost, kubelet[k]/floorPod, own[k], ws[k])
			suffix := ""
			if s.name != "lifeboat" {
				suffix = "_" + s.name
			}
			b.ReportMetric(kubelet[k], "kubelet_cpu_s/h"+suffix)
			b.ReportMetric(own[k], "process_cpu_s/h"+suffix)
			b.ReportMetric(ws[k], "working_set_MiB"+suffix)
		}
	}
}

// idleSide is one DaemonSet pod BenchmarkDaemonSetIdleOnRealNode measures,
// with its figures at the start of the window.
type idleSide struct {
	name, ns, pod string
	pid           int
	k0            usage
	p0            time.Duration
}

// hostPID finds, in the host's /proc, the one process running command in
// the pod with uid (its cgroup path names the pod).
func hostPID(b *testing.B, command, uid string) int {
	b.Helper()
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var found []int
	for _, f := range cmdlines {
		data, err := os.ReadFile(f)
		if err != nil || !strings.HasPrefix(string(data), command+"\x00") {
			continue
		}
		dir := filepath.Dir(f)
		cg, err := os.ReadFile(filepath.Join(dir, "cgroup"))
		if err != nil || !(strings.Contains(string(cg), uid) || strings.Contains(string(cg), strings.ReplaceAll(uid, "-", "_"))) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err == nil {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		b.Fatalf("processes running %s in pod %s: %v, want one", command, uid, found)
	}
	return found[0]
}

// processCPU is testenv.ProcessCPU, fatal on error.
func processCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	d, err := testenv.ProcessCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// oldProbes gives the rendered chart's DaemonSet the probes the chart had
// before session 26: liveness /healthz every 10 s, readiness /readyz every
// 5 s, no startup probe.
func oldProbes(b *testing.B, objs []*unstructured.Unstructured) {
	b.Helper()
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		containers, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if err != nil || len(containers) != 1 {
			b.Fatalf("the chart's DaemonSet containers: %v (%d)", err, len(containers))
		}
		c := containers[0].(map[string]any)
		probe := func(path string, period int64) map[string]any {
			return map[string]any{"httpGet": map[string]any{"path": path, "port": "http"}, "periodSeconds": period, "failureThreshold": int64(3)}
		}
		delete(c, "startupProbe")
		c["livenessProbe"] = probe("/healthz", 10)
		c["readinessProbe"] = probe("/readyz", 5)
		if err := unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers"); err != nil {
			b.Fatal(err)
		}
		return
	}
	b.Fatal("the chart rendered no DaemonSet")
}

// startFloorPod runs the floor binary bin (test/bench/idlefloor) as a pod on
// the real node, on the node's network with the chart's Go settings,
// polling the metadata mock at mockURL once a second with a 5 s timeout,
// and returns it once Running.
func startFloorPod(ctx context.Context, b *testing.B, node *testenv.RealNode, dir, bin, mockURL string) *corev1.Pod {
	b.Helper()
	image, err := testenv.IdleFloorImageArchive(dir, bin)
	if err != nil {
		b.Fatal(err)
	}
	if err := node.ImportImage(ctx, image); err != nil {
		b.Fatal(err)
	}
	ns := suite.Kube.Namespace(b)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "idlefloor", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:    node.Name,
			HostNetwork: true,
			Containers: []corev1.Container{{
				Name: "idlefloor", Image: testenv.IdleFloorImage, ImagePullPolicy: corev1.PullNever,
				Args: []string{"--endpoint", mockURL, "--interval", "1s", "--timeout", "5s"},
			}},
		},
	}
	for _, kv := range testenv.DaemonSetGoEnv {
		k, v, _ := strings.Cut(kv, "=")
		pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: k, Value: v})
	}
	created, err := suite.Kube.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	eventually(ctx, b, 60*time.Second, "the idle floor's pod Running", func() bool {
		created, err = suite.Kube.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && created.Status.Phase == corev1.PodRunning
	})
	return created
}
