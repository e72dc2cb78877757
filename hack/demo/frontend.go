package main

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"lifeboat.dev/lifeboat/test/testenv"
)

// frontend is the Spot scene's Deployment with a single replica: the
// workload lifeboat's --replacement-first is for (docs/replacement-first.md).
// Its pod is a real process on the real node, created by the Deployment
// controller and placed by the scheduler: its template requires a node of
// the Spot or the on-demand group, and the on-demand group is empty when
// the scene begins. On the notice lifeboat restarts its rollout; the new
// pod is Pending until the demo, playing the cluster autoscaler, scales
// the on-demand group out, and the old pod goes only once the new one is
// Ready there. The checkout and worker pods are a ReplicaSet's without a
// Deployment: replacement first does not apply to them (it reads their
// ReplicaSet, finds no Deployment, and evicts them as before).
const frontend = "frontend"

// frontendLabels select the frontend's pods.
var frontendLabels = map[string]string{"app": frontend}

// createFrontend creates the frontend Deployment and waits until its pod
// runs on node and its workload has recorded that it is ready.
func (d *demo) createFrontend(ctx context.Context, node string) error {
	// Each pod records under its own name (the Deployment names them).
	dep := testenv.WorkloadDeployment(testenv.WorkloadSpec{Namespace: nsShop, Name: frontend, RecordDir: d.recordDir(),
		PreStop: 2 * time.Second, Shutdown: 2 * time.Second, Grace: 30 * time.Second, Labels: frontendLabels}, 1)
	dep.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: groupLabel, Operator: corev1.NodeSelectorOpIn,
				Values: []string{groupSpot, groupOnDemand}}},
		}}},
	}}
	// A new pod first, the old one removed once it is Ready: what
	// replacement first needs (maxUnavailable 0).
	zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
	dep.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &zero, MaxSurge: &one}}
	if _, err := d.env.Client.AppsV1().Deployments(nsShop).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Deployment %s/%s: %w", nsShop, frontend, err)
	}
	return d.tl.waitFor(ctx, sceneTimeout, "Deployment "+frontend+"'s pod Running on the real node and its workload ready", func(ctx context.Context) (bool, error) {
		p, err := d.frontendPod(ctx, func(p *corev1.Pod) bool { return p.Spec.NodeName == node && testenv.PodReady(p) })
		if err != nil || p == nil {
			return false, err
		}
		rec, err := testenv.ReadWorkloadRecord(d.recordDir(), nsShop, p.Name)
		return rec.Count(testenv.WorkloadReady) > 0, err
	})
}

// frontendPod returns a pod of the frontend that ok accepts, or nil.
func (d *demo) frontendPod(ctx context.Context, ok func(*corev1.Pod) bool) (*corev1.Pod, error) {
	list, err := d.env.Client.CoreV1().Pods(nsShop).List(ctx, metav1.ListOptions{LabelSelector: "app=" + frontend})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of %s: %w", frontend, err)
	}
	for i := range list.Items {
		if ok(&list.Items[i]) {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

// frontendSummary is the Spot scene's line on the frontend: when its
// replacement was Ready, on which node, against when the old pod's
// deletion began (lifeboat's eviction, or the rollout scaling the old
// ReplicaSet down, whichever came first), from the timeline's facts.
func (d *demo) frontendSummary(ctx context.Context, old, node string) (string, error) {
	repl, err := d.frontendPod(ctx, func(p *corev1.Pod) bool {
		return p.Name != old && p.Spec.NodeName != "" && p.Spec.NodeName != node && p.DeletionTimestamp == nil
	})
	if err != nil {
		return "", err
	}
	if repl == nil {
		return "", fmt.Errorf("no replacement of %s's pod %s on another node", frontend, old)
	}
	ready, ok := d.tl.first(sceneSpot, stepPodReady, "pod "+repl.Name)
	if !ok {
		return "", fmt.Errorf("the timeline never saw %s's replacement %s Ready", frontend, repl.Name)
	}
	evicted, ok := d.tl.first(sceneSpot, stepEvicting, "pod "+old)
	if !ok {
		return "", fmt.Errorf("the timeline never saw %s's old pod %s evicted", frontend, old)
	}
	if !ready.Before(evicted) {
		return "", fmt.Errorf("%s: its old pod %s was evicted %s before its replacement %s was Ready: 0 ready replicas in between",
			frontend, old, ready.Sub(evicted).Round(100*time.Millisecond), repl.Name)
	}
	// lifeboat evicts the old pod once it sees the replacement Ready (it
	// looks every second); the rollout, scaling the old ReplicaSet down
	// as soon as the new pod is Ready, often removes it first.
	by := "evicted by lifeboat after ReplacementReady"
	if replaced, ok := d.tl.first(sceneSpot, stepReplaced, "lifeboat"); !ok || evicted.Before(replaced) {
		by = "removed by the rollout, before lifeboat's ReplacementReady"
	}
	return fmt.Sprintf("%s: its replacement %s was Ready on %s %s before the old pod's eviction (%s): never 0 ready replicas (--replacement-first)",
		frontend, repl.Name, shortNode(repl.Spec.NodeName), evicted.Sub(ready).Round(10*time.Millisecond), by), nil
}
