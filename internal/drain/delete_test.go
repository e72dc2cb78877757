package drain_test

import (
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/test/testenv"
)

// DeleteNode deletes a ghost node only while it has the UID lifeboat
// judged (a node registered again under the name is another), and a node
// already gone is no error; in dry run it deletes nothing.
func TestDeleteNodeOnlyWithItsUID(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, time.Minute)
	n := env.Node(t, testenv.NodeSpec{})
	d := newDrainer(drain.Options{})
	if err := d.DeleteNode(ctx, n.Name, types.UID("0b1d0000-0000-0000-0000-000000000000")); !apierrors.IsConflict(err) {
		t.Fatalf("deletion with another UID: %v, want a Conflict", err)
	}
	if err := newDrainer(drain.Options{DryRun: true}).DeleteNode(ctx, n.Name, n.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the node after a refused and a dry-run deletion: %v", err)
	}
	if err := d.DeleteNode(ctx, n.Name, n.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the node after its deletion: %v, want NotFound", err)
	}
	if err := d.DeleteNode(ctx, n.Name, n.UID); err != nil {
		t.Fatalf("deleting a node already gone: %v, want nil", err)
	}
}
