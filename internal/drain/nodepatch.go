package drain

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

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
	return d.modifyFrom(ctx, node, what, true, mutate)
}

// modifyFrom is modify; cached false reads the node from the API server
// on the first attempt too: for a change that may decide to write
// nothing, which no conflict would correct if it were decided on a stale
// copy.
func (d *Drainer) modifyFrom(ctx context.Context, node, what string, cached bool, mutate func(n *corev1.Node) bool) (bool, error) {
	changed := false
	first := cached
	err := retryOnConflict(ctx, func() error {
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

// conflictTries bounds the tries of a node write refused with 409 Conflict
// (kubelet status, other controllers, parallel cordons); the pause between
// tries doubles from 10 ms up to a second, jittered. client-go's
// retry.DefaultBackoff gives up after 4 tries in ~50 ms, and a wait.Backoff
// with a Cap stops at the cap: a controller updating the node in a tight
// loop refused every try of that for ~4.5 s in test/fault. Thirty tries
// keep at it for ~25 s of continuous contention; then the step's own retry
// takes over. The pauses are wall time, as the contention is.
const conflictTries = 30

func retryOnConflict(ctx context.Context, write func() error) error {
	pause := 10 * time.Millisecond
	for try := 1; ; try++ {
		err := write()
		if !apierrors.IsConflict(err) || try == conflictTries {
			return err
		}
		t := time.NewTimer(wait.Jitter(pause, 0.5))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		pause = min(2*pause, time.Second)
	}
}
