// Package clientset adapts a client-go clientset (kubernetes.Interface) to
// kube.Client: for tests against client-go's fake clientset, and for code
// of the full build that has a clientset anyway. The IMDS-only build must
// not import it (it links every API group).
//
// One difference to kube.REST: the typed EvictV1 retries a 429 that
// carries a Retry-After (a budget not yet processed by the disruption
// controller) inside client-go; kube.REST sends an eviction once.
// test/kubediff holds both against one API server.
package clientset

import (
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/kube"
)

// Client is a kube.Client over a clientset's typed clients.
type Client struct{ kubernetes.Interface }

// New adapts cs.
func New(cs kubernetes.Interface) Client { return Client{cs} }

func (c Client) Nodes() kube.NodeClient { return c.CoreV1().Nodes() }

func (c Client) Pods(namespace string) kube.PodClient { return c.CoreV1().Pods(namespace) }

func (c Client) PodDisruptionBudgets(namespace string) kube.PDBClient {
	return c.PolicyV1().PodDisruptionBudgets(namespace)
}
