// Package podnotice hands AWS's deadline to the workload: before a drain's
// first eviction, each pod it is about to evict gets the annotations
// lifeboat.io/deadline and lifeboat.io/reason, which a downward-API volume
// shows to the process while it runs (docs/events.md, "The deadline,
// handed to the workload").
//
// It is a courtesy to the workload, never a condition of the drain: a
// write that fails (a 403 because pods patch was not granted, a pod gone)
// is counted and reported once, and the whole step is bounded by Bound so
// that a pod's shutdown never waits on its annotation.
package podnotice

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"lifeboat.dev/lifeboat/internal/kube"
)

// The annotations a pod about to be evicted carries.
const (
	// AnnotationDeadline is when AWS acts on the instance (RFC 3339, UTC):
	// the deadline AWS announced, not the earlier one lifeboat drains to.
	AnnotationDeadline = "lifeboat.io/deadline"
	// AnnotationReason is what the node is drained for (an event kind:
	// spot-interruption, lifecycle-terminate, ...).
	AnnotationReason = "lifeboat.io/reason"
)

// Bound is the longest the annotations may hold up a drain's first
// eviction: pods not written by then are left as they are.
const Bound = 2 * time.Second

// Lead is how long after the annotations were sent a drain that wrote
// any evicts first (within Bound: the writes count against it). The
// kubelet rewrites a downward-API file on its own schedule after it sees
// the change (its volume reconciler runs every 100 ms); an eviction right
// behind the patch has the pod's SIGTERM race the file.
const Lead = Bound

// Notice is what the pods are told.
type Notice struct {
	// Deadline is AWS's deadline (zero: none known; no deadline annotation).
	Deadline time.Time
	// Reason is the plan's reason.
	Reason string
}

// Annotations returns the annotations n gives a pod (a value "" removes
// the annotation: a pod told of a deadline no longer known).
func (n Notice) Annotations() map[string]string {
	dl := ""
	if !n.Deadline.IsZero() {
		dl = n.Deadline.UTC().Format(time.RFC3339)
	}
	return map[string]string{AnnotationDeadline: dl, AnnotationReason: n.Reason}
}

// Result is what Annotate did.
type Result struct {
	// Written pods were patched; Unchanged already carried the notice.
	Written, Unchanged int
	// Failed pods were not patched (Gone: no longer there, not a failure).
	Failed, Gone int
	// Err is the first failure (nil: none).
	Err error
}

// Annotate writes n on each pod that does not carry it already: one JSON
// merge patch per pod, at most parallel at a time. It returns after Bound
// at most: writes not answered by then are counted failed and left to
// end on their own.
func Annotate(ctx context.Context, client kube.Client, pods []corev1.Pod, n Notice, parallel int) Result {
	ctx, cancel := context.WithTimeout(ctx, Bound)
	defer cancel()
	want := n.Annotations()
	var res Result
	answers := make(chan error, len(pods))
	sent := 0
	sem := make(chan struct{}, max(parallel, 1))
	for i := range pods {
		patch := patchFor(&pods[i], want)
		if patch == nil {
			res.Unchanged++
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			res.count(ctx.Err())
			continue
		}
		sent++
		go func(p *corev1.Pod) {
			defer func() { <-sem }()
			_, err := client.Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{})
			answers <- err
		}(&pods[i])
	}
	for ; sent > 0; sent-- {
		select {
		case err := <-answers:
			res.count(err)
		case <-ctx.Done():
			for ; sent > 0; sent-- {
				res.count(ctx.Err())
			}
			return res
		}
	}
	return res
}

func (r *Result) count(err error) {
	switch {
	case err == nil:
		r.Written++
	case apierrors.IsNotFound(err):
		r.Gone++
	default:
		r.Failed++
		if r.Err == nil {
			r.Err = err
		}
	}
}

// patchFor returns the merge patch that gives p the annotations want
// (value "": removed), or nil when p carries them already.
func patchFor(p *corev1.Pod, want map[string]string) []byte {
	m := map[string]any{}
	for k, v := range want {
		cur, ok := p.Annotations[k]
		switch {
		case v == "" && ok:
			m[k] = nil
		case v != "" && cur != v:
			m[k] = v
		}
	}
	if len(m) == 0 {
		return nil
	}
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": m}})
	if err != nil {
		return nil // a map of strings always marshals
	}
	return b
}
