package metrics

import "testing"

func TestResourceOf(t *testing.T) {
	tests := []struct{ path, want string }{
		{"/api/v1/nodes", "nodes"},
		{"/api/v1/nodes/ip-10-0-0-1.ec2.internal", "nodes"},
		{"/api/v1/pods", "pods"},
		{"/api/v1/namespaces/default/pods/web-1/eviction", "pods/eviction"},
		{"/api/v1/namespaces/default/pods/web-1", "pods"},
		{"/api/v1/namespaces/default/events", "events"},
		{"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/lifeboat", "leases"},
		{"/api/v1/namespaces/kube-system", "namespaces"},
		{"/api", "other"},
		{"/healthz", "other"},
	}
	for _, tt := range tests {
		if got := resourceOf(tt.path); got != tt.want {
			t.Errorf("resourceOf(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}
