package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"lifeboat.dev/lifeboat/test/testenv"
)

func envInt(b *testing.B, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			b.Fatalf("%s=%q: want a number", name, v)
		}
		return n
	}
	return def
}

// BenchmarkQueueModeMemory starts queue-mode lifeboat in a cluster of
// LIFEBOAT_BENCH_NODES nodes (default 5,000, each with 30 container images
// in its status, as real nodes have) and LIFEBOAT_BENCH_PODS pods (default
// 15,000), waits until its node cache is filled and reports its resident
// memory (VmRSS) and peak (VmHWM).
//
// LIFEBOAT_BENCH_BINARIES (comma-separated paths) runs given binaries one
// after another in the same cluster instead of a build of this tree, e.g.
// an earlier commit's beside this one's. LIFEBOAT_BENCH_GOENV
// (comma-separated NAME=value, e.g. the chart's Deployment's GOGC and
// GOMEMLIMIT) is set in lifeboat's environment. LIFEBOAT_BENCH_HEAP_PROFILE=DIR
// builds with -tags pprof (given binaries must be such builds) and writes
// each process's heap profile (inuse and alloc) to DIR once the cache filled.
func BenchmarkQueueModeMemory(b *testing.B) {
	nodes := envInt(b, "LIFEBOAT_BENCH_NODES", 5000)
	pods := envInt(b, "LIFEBOAT_BENCH_PODS", 15000)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	profileDir := os.Getenv("LIFEBOAT_BENCH_HEAP_PROFILE")
	var goEnv []string
	if v := os.Getenv("LIFEBOAT_BENCH_GOENV"); v != "" {
		goEnv = strings.Split(v, ",")
	}
	env, moto, bin, dir := testbed(b, testenv.Options{NoScheduler: true, NoKwok: true, NoControllerManager: true})
	bins := []string{bin}
	if v := os.Getenv("LIFEBOAT_BENCH_BINARIES"); v != "" {
		bins = strings.Split(v, ",")
	} else if profileDir != "" {
		var err error
		if bins[0], err = testenv.BuildLifeboat(dir, "pprof"); err != nil {
			b.Fatal(err)
		}
	}
	stack, err := testenv.CreateQueueStack(ctx, moto.Endpoint, "memory")
	if err != nil {
		b.Fatal(err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range nodes {
		g.Go(func() error {
			want := memNode(i)
			n := want.DeepCopy()
			n.Status = corev1.NodeStatus{}
			n, err := env.Client.CoreV1().Nodes().Create(gctx, n, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			n.Status = want.Status
			_, err = env.Client.CoreV1().Nodes().UpdateStatus(gctx, n, metav1.UpdateOptions{})
			return err
		})
	}
	// No controller-manager here (no pods run): create the namespace and the
	// default ServiceAccount the admission plugin wants by hand.
	ns := "memory"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	for i := range pods {
		g.Go(func() error {
			_, err := env.Client.CoreV1().Pods(ns).Create(gctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%06d", i)},
				Spec: corev1.PodSpec{NodeName: fmt.Sprintf("mem-%05d", i%max(nodes, 1)),
					Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
			}, metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	for k, bin := range bins {
		b.Run(fmt.Sprintf("%d-%s", k, filepath.Base(bin)), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				runQueueModeMemory(ctx, b, memoryRun{bin: bin, name: fmt.Sprintf("lifeboat-mem-%d-%d", k, i), env: goEnv,
					dir: dir, queueURL: stack.QueueURL, moto: moto.Endpoint, kubeconfig: env.Kubeconfig, profileDir: profileDir,
					nodes: nodes, pods: pods})
			}
		})
	}
}

// memNode is the benchmark's node i: 30 container images in its status,
// as real nodes have, 3 labels and a providerID.
func memNode(i int) *corev1.Node {
	var images []corev1.ContainerImage
	for i := range 30 {
		images = append(images, corev1.ContainerImage{
			Names:     []string{fmt.Sprintf("123456789012.dkr.ecr.us-east-1.amazonaws.com/team/service-%02d@sha256:%064d", i, i), fmt.Sprintf("123456789012.dkr.ecr.us-east-1.amazonaws.com/team/service-%02d:v1.2.%d", i, i)},
			SizeBytes: 123456789,
		})
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("mem-%05d", i), Labels: map[string]string{
			"topology.kubernetes.io/zone": "us-east-1a", "node.kubernetes.io/instance-type": "m5.large", "eks.amazonaws.com/nodegroup": "ng-1"}},
		Spec: corev1.NodeSpec{ProviderID: testenv.ProviderID("us-east-1a", testenv.RandomInstanceID())},
		Status: corev1.NodeStatus{Images: images,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

// BenchmarkQueueModeMemoryStandIn measures the same as
// BenchmarkQueueModeMemory without the testbed (so without its lock, and
// 20,000 nodes in seconds): a stand-in API server serves the benchmark's
// nodes as the real one does to lifeboat's list, in protobuf pages of the
// size asked for, and an idle watch; every other request gets 404, and
// the queue's endpoint is the same server, so lifeboat's receives fail and
// it retries. The nodes carry no managedFields (the real API server's add
// ~0.5 KB a node to the wire, stripped like the images). Same variables
// as BenchmarkQueueModeMemory, except the pods (there are none).
func BenchmarkQueueModeMemoryStandIn(b *testing.B) {
	nodes := envInt(b, "LIFEBOAT_BENCH_NODES", 5000)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	profileDir := os.Getenv("LIFEBOAT_BENCH_HEAP_PROFILE")
	var goEnv []string
	if v := os.Getenv("LIFEBOAT_BENCH_GOENV"); v != "" {
		goEnv = strings.Split(v, ",")
	}
	dir := b.TempDir()
	var bins []string
	if v := os.Getenv("LIFEBOAT_BENCH_BINARIES"); v != "" {
		bins = strings.Split(v, ",")
	} else {
		var tags []string
		if profileDir != "" {
			tags = []string{"pprof"}
		}
		bin, err := testenv.BuildLifeboat(dir, tags...)
		if err != nil {
			b.Fatal(err)
		}
		bins = []string{bin}
	}
	srv := httptest.NewServer(standInAPI(b, nodes))
	defer srv.Close()
	kubeconfig := standInKubeconfig(b, dir, srv.URL)
	for k, bin := range bins {
		b.Run(fmt.Sprintf("%d-%s", k, filepath.Base(bin)), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				runQueueModeMemory(ctx, b, memoryRun{bin: bin, name: fmt.Sprintf("lifeboat-standin-%d-%d", k, i), env: goEnv,
					dir: dir, queueURL: srv.URL + "/123456789012/memory", moto: srv.URL, kubeconfig: kubeconfig, profileDir: profileDir,
					nodes: nodes})
			}
		})
	}
}

// standInAPI serves n benchmark nodes on /api/v1/nodes: lists in protobuf
// pages (limit and continue), watches open and idle.
func standInAPI(b *testing.B, n int) http.Handler {
	codec := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	const rv = "1000"
	page := func(start, limit int) []byte {
		l := &corev1.NodeList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NodeList"}, ListMeta: metav1.ListMeta{ResourceVersion: rv}}
		end := n
		if limit > 0 {
			end = min(n, start+limit)
		}
		for i := start; i < end; i++ {
			l.Items = append(l.Items, *memNode(i))
		}
		if end < n {
			l.Continue = strconv.Itoa(end)
		}
		var buf bytes.Buffer
		if err := codec.Encode(l, &buf); err != nil {
			b.Error(err)
		}
		return buf.Bytes()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/api/v1/nodes" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
			return
		}
		if q.Get("watch") == "true" {
			w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		if !strings.Contains(r.Header.Get("Accept"), "protobuf") {
			b.Errorf("node list asks for %q, want protobuf (as lifeboat's client does)", r.Header.Get("Accept"))
		}
		start, _ := strconv.Atoi(q.Get("continue"))
		limit, _ := strconv.Atoi(q.Get("limit"))
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
		_, _ = w.Write(page(start, limit))
	})
}

// memoryRun is one lifeboat process measured by runQueueModeMemory.
type memoryRun struct {
	bin, name, dir, queueURL, moto, kubeconfig, profileDir string
	env                                                    []string
	nodes, pods                                            int
}

func runQueueModeMemory(ctx context.Context, b *testing.B, r memoryRun) {
	port, err := testenv.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	procEnv := append(testenv.AWSEnv(), r.env...)
	pprofAddr := ""
	if r.profileDir != "" {
		pport, err := testenv.FreePort()
		if err != nil {
			b.Fatal(err)
		}
		pprofAddr = fmt.Sprintf("127.0.0.1:%d", pport)
		procEnv = append(procEnv, "LIFEBOAT_PPROF_ADDR="+pprofAddr)
	}
	proc, err := testenv.StartProcess(r.name, r.bin, []string{"run",
		"--queue-url", r.queueURL, "--aws-endpoint", r.moto, "--region", "us-east-1",
		"--kubeconfig", r.kubeconfig, "--leader-elect=false", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--log-level", "warn",
	}, procEnv, r.dir)
	if err != nil {
		b.Fatal(err)
	}
	defer proc.Stop()
	if err := testenv.WaitHTTP(ctx, proc, nil, fmt.Sprintf("http://127.0.0.1:%d/healthz", port)); err != nil {
		b.Fatal(err)
	}
	// The node cache fills in a few seconds; let garbage collection settle.
	time.Sleep(15 * time.Second)
	rss, hwm := procMemory(b, proc.Pid())
	metrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	heap := gauge(b, metrics, "go_memstats_heap_inuse_bytes")
	alloc := gauge(b, metrics, "go_memstats_heap_alloc_bytes")
	if pprofAddr != "" {
		heapProfile(b, pprofAddr, filepath.Join(r.profileDir, fmt.Sprintf("%s-n%d.heap.pprof", r.name, r.nodes)))
	}
	b.ReportMetric(heap/(1<<20), "heap_inuse_MiB")
	b.ReportMetric(alloc/(1<<20), "heap_alloc_MiB")
	b.ReportMetric(float64(r.nodes), "nodes")
	b.ReportMetric(float64(r.pods), "pods")
	b.ReportMetric(rss/1024, "rss_MiB")
	b.ReportMetric(hwm/1024, "peak_rss_MiB")
}

// heapProfile fetches a heap profile (after a garbage collection) from a
// pprof endpoint and writes it to path; errors are logged, not fatal (the
// profile is an aid, not a figure).
func heapProfile(b *testing.B, addr, path string) {
	data, err := fetchProfile(fmt.Sprintf("http://%s/debug/pprof/heap?gc=1", addr))
	if err == nil {
		err = writeProfile(path, data)
	}
	if err != nil {
		b.Logf("heap profile: %v", err)
		return
	}
	b.Logf("heap profile written to %s", path)
}

// procMemory returns VmRSS and VmHWM of a process, in KiB.
func procMemory(b *testing.B, pid int) (rss, hwm float64) {
	b.Helper()
	rss, hwm, err := readMemory(pid)
	if err != nil {
		b.Fatal(err)
	}
	return rss, hwm
}

// readMemory reads VmRSS and VmHWM of a process, in KiB.
func readMemory(pid int) (rss, hwm float64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = v
		case "VmHWM:":
			hwm = v
		}
	}
	return rss, hwm, nil
}

// gauge reads one unlabelled metric from a /metrics endpoint.
func gauge(b *testing.B, url, name string) float64 {
	b.Helper()
	for _, line := range strings.Split(scrape(b, url), "\n") {
		if strings.HasPrefix(line, name+" ") {
			v, err := strconv.ParseFloat(strings.Fields(line)[1], 64)
			if err != nil {
				b.Fatal(err)
			}
			return v
		}
	}
	b.Fatalf("metric %s not found at %s", name, url)
	return 0
}

// standInKubeconfig writes a kubeconfig for the stand-in API server at url
// into dir and returns its path.
func standInKubeconfig(b *testing.B, dir, url string) string {
	b.Helper()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: stand-in, cluster: {server: %q}}]
users: [{name: stand-in, user: {token: t}}]
contexts: [{name: stand-in, context: {cluster: stand-in, user: stand-in}}]
current-context: stand-in
`, url)), 0o600); err != nil {
		b.Fatal(err)
	}
	return kubeconfig
}
