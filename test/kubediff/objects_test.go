package kubediff

import (
	"context"
	"regexp"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// testLabel marks what a test created, so that its lists see only that.
const testLabel = "lifeboat.test/kubediff"

var labelValue = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// node creates a plain Node (no kubelet, no kwok: nobody else writes it)
// labelled for the test, deleted in t's cleanup.
func node(t *testing.T, name, group string) *corev1.Node {
	t.Helper()
	ctx, cancel := contextTimeout(opTimeout)
	defer cancel()
	group = labelValue.ReplaceAllString(group, "-")
	n, err := env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{testLabel: group}, Annotations: map[string]string{"a": "1"}},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0123456789abcdef0"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating node %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := contextTimeout(opTimeout)
		defer cancel()
		if err := env.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting node %s: %v", name, err)
		}
	})
	return n
}

// pod creates a pod bound to nodeName (it stays Pending: no kubelet).
func pod(t *testing.T, ns, name, nodeName string, labels map[string]string) *corev1.Pod {
	t.Helper()
	ctx, cancel := contextTimeout(opTimeout)
	defer cancel()
	p, err := env.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:                      nodeName,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			Containers:                    []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, name, err)
	}
	return p
}

// pdb creates a PodDisruptionBudget over the pods labelled sel with
// minAvailable 1 and waits until the disruption controller allows no
// disruption (its status is what the eviction checks).
func pdb(t *testing.T, ns, name string, sel map[string]string) {
	t.Helper()
	ctx, cancel := contextTimeout(time.Minute)
	defer cancel()
	_, err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:     &metav1.LabelSelector{MatchLabels: sel},
			MinAvailable: ptr.To(intstr.FromInt32(1)),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating PodDisruptionBudget %s/%s: %v", ns, name, err)
	}
	var last *policyv1.PodDisruptionBudget
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		last = p
		return err == nil && p.Status.ObservedGeneration >= p.Generation && p.Status.ExpectedPods == 1, err
	})
	if err != nil {
		t.Fatalf("waiting for the disruption controller to process %s/%s (last %+v): %v", ns, name, last, err)
	}
}
