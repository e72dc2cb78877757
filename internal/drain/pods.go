package drain

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedpolicyv1 "k8s.io/client-go/kubernetes/typed/policy/v1"
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

// ForecastSource reads what the drain forecast needs about a node: the
// pods a drain would evict and the cluster's PodDisruptionBudgets.
type ForecastSource struct {
	Drainer *Drainer
	PDBs    typedpolicyv1.PodDisruptionBudgetsGetter
}

// ForecastInputs lists the node's pods to evict and every budget (one
// cluster-wide list: the pods may be in any namespace).
func (s ForecastSource) ForecastInputs(ctx context.Context, node string) ([]corev1.Pod, []policyv1.PodDisruptionBudget, error) {
	pods, err := s.Drainer.PodsToEvict(ctx, node)
	if err != nil {
		return nil, nil, err
	}
	list, err := s.PDBs.PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing PodDisruptionBudgets: %w", err)
	}
	return pods, list.Items, nil
}

// Evictable reports whether a drain removes the pod: not a mirror pod, not
// owned by a DaemonSet, not finished.
func Evictable(p *corev1.Pod) bool { return evictable(p) }
