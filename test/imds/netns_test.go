package imds

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"lifeboat.dev/lifeboat/internal/drain"
	imdssrc "lifeboat.dev/lifeboat/internal/source/imds"
	"lifeboat.dev/lifeboat/test/testenv"
)

// TestChartDefaultsReadMetadataAtTheLinkLocalAddress: issue 22, "as
// shipped". The DaemonSet's container as the chart renders it with its
// defaults (mode imds and nothing else: no --imds-endpoint, no
// AWS_EC2_METADATA_SERVICE_ENDPOINT) runs inside a network namespace of
// its own, as on an EC2 instance whose pod is on the host network, where
// the metadata mock listens at the real address, 169.254.169.254 port 80.
// A Spot notice must cordon, taint and drain the node. On 609520a every
// poll failed "missing port in address" and the node was never cordoned.
//
// What the test adds to the chart's container: the kubeconfig (the
// process is not in a pod; its API server is reached through the veth
// pair) and the values of the downward API (node name, pod name and
// namespace). The binary is the suite's build (make test runs the suite
// with lifeboat and with lifeboat-imds, the chart's DaemonSet command).
func TestChartDefaultsReadMetadataAtTheLinkLocalAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := testenv.NewNetns(t)
	ns.AddAddress(t, "169.254.169.254/32")
	instanceID := testenv.RandomInstanceID()
	testenv.StartIMDSIn(t, ns, "169.254.169.254", 80, testenv.IMDSOptions{
		Scenario: testenv.IMDSSpot, After: 3 * time.Second, IMDSv2Only: true, InstanceID: instanceID})
	node := kube.Node(t, testenv.NodeSpec{InstanceID: instanceID}).Name
	podNS := kube.Namespace(t)
	own, err := kube.CreatePod(ctx, testenv.PodSpec{Namespace: podNS, Name: testenv.UniqueName("lifeboat"), Node: node, Grace: -1})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, ctx: ctx, node: node, ns: podNS, ownPod: own.Name}
	workload := w.pod(time.Second)

	args, env := chartDaemonSet(t, map[string]string{"spec.nodeName": node, "metadata.name": own.Name, "metadata.namespace": podNS})
	args = append(args, "--kubeconfig", ns.Kubeconfig(t, kube))
	bin, argv := ns.Command(lifeboatBin, args...)
	logDir := t.TempDir()
	p, err := testenv.StartProcess("lifeboat", bin, argv, env, logDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("---- lifeboat log, last 80 lines (%s) ----\n%s", filepath.Join(logDir, "lifeboat.log"), p.Tail(80))
		}
	})

	until := func(d time.Duration, what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for !cond() {
			if exited, err := p.Exited(); exited {
				t.Fatalf("lifeboat exited (%v) while waiting for %s", err, what)
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out after %v waiting for %s", d, what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	until(60*time.Second, "the node cordoned and tainted for the Spot notice", func() bool {
		n := w.nodeNow()
		v, ok := taintValue(n, taintSpot)
		return n.Spec.Unschedulable && ok && v == "spot-interruption" && n.Annotations[drain.AnnotationCordoned] == "true"
	})
	until(30*time.Second, "the workload evicted", func() bool { return !w.podExists(workload) })
	if !w.podExists(own.Name) {
		t.Error("lifeboat evicted its own pod")
	}
	if log := p.Tail(400); strings.Contains(log, "missing port") {
		t.Errorf("lifeboat's log reports a missing port:\n%s", log)
	}
}

// chartDaemonSet returns the arguments and environment of the container of
// the DaemonSet the chart renders with its defaults in IMDS mode, with the
// downward API's fields given by fields (fieldPath: value). A setting the
// test cannot reproduce fails t, as does one that names the metadata
// endpoint: the point is that none does.
func chartDaemonSet(t *testing.T, fields map[string]string) (args, env []string) {
	t.Helper()
	r, err := testenv.RenderChart("lifeboat", "lifeboat", map[string]any{"mode": "imds"})
	if err != nil {
		t.Fatal(err)
	}
	objs := r.Objects
	i := slices.IndexFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "DaemonSet" })
	if i < 0 {
		t.Fatal("the chart rendered no DaemonSet in imds mode")
	}
	var ds appsv1.DaemonSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[i].Object, &ds); err != nil {
		t.Fatal(err)
	}
	c := ds.Spec.Template.Spec.Containers[0]
	if len(c.Command) != 1 || !strings.HasPrefix(filepath.Base(c.Command[0]), "lifeboat") {
		t.Fatalf("the DaemonSet's command %q: want one lifeboat binary", c.Command)
	}
	for _, a := range c.Args {
		if strings.Contains(a, "imds-endpoint") {
			t.Fatalf("the chart's defaults set %s", a)
		}
	}
	for _, e := range c.Env {
		switch {
		case e.Name == imdssrc.EnvEndpoint || e.Name == imdssrc.EnvEndpointMode || e.Name == "LIFEBOAT_IMDS_ENDPOINT":
			t.Fatalf("the chart's defaults set %s", e.Name)
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && fields[e.ValueFrom.FieldRef.FieldPath] != "":
			env = append(env, e.Name+"="+fields[e.ValueFrom.FieldRef.FieldPath])
		default:
			t.Fatalf("the DaemonSet's env %s comes from %+v, which this test does not provide", e.Name, e.ValueFrom)
		}
	}
	// The test process's environment is lifeboat's too: the endpoint
	// variables must not leak in.
	for _, k := range []string{imdssrc.EnvEndpoint, imdssrc.EnvEndpointMode} {
		if os.Getenv(k) != "" {
			t.Fatalf("%s is set in the test's environment", k)
		}
	}
	return c.Args, env
}
