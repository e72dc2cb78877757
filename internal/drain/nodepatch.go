package drain

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	// The JSON merge patch library client-go and the API server use.
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

// modify is every read-modify-write lifeboat makes to a Node. mutate
// changes a copy of the node as read and reports whether it changed it;
// only what it changed is sent, as a JSON merge patch that carries the
// read's resourceVersion. So:
//   - the decision is taken on the object written: if the node changed
//     since it was read (a stale cache, another writer), the API server
//     answers 409 Conflict and mutate decides again on a fresh read;
//   - fields this client does not know (newer than its k8s.io/api) are
//     never sent, so they survive, where a full-object PUT would drop them.
//
// The first read is the informer cache's when there is one (no GET), so a
// write costs one request when the cache is current, as an update did.
func (d *Drainer) modify(ctx context.Context, node, what string, mutate func(n *corev1.Node) bool) (bool, error) {
	changed := false
	first := true
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		n, err := d.readNode(ctx, node, first)
		first = false
		if err != nil {
			return err
		}
		orig := n.DeepCopy()
		changed = mutate(n)
		if !changed || d.dryRun {
			return nil
		}
		patch, err := nodePatch(orig, n)
		if err != nil {
			return err
		}
		written, err := d.nodes.Nodes().Patch(ctx, node, mergePatch, patch, metav1.PatchOptions{})
		if err == nil && d.cache != nil {
			d.written.put(written)
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return false, fmt.Errorf("%s node %s: %w: %w", what, node, ErrNodeGone, err)
	}
	if err != nil {
		return false, fmt.Errorf("%s node %s: %w", what, node, err)
	}
	return changed, nil
}

// nodePatch returns the JSON merge patch from orig to modified, with orig's
// resourceVersion as its precondition.
func nodePatch(orig, modified *corev1.Node) ([]byte, error) {
	a, err := json.Marshal(orig)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(modified)
	if err != nil {
		return nil, err
	}
	diff, err := jsonpatch.CreateMergePatch(a, b)
	if err != nil {
		return nil, fmt.Errorf("node patch: %w", err)
	}
	if orig.ResourceVersion == "" {
		return diff, nil
	}
	var p map[string]any
	if err := json.Unmarshal(diff, &p); err != nil {
		return nil, err
	}
	meta, _ := p["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		p["metadata"] = meta
	}
	meta["resourceVersion"] = orig.ResourceVersion
	return json.Marshal(p)
}
