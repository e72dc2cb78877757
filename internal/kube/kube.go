// Package kube is the part of the Kubernetes API lifeboat talks to: nodes,
// pods (with their eviction subresource), PodDisruptionBudgets and Events,
// as narrow interfaces, and REST, their implementation over client-go's
// REST client with a scheme of core/v1 and policy/v1 only.
//
// Why not client-go's clientset: its typed clients import
// k8s.io/client-go/kubernetes/scheme, which registers every API group
// (57 packages of k8s.io/api), and the clientset links discovery and its
// OpenAPI models. A DaemonSet pod on every node pays for what is linked and
// initialised in resident memory (docs/benchmarks.md, "IMDS mode memory").
//
// The method sets are exactly those of client-go's typed clients, so that
// a clientset's clients satisfy them as they are (kube/clientset adapts a
// kubernetes.Interface, for tests against client-go's fake clientset).
package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// Client is what lifeboat reads and writes.
type Client interface {
	Nodes() NodeClient
	// Pods in namespace ("": every namespace, for lists and watches).
	Pods(namespace string) PodClient
	// PodDisruptionBudgets in namespace ("": every namespace).
	PodDisruptionBudgets(namespace string) PDBClient
}

// NodeClient is the part of client-go's NodeInterface lifeboat uses.
type NodeClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Update(ctx context.Context, node *corev1.Node, opts metav1.UpdateOptions) (*corev1.Node, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// PodClient is the part of client-go's PodInterface lifeboat uses.
type PodClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Pod, error)
	// EvictV1 creates the pod's eviction subresource. REST's sends it once:
	// a 429 (a PodDisruptionBudget) comes back at once, for the drain's own
	// visible backoff. client-go's typed client retries a 429 that carries
	// a Retry-After, which the API server sets (10 s) only while the
	// disruption controller has not processed the budget yet; a budget
	// that allows no disruption answers without one, and both clients
	// return it at once (test/kubediff).
	EvictV1(ctx context.Context, eviction *policyv1.Eviction) error
}

// PDBClient is the part of client-go's PodDisruptionBudgetInterface
// lifeboat uses.
type PDBClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*policyv1.PodDisruptionBudgetList, error)
}
