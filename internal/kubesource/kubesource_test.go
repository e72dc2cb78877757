package kubesource

import (
	"os"
	"path/filepath"
	"testing"
)

// The client configuration comes from --kubeconfig, else the pod's
// ServiceAccount in a pod, else KUBECONFIG, else ~/.kube/config.
func TestFind(t *testing.T) {
	dir := t.TempDir()
	flagFile := kubeconfig(t, dir, "flag", "https://flag.example:6443")
	envFile := kubeconfig(t, dir, "env", "https://env.example:6443")
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	kubeconfig(t, filepath.Join(home, ".kube"), "config", "https://home.example:6443")
	for _, tc := range []struct {
		name     string
		flag     string
		env      map[string]string
		wantKind Kind
		wantHost string
	}{
		{"--kubeconfig wins", flagFile, map[string]string{"KUBECONFIG": envFile, "HOME": home, "KUBERNETES_SERVICE_HOST": "10.0.0.1"}, Kubeconfig, "https://flag.example:6443"},
		{"in a pod", "", map[string]string{"KUBECONFIG": envFile, "HOME": home, "KUBERNETES_SERVICE_HOST": "10.0.0.1"}, InCluster, ""},
		{"KUBECONFIG", "", map[string]string{"KUBECONFIG": envFile, "HOME": home}, Kubeconfig, "https://env.example:6443"},
		{"~/.kube/config", "", map[string]string{"HOME": home}, Kubeconfig, "https://home.example:6443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Find(tc.flag, func(k string) string { return tc.env[k] })
			if s.Kind != tc.wantKind {
				t.Fatalf("kind %s, want %s", s.Kind, tc.wantKind)
			}
			if s.Kind == InCluster {
				return // rest.InClusterConfig reads the process's own environment and token file
			}
			rc, err := s.RESTConfig()
			if err != nil {
				t.Fatal(err)
			}
			if rc.Host != tc.wantHost {
				t.Errorf("host %s, want %s", rc.Host, tc.wantHost)
			}
		})
	}
}

func kubeconfig(t *testing.T, dir, name, server string) string {
	t.Helper()
	body := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + server +
		"\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\ncurrent-context: ctx\n"
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
