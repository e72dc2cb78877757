package drain

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DeleteNode deletes the Node object named node if its UID is still uid,
// so that a node registered again under the same name is never deleted.
// A node already gone is no error. Only a ghost node is deleted: a Node
// left behind by an instance EC2 said is terminated (package outofservice
// decides).
func (d *Drainer) DeleteNode(ctx context.Context, node string, uid types.UID) error {
	if d.dryRun {
		return nil
	}
	err := d.nodes.Nodes().Delete(ctx, node, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting node %s: %w", node, err)
	}
	return nil
}
