// Package kubesource says where lifeboat's Kubernetes client configuration
// comes from and which namespace goes with it: an explicit --kubeconfig;
// else, in a pod, the ServiceAccount; else the kubeconfig kubectl would use
// (KUBECONFIG, then ~/.kube/config). client-go's clientcmd loads the files;
// its own namespace fallback (DeferredLoadingClientConfig.Namespace) reads
// POD_NAMESPACE and the ServiceAccount file from the process itself, which a
// test cannot stand in for, hence the few lines here.
package kubesource

import (
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ServiceAccountNamespaceFile is where a pod's ServiceAccount namespace is
// mounted.
const ServiceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Kind is where the client configuration comes from.
type Kind string

// Kinds of source.
const (
	// Kubeconfig: --kubeconfig, else KUBECONFIG, else ~/.kube/config.
	Kubeconfig Kind = "kubeconfig"
	// InCluster: the pod's ServiceAccount (no --kubeconfig, and
	// KUBERNETES_SERVICE_HOST set, as in every pod).
	InCluster Kind = "in-cluster"
)

// Source is where the client configuration comes from.
type Source struct {
	Kind  Kind
	rules *clientcmd.ClientConfigLoadingRules
}

// Find decides the source from --kubeconfig and the environment.
func Find(kubeconfig string, getenv func(string) string) Source {
	if kubeconfig == "" && getenv("KUBERNETES_SERVICE_HOST") != "" {
		return Source{Kind: InCluster}
	}
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}
	if env := getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		rules.Precedence = filepath.SplitList(env)
	} else if home := getenv("HOME"); home != "" {
		rules.Precedence = []string{filepath.Join(home, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)}
	}
	return Source{Kind: Kubeconfig, rules: rules}
}

// RESTConfig is the client configuration.
func (s Source) RESTConfig() (*rest.Config, error) {
	if s.Kind == InCluster {
		return rest.InClusterConfig()
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(s.rules, &clientcmd.ConfigOverrides{}).ClientConfig()
}

// Namespace is the namespace that goes with the source: the
// ServiceAccount's in a pod; else the kubeconfig current context's, or
// "default" when it names none (as kubectl). from says where it came from,
// for the log.
func (s Source) Namespace(readFile func(string) ([]byte, error)) (ns, from string, err error) {
	if s.Kind == InCluster {
		b, err := readFile(ServiceAccountNamespaceFile)
		if err != nil {
			return "", "", fmt.Errorf("the ServiceAccount's namespace (%s): %w", ServiceAccountNamespaceFile, err)
		}
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns, ServiceAccountNamespaceFile, nil
		}
		return "", "", fmt.Errorf("the ServiceAccount's namespace: %s is empty", ServiceAccountNamespaceFile)
	}
	raw, err := s.rules.Load()
	if err != nil {
		return "", "", fmt.Errorf("the kubeconfig: %w", err)
	}
	if raw.CurrentContext == "" {
		return "default", "no kubeconfig context", nil
	}
	if c := raw.Contexts[raw.CurrentContext]; c != nil && c.Namespace != "" {
		return c.Namespace, "the kubeconfig's context " + raw.CurrentContext, nil
	}
	return "default", "the kubeconfig's context " + raw.CurrentContext + " names none", nil
}
