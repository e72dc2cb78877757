package e2e

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"lifeboat.dev/lifeboat/internal/route"
	"lifeboat.dev/lifeboat/test/testenv"
)

const outOfServiceTaint = "node.kubernetes.io/out-of-service"

// --out-of-service-taint adds node.kubernetes.io/out-of-service only once
// EC2 says the instance has shut down: Kubernetes force-deletes the pods of
// a tainted node and detaches their volumes, which is safe only on a node
// that no longer runs. Two Spot "stop" interruptions: both nodes are
// drained while their instances (moto's) still run, and no taint may
// appear then; then both instances stop. One is told by the state-change
// notification on the queue (tainted within seconds), the other by
// nothing: lifeboat's DescribeInstances of the nodes it drained sees it
// stopped. When both run again, the taints go.
func TestOutOfServiceOnlyOnConfirmedShutdown(t *testing.T) {
	h := newHarness(t, harnessOptions{flags: []string{"--out-of-service-taint"}})
	api := ec2.NewFromConfig(testenv.MotoAWSConfig(), func(o *ec2.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) })
	ids := h.CreateGroup("oos-"+testenv.UniqueName("g"), 2)
	told, silent := ids[0], ids[1]
	ns := kube.Namespace(t)
	for _, id := range ids {
		if _, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: h.NodeName(id), ShutdownAfter: time.Second}); err != nil {
			t.Fatal(err)
		}
		h.PutEvent(route.SourceEC2, route.SpotInterruption, time.Now(), map[string]string{"instance-id": id, "instance-action": "stop"})
	}
	for _, id := range ids {
		h.Eventually(20*time.Second, h.NodeName(id)+" drained", func() bool {
			return h.Node(h.NodeName(id)).Annotations["lifeboat.io/drained"] != ""
		})
	}
	// The instances still run: the nodes must not say they have shut down.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for _, id := range ids {
			if n := h.Node(h.NodeName(id)); testenv.HasTaint(n, outOfServiceTaint) {
				t.Fatalf("%s tainted %s while its instance %s is running", n.Name, outOfServiceTaint, id)
			}
		}
	}

	if _, err := api.StopInstances(h.Ctx, &ec2.StopInstancesInput{InstanceIds: ids}); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	h.PutEvent(route.SourceEC2, route.StateChange, stopped, map[string]string{"instance-id": told, "state": "stopped"})
	h.Eventually(10*time.Second, "the out-of-service taint on the node whose stop the queue told", func() bool {
		n := h.Node(h.NodeName(told))
		return taintEffect(n, outOfServiceTaint) == "NoExecute" && n.Annotations["lifeboat.io/out-of-service"] == "true"
	})
	h.Eventually(45*time.Second, "the out-of-service taint on the node whose stop only DescribeInstances shows", func() bool {
		return testenv.HasTaint(h.Node(h.NodeName(silent)), outOfServiceTaint)
	})
	t.Logf("tainted %v after the stop without a notification", time.Since(stopped).Round(time.Second))
	if got := h.NodeEvents(h.NodeName(told), "OutOfServiceTainted"); got != 1 {
		t.Errorf("OutOfServiceTainted Events = %d, want 1", got)
	}

	if _, err := api.StartInstances(h.Ctx, &ec2.StartInstancesInput{InstanceIds: ids}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		h.Eventually(45*time.Second, "the out-of-service taint removed from "+h.NodeName(id)+" once its instance runs again", func() bool {
			n := h.Node(h.NodeName(id))
			_, noted := n.Annotations["lifeboat.io/out-of-service"]
			return !testenv.HasTaint(n, outOfServiceTaint) && !noted
		})
	}
	if got := h.NodeEvents(h.NodeName(told), "OutOfServiceRemoved"); got != 1 {
		t.Errorf("OutOfServiceRemoved Events = %d, want 1", got)
	}
}
