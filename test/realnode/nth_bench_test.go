package realnode

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/hack/imagebuild"
	"lifeboat.dev/lifeboat/test/testenv"
)

// nthImage is the image startNTH builds from aws-node-termination-handler's
// source; its tag is what waitDaemonSetPod looks for.
const (
	nthImageRepository = "lifeboat.test/nth"
	nthImageTag        = "src"
)

// nthPod is aws-node-termination-handler's DaemonSet pod beside lifeboat's.
type nthPod struct {
	ns, name string
	pid      int
}

// startNTH runs aws-node-termination-handler's DaemonSet on node beside
// lifeboat's, for a comparison in the same run, when
// LIFEBOAT_BENCH_NTH_SOURCE names a checkout of it (the Go proxy refuses
// NTH's module but serves its dependencies); nil when it is unset. NTH is
// built as its Makefile builds a release (`go build -tags nthlinux
// -ldflags "-s -w"`, CGO_ENABLED=0), packed as an image of that one binary
// run as user 1000 (its Dockerfile's final stage, without the CA bundle
// it does not need here), and installed with its own chart from that
// checkout at its defaults (IMDS mode: the Spot and ASG lifecycle
// monitors, each polling every 2 s; no probes server, hence no probes),
// given only what lifeboat's DaemonSet is given: the metadata mock, the
// image, the node selector and the API server's address; and without its
// scheduled-event monitor, which the mock's 404 stops (below).
func startNTH(ctx context.Context, b *testing.B, node *testenv.RealNode, mockURL string, nodeSelector map[string]any, apiEnv []any) *nthPod {
	b.Helper()
	src := os.Getenv("LIFEBOAT_BENCH_NTH_SOURCE")
	if src == "" {
		return nil
	}
	chartDir := filepath.Join(src, "config", "helm", "aws-node-termination-handler")
	if _, err := os.Stat(chartDir); err != nil {
		b.Fatalf("LIFEBOAT_BENCH_NTH_SOURCE=%s is not a checkout of aws-node-termination-handler: %v", src, err)
	}
	dir := b.TempDir()
	bin, err := testenv.BuildRelease(ctx, testenv.Release{Dir: src, Pkg: "./cmd/node-termination-handler.go", Out: filepath.Join(dir, "node-termination-handler"),
		Tags: []string{"nthlinux"}, Env: []string{"GOOS=linux", "GOFLAGS=-mod=mod"}})
	if err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		b.Fatal(err)
	}
	archive := filepath.Join(dir, "nth.image.tar")
	if err := testenv.WriteImageArchive(archive, testenv.ImageSpec{Ref: nthImageRepository + ":" + nthImageTag,
		Files:      []imagebuild.File{{Path: "/node-termination-handler", Mode: 0o755, Data: data}},
		Entrypoint: []string{"/node-termination-handler"}, User: "1000"}); err != nil {
		b.Fatal(err)
	}
	if err := node.ImportImage(ctx, archive); err != nil {
		b.Fatal(err)
	}
	ns := suite.Kube.Namespace(b)
	r, err := testenv.RenderChartDir(chartDir, "nth", ns, map[string]any{
		"image":                 map[string]any{"repository": nthImageRepository, "tag": nthImageTag, "pullPolicy": "Never"},
		"instanceMetadataURL":   mockURL,
		"daemonsetNodeSelector": nodeSelector,
		"extraEnv":              apiEnv,
		// The metadata mock answers events/maintenance/scheduled with 404
		// where EC2 answers an empty list; NTH's scheduled-event monitor
		// counts each 404 as an error and exits after five (10 s). With it
		// off NTH polls two paths every 2 s instead of three: its figure is
		// a little below what its defaults cost.
		"enableScheduledEventDraining": false,
	})
	if err != nil {
		b.Fatalf("rendering aws-node-termination-handler's chart: %v", err)
	}
	applyObjects(ctx, b, r.Objects)
	pod := waitDaemonSetPod(ctx, b, ns, nthImageTag, "")
	// NTH has no readiness probe, so Ready says only that it started: give
	// it the time to fail at its start (a bad configuration exits), and
	// show its log if it did.
	time.Sleep(15 * time.Second)
	now, err := suite.Kube.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if cs := now.Status.ContainerStatuses; len(cs) != 1 || cs[0].RestartCount > 0 || cs[0].State.Running == nil {
		b.Fatalf("aws-node-termination-handler did not keep running: %+v\n%s", cs, containerLogs(node, ns))
	}
	return &nthPod{ns: ns, name: pod.Name, pid: hostPID(b, "/node-termination-handler", string(pod.UID))}
}
