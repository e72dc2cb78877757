package metrics

import (
	"net/http"
	"strings"
)

// CountKubeRequests wraps a Kubernetes client transport so that every
// request is counted in KubeRequests by verb and resource (bounded: the
// resources lifeboat uses, e.g. "nodes", "pods/eviction", "leases").
func (m *Metrics) CountKubeRequests(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		verb := req.Method
		if req.Method == http.MethodGet && req.URL.Query().Get("watch") == "true" {
			verb = "WATCH"
		}
		m.KubeRequests.WithLabelValues(verb, resourceOf(req.URL.Path)).Inc()
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// resourceOf returns the resource (and subresource) of an API path:
// /api/v1/namespaces/ns/pods/p/eviction -> pods/eviction; /api/v1/nodes -> nodes.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:] // api, v1
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:] // apis, group, version
	default:
		return "other"
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		parts = parts[2:]
		if len(parts) == 0 {
			return "namespaces"
		}
	}
	switch len(parts) {
	case 0:
		return "discovery"
	case 1, 2:
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}
