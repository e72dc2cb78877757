package deploy

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/test/testenv"
)

// The chart's FlowSchemas hold exactly lifeboat's node writes and its
// failover journal's ConfigMap requests (in the priority level the chart
// creates for them) and its Lease (in leader-election). The real binary, with the chart's ServiceAccount, roles and
// FlowSchemas and the Deployment's rendered settings, leads and drains a
// node on a Spot interruption (with terminatingCondition, so that a
// nodes/status patch is among the writes, and the failover journal, off
// by default, so that its requests are). The API server's count of
// requests it dispatched in <release>-node-writes equals the node GETs and
// PATCHes and the journal's ConfigMap requests lifeboat sent through a
// recording proxy, and the count in
// <release>-leader-election its Lease requests: nothing else of lifeboat's
// lands in them, and none of those lands elsewhere.
func TestFlowSchemas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	w, err := newWorld(t, ctx, map[string]any{"terminatingCondition": true, "leaderElection": map[string]any{"failoverJournal": true}})
	if err != nil {
		t.Fatal(err)
	}
	schemas := w.chart.find("FlowSchema")
	var names []string
	levelOf := map[string]string{} // FlowSchema -> its priority level
	for _, s := range schemas {
		names = append(names, s.GetName())
		levelOf[s.GetName()] = into[flowcontrolv1.FlowSchema](t, s).Spec.PriorityLevelConfiguration.Name
	}
	writes, lease := w.release+"-lifeboat-node-writes", w.release+"-lifeboat-leader-election"
	if got := strings.Join(names, ","); got != writes+","+lease {
		t.Fatalf("the chart renders the FlowSchemas %s; want %s,%s", got, writes, lease)
	}
	levels := w.chart.find("PriorityLevelConfiguration")
	if len(levels) != 1 || levels[0].GetName() != levelOf[writes] || levelOf[lease] != "leader-election" {
		t.Fatalf("the chart renders %d priority levels; want one, %s, the node writes' (and the Lease in leader-election, not %s)", len(levels), levelOf[writes], levelOf[lease])
	}
	applyForTest(t, append(append(w.rbacObjects(), levels...), schemas...))
	if err := testenv.WaitFlowSchemasInUse(ctx, kube.Client, names, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	before := dispatchedIn(ctx, t, levelOf)

	spotID := testenv.RandomInstanceID()
	node := kube.Node(t, testenv.NodeSpec{InstanceID: spotID}).Name
	pod, err := kube.CreatePod(ctx, testenv.PodSpec{Namespace: w.ns, Node: node, Grace: 10 * time.Second, ShutdownAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	kp := startProxy(t, kube.URL, kubeTransport(), true)
	kubeconfig, err := w.kubeconfig(kp.URL, kp.CA)
	if err != nil {
		t.Fatal(err)
	}
	p, err := w.startLifeboat(lifeboatOptions{name: w.release + "-0", kubeconfig: kubeconfig, endpoints: endpoints(moto.Endpoint, sim.Endpoint())})
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	leaseName := settings(w.container())["LEASE_NAME"]
	if err := eventually(ctx, 15*time.Second, "lifeboat to hold the Lease", func() (bool, error) {
		l, err := kube.Client.CoordinationV1().Leases(w.ns).Get(ctx, leaseName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, p.healthy()
		}
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == p.name, err
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.putSpot(spotID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := eventually(ctx, 30*time.Second, "the node cordoned, its pod evicted and the node marked drained", func() (bool, error) {
		if err := p.healthy(); err != nil {
			return false, err
		}
		n, err := kube.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, err = kube.Client.CoreV1().Pods(w.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return n.Spec.Unschedulable && apierrors.IsNotFound(err) && n.Annotations["lifeboat.io/drained"] != "", nil
	}); err != nil {
		t.Fatal(err)
	}
	p.stop() // every request lifeboat sends is answered, and counted, before the counts are read
	after := dispatchedIn(ctx, t, levelOf)

	want := map[string]float64{}
	var statusPatches, journal float64
	for _, c := range kp.snapshot() {
		if s := flowSchemaOf(c, w.ns, writes, lease); s != "" {
			want[s]++
			if c.method == http.MethodPatch && strings.HasSuffix(c.path, "/status") {
				statusPatches++
			}
			if strings.Contains(c.path, "/configmaps") {
				journal++
			}
		}
	}
	if want[writes] < 2 || want[lease] < 2 || statusPatches < 1 || journal < 2 {
		t.Fatalf("lifeboat sent %v node gets and patches (%v of them nodes/status) and journal requests (%v of them), %v Lease requests; want at least a cordon, the drained record, the condition, the journal read and written, and the Lease's create and a renewal",
			want[writes], statusPatches, journal, want[lease])
	}
	for _, name := range names {
		got := after[name] - before[name]
		t.Logf("FlowSchema %s: %v requests dispatched in priority level %s, lifeboat sent %v such", name, got, levelOf[name], want[name])
		if got != want[name] {
			t.Errorf("FlowSchema %s dispatched %v requests in priority level %s; lifeboat sent %v that it matches", name, got, levelOf[name], want[name])
		}
	}
}

// flowSchemaOf names the chart's FlowSchema a Kubernetes request through
// the proxy belongs in by its method and path: writes for a GET or PATCH
// of one node (or its status) and for a ConfigMap request in the release
// namespace ns (the failover journal), lease for a Lease request in ns; ""
// for every other.
func flowSchemaOf(c call, ns, writes, lease string) string {
	parts := strings.Split(strings.Trim(c.path, "/"), "/")
	switch {
	case c.action != "":
		return ""
	case len(parts) >= 4 && len(parts) <= 5 && parts[0] == "api" && parts[2] == "nodes" &&
		(c.method == http.MethodGet || c.method == http.MethodPatch) && (len(parts) == 4 || parts[4] == "status"):
		return writes
	case strings.HasPrefix(c.path, "/api/v1/namespaces/"+ns+"/configmaps"):
		return writes
	case strings.HasPrefix(c.path, "/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases"):
		return lease
	}
	return ""
}

// dispatchedIn reads the API server's apiserver_flowcontrol_dispatched_requests_total
// of each FlowSchema in levelOf, in the priority level it names.
func dispatchedIn(ctx context.Context, t *testing.T, levelOf map[string]string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for s, level := range levelOf {
		v, err := kube.APIMetricSum(ctx, "apiserver_flowcontrol_dispatched_requests_total", map[string]string{"flow_schema": s, "priority_level": level})
		if err != nil {
			t.Fatal(err)
		}
		out[s] = v
	}
	return out
}
