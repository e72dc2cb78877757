package e2e

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"lifeboat.dev/lifeboat/internal/route"
	"lifeboat.dev/lifeboat/test/testenv"
)

// CHECK_TAG_BEFORE_DRAINING=true (NTH's default tag): of two nodes of the
// cluster interrupted at once, only the one whose instance carries the tag
// (in moto's EC2) is cordoned; the other's message is handed back
// (--unknown-instance=leave) and its node left alone.
func TestNTHManagedTag(t *testing.T) {
	h := newHarness(t, harnessOptions{env: []string{"CHECK_TAG_BEFORE_DRAINING=true"}})
	ids := h.CreateGroup("tag-"+testenv.UniqueName("g"), 2)
	tagged, untagged := ids[0], ids[1]
	api := ec2.NewFromConfig(testenv.MotoAWSConfig(), func(o *ec2.Options) { o.BaseEndpoint = aws.String(moto.Endpoint) })
	if _, err := api.CreateTags(h.Ctx, &ec2.CreateTagsInput{Resources: []string{tagged},
		Tags: []ec2types.Tag{{Key: aws.String("aws-node-termination-handler/managed"), Value: aws.String("")}}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		h.PutEvent(route.SourceEC2, route.SpotInterruption, time.Now(), map[string]string{"instance-id": id, "instance-action": "terminate"})
	}
	h.Eventually(10*time.Second, "the tagged node cordoned", func() bool {
		n := h.Node(h.NodeName(tagged))
		return n.Spec.Unschedulable && testenv.HasTaint(n, "lifeboat.io/spot-interruption")
	})
	// The untagged node's message has been received (and handed back) by
	// now, at least once: it is still schedulable a while later.
	time.Sleep(3 * time.Second)
	if n := h.Node(h.NodeName(untagged)); n.Spec.Unschedulable || testenv.HasTaint(n, "lifeboat.io/spot-interruption") {
		t.Error("the node without the managed tag was cordoned")
	}
	if h.NodeEvents(h.NodeName(untagged), "Cordoned") != 0 {
		t.Error("a Cordoned Event on the node without the managed tag")
	}
	if h.QueueEmpty() {
		t.Error("queue empty: the untagged node's message was deleted, want it handed back for its owner (--unknown-instance=leave)")
	}
}
