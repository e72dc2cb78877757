package volumes

import (
	"context"
	"slices"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func va(name, node string) *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.VolumeAttachmentSpec{NodeName: node, Attacher: "ebs.csi.aws.com"}}
}

// A node's attachments are listed until they are deleted; other nodes'
// never are.
func TestOnNodeFollowsTheAPI(t *testing.T) {
	client := fake.NewClientset(va("a1", "node-a"), va("a2", "node-a"), va("b1", "node-b"))
	a := New(client, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.Run(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for !a.Synced() {
		if time.Now().After(deadline) {
			t.Fatal("cache never synced")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := a.OnNode("node-a"); !slices.Equal(got, []string{"a1", "a2"}) {
		t.Errorf("OnNode(node-a) = %v, want [a1 a2]", got)
	}
	for _, name := range []string{"a1", "a2"} {
		if err := client.StorageV1().VolumeAttachments().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for len(a.OnNode("node-a")) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("OnNode(node-a) = %v after the deletes", a.OnNode("node-a"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := a.OnNode("node-b"); !slices.Equal(got, []string{"b1"}) {
		t.Errorf("OnNode(node-b) = %v, want [b1]", got)
	}
}
