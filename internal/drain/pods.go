package drain

import (
	"context"

	corev1 "k8s.io/api/core/v1"
)

// PodsToEvict returns the node's pods a drain would evict now (the same
// list and filter Drain uses), for the drain forecast.
func (d *Drainer) PodsToEvict(ctx context.Context, node string) ([]corev1.Pod, error) {
	pods, _, err := d.podsToEvict(ctx, node)
	return pods, err
}

// Order splits pods into the groups Drain evicts one after the other:
// ordinary pods first, system-critical pods last (empty groups left out).
// A group starts once every pod of the one before it is gone.
func Order(pods []corev1.Pod) [][]corev1.Pod { return priorityGroups(pods) }
