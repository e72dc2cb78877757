package realnode

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/test/testenv"
)

// TestChartDeploymentOnRealNodes is seed 004 (F5) in queue mode with
// lifeboat as real pods: the chart's Deployment (two replicas, leader
// election, in-cluster configuration from a real service-account token,
// the chart's own RBAC, pod network — no host network) runs lifeboat's own
// image on one real node; `helm upgrade` to a new image tag completes on
// that single node (new pods Running and Ready, old ones gone, nothing
// Pending), the Lease passes to a new pod, and that pod then handles seed
// 002 on a second real node: a Spot interruption through EventBridge, the
// workload's preStop and SIGTERM handler run to their end before the power
// off.
//
// The pods reach the API server, moto and the Auto Scaling simulator (all
// on the host's loopback) through testenv.PodReach, on their node's bridge
// gateway.
func TestChartDeploymentOnRealNodes(t *testing.T) {
	w := newWorld(t, worldOptions{})
	ctl := w.CreateGroup("ctl", 1)[0]
	spot := w.CreateGroup("spot", 1)[0]
	node := w.machines.Node(ctl)
	if node == nil {
		t.Fatalf("instance %s of group ctl has no real node", ctl)
	}
	ctx, cancel := context.WithTimeout(w.Ctx, 4*time.Minute)
	defer cancel()
	values := w.queueChartValues(ctx, t, node, "", "1.0.0", "1.1.0")
	ns := suite.Kube.Namespace(t)
	applyObjects(ctx, t, renderChart(t, "lifeboat", ns, values("1.0.0")))
	old := waitLifeboatPods(ctx, t, ns, "1.0.0", 2, nil)
	holder := waitLeaseHolder(ctx, t, ns, old)
	t.Logf("lifeboat 1.0.0: %d pods Running on %s, leader %s", len(old), node.Name, holder)

	start := time.Now()
	applyObjects(ctx, t, renderChart(t, "lifeboat", ns, values("1.1.0")))
	upgraded := waitLifeboatPods(ctx, t, ns, "1.1.0", 2, old)
	holder = waitLeaseHolder(ctx, t, ns, upgraded)
	t.Logf("upgrade to 1.1.0 rolled out on the one node in %v; leader %s", time.Since(start).Round(time.Millisecond), holder)

	pod := w.workload("spot-job", spot, 3*time.Second, 3*time.Second, 30*time.Second)
	startWorkloads(w.Ctx, t, pod)
	sent := time.Now()
	w.PutEvent("aws.ec2", "EC2 Spot Instance Interruption Warning", sent, map[string]string{"instance-id": spot, "instance-action": "terminate"})
	time.Sleep(time.Until(sent.Add(spotDeadline)))
	w.terminate(spot)
	off, _ := w.machines.PoweredOff(spot)
	rec := readRecord(t, pod)
	t.Logf("record: %s; powered off %.2fs after the notice", rec, off.Sub(sent).Seconds())
	assertGracefulShutdown(t, rec, pod)
	if exit, ok := rec.At(testenv.WorkloadExit); ok && !exit.Before(off) {
		t.Errorf("the process exited at %v, not before the power-off at %v", exit, off)
	}
}

// queueChartValues builds lifeboat's image at each tag and imports it into
// node; it returns the chart's values for a tag: the defaults (queue mode
// among them) but for the image, the cluster name, the queue URL, a
// nodeSelector that keeps the pods on node, and what the pods need to
// reach the testbed's loopback services from there (the AWS endpoints and
// the API server's address, through testenv.PodReach). sqs, when not "",
// is the SQS endpoint as the pods dial it, instead of moto's.
func (w *world) queueChartValues(ctx context.Context, t *testing.T, node *testenv.RealNode, sqs string, tags ...string) func(tag string) map[string]any {
	t.Helper()
	dir := t.TempDir()
	for _, tag := range tags {
		p, err := testenv.BuildLifeboatImage(dir, tag)
		if err != nil {
			t.Fatal(err)
		}
		if err := node.ImportImage(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	api, err := url.Parse(suite.Kube.URL)
	if err != nil {
		t.Fatal(err)
	}
	reach := func(endpoint string) string { // a loopback URL as the pods dial it
		u, err := url.Parse(endpoint)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = testenv.PodReach(t, node, u.Host)
		return strings.TrimSuffix(u.String(), "/")
	}
	apiAddr := testenv.PodReach(t, node, api.Host)
	apiHost, apiPort, _ := strings.Cut(apiAddr, ":")
	moto, sim := reach(suite.Moto.Endpoint), reach(w.Sim.Endpoint())
	if sqs == "" {
		sqs = moto
	}
	return func(tag string) map[string]any {
		env := []any{
			// No kube-proxy on the testbed: the in-cluster configuration
			// reaches the API server directly, not through its Service.
			map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": apiHost},
			map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": apiPort},
		}
		for _, kv := range testenv.AWSEnv() {
			k, v, _ := strings.Cut(kv, "=")
			env = append(env, map[string]any{"name": k, "value": v})
		}
		return map[string]any{
			"image":        map[string]any{"repository": testenv.LifeboatImageRepository, "tag": tag, "pullPolicy": "Never"},
			"queueURL":     w.Stack.QueueURL,
			"awsRegion":    "us-east-1",
			"awsEndpoint":  "sqs=" + sqs + ",ec2=" + moto + ",eventbridge=" + moto + ",sts=" + moto + ",autoscaling=" + sim,
			"clusterName":  clusterName,
			"nodeSelector": map[string]any{"kubernetes.io/hostname": node.Name},
			"extraEnv":     env,
		}
	}
}

// waitLifeboatPods waits until the namespace holds exactly n lifeboat
// pods, each running the image tag, Running and Ready, none of them in
// gone and none Pending; it returns their names.
func waitLifeboatPods(ctx context.Context, t *testing.T, ns, tag string, n int, gone []string) []string {
	t.Helper()
	var names, last []string
	eventually(ctx, t, 2*time.Minute, "the lifeboat pods with tag "+tag, func() bool {
		pods, err := suite.Kube.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		names, last = names[:0], last[:0]
		ok := len(pods.Items) == n
		for _, p := range pods.Items {
			last = append(last, p.Name+" "+p.Spec.Containers[0].Image+" "+string(p.Status.Phase))
			names = append(names, p.Name)
			ok = ok && !slices.Contains(gone, p.Name) && strings.HasSuffix(p.Spec.Containers[0].Image, ":"+tag) &&
				p.Status.Phase == corev1.PodRunning && testenv.PodReady(&p)
		}
		return ok
	})
	t.Logf("pods: %v", last)
	return names
}

// waitLeaseHolder waits until the leader Lease in ns is held by one of
// pods and returns the holder.
func waitLeaseHolder(ctx context.Context, t *testing.T, ns string, pods []string) string {
	t.Helper()
	var holder string
	eventually(ctx, t, time.Minute, "a Lease held by one of "+strings.Join(pods, ", "), func() bool {
		leases, err := suite.Kube.Client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, l := range leases.Items {
			// lifeboat's identity is its pod's name
			if h := l.Spec.HolderIdentity; h != nil && slices.Contains(pods, *h) {
				holder = *h
				return true
			}
		}
		return false
	})
	return holder
}
