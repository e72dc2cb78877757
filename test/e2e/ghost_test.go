package e2e

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"lifeboat.dev/lifeboat/internal/route"
	"lifeboat.dev/lifeboat/test/testenv"
)

// A Node whose instance EC2 says is terminated and that nobody deletes (the
// cloud controller's stand-in here deletes only the nodes of instances the
// Auto Scaling simulator terminated; these are terminated behind its back)
// is a ghost: reported once the --ghost-node-after bound passed (Warning
// Event, lifeboat_ghost_nodes), and with --delete-ghost-nodes deleted
// unless it is Ready, which says a kubelet still reports under its name.
func TestGhostNodeReportedAndDeleted(t *testing.T) {
	h := newHarness(t, harnessOptions{flags: []string{"--ghost-node-after", "3s", "--delete-ghost-nodes"}})
	api := ec2.NewFromConfig(testenv.MotoAWSConfig(), func(o *ec2.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) })
	ids := h.CreateGroup("ghost-"+testenv.UniqueName("g"), 2)
	ready, dead := h.NodeName(ids[0]), h.NodeName(ids[1])
	for _, id := range ids {
		h.PutEvent(route.SourceEC2, route.SpotInterruption, time.Now(), map[string]string{"instance-id": id, "instance-action": "terminate"})
	}
	for _, node := range []string{ready, dead} {
		h.Eventually(20*time.Second, node+" drained", func() bool { return h.Node(node).Annotations["lifeboat.io/drained"] != "" })
	}
	// dead's kubelet is gone: kwok stops reporting it, and its Ready
	// condition is Unknown, as the node lifecycle controller would set it.
	if _, err := kube.Client.CoreV1().Nodes().Patch(h.Ctx, dead, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+testenv.KwokNodeAnnotation+`":null}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.Client.CoreV1().Nodes().Patch(h.Ctx, dead, types.StrategicMergePatchType,
		[]byte(`{"status":{"conditions":[{"type":"Ready","status":"Unknown","reason":"NodeStatusUnknown"}]}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	if _, err := api.TerminateInstances(h.Ctx, &ec2.TerminateInstancesInput{InstanceIds: ids}); err != nil {
		t.Fatal(err)
	}
	terminated := time.Now()
	for _, id := range ids {
		h.PutEvent(route.SourceEC2, route.StateChange, terminated, map[string]string{"instance-id": id, "state": "terminated"})
	}
	time.Sleep(2 * time.Second)
	for _, node := range []string{ready, dead} {
		if _, ok := h.LookupNode(node); !ok {
			t.Fatalf("%s gone before the --ghost-node-after bound: something else deletes the nodes here, the test shows nothing", node)
		}
	}
	h.Eventually(15*time.Second, "the ghost node that is not Ready deleted", func() bool { _, ok := h.LookupNode(dead); return !ok })
	t.Logf("deleted %v after the termination (bound 3 s from the event's time, which EventBridge gives in whole seconds; a look every 2 s)", time.Since(terminated).Round(100*time.Millisecond))
	h.Eventually(10*time.Second, "GhostNode Events on both nodes, GhostNodeDeleted on the deleted one", func() bool {
		return h.NodeEvents(ready, "GhostNode") == 1 && h.NodeEvents(dead, "GhostNode") == 1 && h.NodeEvents(dead, "GhostNodeDeleted") == 1
	})
	h.Eventually(10*time.Second, "lifeboat_ghost_nodes counting the Ready ghost", func() bool { return h.Metric("lifeboat_ghost_nodes", nil) == 1 })
	if _, ok := h.LookupNode(ready); !ok {
		t.Error("a Ready ghost node was deleted")
	}
	if got := h.NodeEvents(ready, "GhostNodeDeleted"); got != 0 {
		t.Errorf("GhostNodeDeleted Events on the Ready node: %d", got)
	}
}
