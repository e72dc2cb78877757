package config

import (
	"fmt"

	"lifeboat.dev/lifeboat/internal/kubesource"
)

// leaseNamespace sets the leader-election Lease's namespace when queue mode
// elects a leader: --lease-namespace, else --pod-namespace, else the
// namespace of where the Kubernetes client configuration comes from (the
// ServiceAccount's in a pod, the kubeconfig context's outside one), so that
// the README's start line works as written anywhere.
func (c *Config) leaseNamespace(getenv func(string) string, readFile func(string) ([]byte, error)) []error {
	switch {
	case c.LeaseNamespace != "":
		c.LeaseNamespaceFrom = "--lease-namespace"
	case c.PodNamespace != "":
		c.LeaseNamespace, c.LeaseNamespaceFrom = c.PodNamespace, "--pod-namespace"
	case c.Mode != ModeQueue || !c.LeaderElect:
	default:
		ns, from, err := kubesource.Find(c.Kubeconfig, getenv).Namespace(readFile)
		if err != nil {
			return []error{fmt.Errorf("--leader-elect: no namespace for the Lease (set --lease-namespace or --pod-namespace): %w", err)}
		}
		c.LeaseNamespace, c.LeaseNamespaceFrom = ns, from
	}
	return nil
}
