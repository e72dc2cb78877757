package drain

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Replacer gets a replacement Ready on another node before the eviction
// of a pod whose Deployment would otherwise lose its last ready replica
// (internal/replace). ForNode is called once per drain with the pods it
// evicts; the drain calls what it returns before each eviction, and it
// returns once the pod may be evicted. evictBy is the latest moment a
// pod's eviction may begin and still give it its grace period before
// the deadline (zero: no deadline).
type Replacer interface {
	ForNode(node string, pods []corev1.Pod, evictBy func(*corev1.Pod) time.Time) func(context.Context, *corev1.Pod)
}

// beforeEvict is what runs before each eviction of the drain of node:
// Options.Replacer's, or nothing.
func (d *Drainer) beforeEvict(node string, pods []corev1.Pod, dl Deadline) func(context.Context, *corev1.Pod) {
	if d.replacer == nil {
		return func(context.Context, *corev1.Pod) {}
	}
	return d.replacer.ForNode(node, pods, func(p *corev1.Pod) time.Time {
		if dl.At.IsZero() {
			return time.Time{}
		}
		return dl.At.Add(-d.margin - EvictionGrace(p, d.acts.PodGrace))
	})
}
