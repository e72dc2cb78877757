package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 24: the README's queue-mode start line and docs/operations.md's
// "anywhere" check line give no namespace; the Lease's namespace comes from
// where the Kubernetes client configuration comes from.
func TestLeaseNamespaceDefault(t *testing.T) {
	readme := []string{"--queue-url", "https://sqs.us-east-1.amazonaws.com/123456789012/q", "--cluster-name", "prod"}
	dir := t.TempDir()
	withNS := writeKubeconfig(t, dir, "with-ns", "team-a")
	withoutNS := writeKubeconfig(t, dir, "without-ns", "")
	saFile := "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
	noFile := func(string) ([]byte, error) { return nil, fs.ErrNotExist }
	for _, tc := range []struct {
		name     string
		args     []string
		env      map[string]string
		readFile func(string) ([]byte, error)
		wantNS   string
		wantFrom string
	}{
		{"KUBECONFIG names a namespace", readme, map[string]string{"KUBECONFIG": withNS}, noFile, "team-a", "the kubeconfig's context ctx"},
		{"KUBECONFIG names none", readme, map[string]string{"KUBECONFIG": withoutNS}, noFile, "default", "the kubeconfig's context ctx names none"},
		{"~/.kube/config", readme, map[string]string{"HOME": homeWith(t, withNS)}, noFile, "team-a", "the kubeconfig's context ctx"},
		{"no kubeconfig at all", readme, nil, noFile, "default", "no kubeconfig context"},
		{"--kubeconfig wins over KUBECONFIG", append([]string{"--kubeconfig", withNS}, readme...), map[string]string{"KUBECONFIG": withoutNS}, noFile, "team-a", "the kubeconfig's context ctx"},
		{"in a cluster: the ServiceAccount's namespace", readme, map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBECONFIG": withNS},
			func(p string) ([]byte, error) {
				if p != saFile {
					return nil, fs.ErrNotExist
				}
				return []byte("kube-system\n"), nil
			}, "kube-system", saFile},
		{"--pod-namespace", append([]string{"--pod-namespace", "ops"}, readme...), map[string]string{"KUBECONFIG": withNS}, noFile, "ops", "--pod-namespace"},
		{"--lease-namespace", append([]string{"--lease-namespace", "leases", "--pod-namespace", "ops"}, readme...), map[string]string{"KUBECONFIG": withNS}, noFile, "leases", "--lease-namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFlags("run")
			f.readFile = tc.readFile
			c, err := f.Load(tc.args, env(tc.env))
			if err != nil {
				t.Fatalf("Load(%q): %v", tc.args, err)
			}
			if c.LeaseNamespace != tc.wantNS || c.LeaseNamespaceFrom != tc.wantFrom {
				t.Errorf("Lease namespace %q from %q, want %q from %q", c.LeaseNamespace, c.LeaseNamespaceFrom, tc.wantNS, tc.wantFrom)
			}
		})
	}
}

// A namespace that cannot be found is a configuration error naming the
// flags that fix it.
func TestLeaseNamespaceNotFound(t *testing.T) {
	args := []string{"--queue-url", "https://sqs.us-east-1.amazonaws.com/123456789012/q"}
	f := NewFlags("run")
	f.readFile = func(string) ([]byte, error) { return nil, errors.New("no such file") }
	_, err := f.Load(args, env(map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1"}))
	if err == nil || !containsAll(err.Error(), "--lease-namespace", "serviceaccount/namespace") {
		t.Errorf("in a cluster without the ServiceAccount's namespace file: %v, want an error naming the file and --lease-namespace", err)
	}
	f = NewFlags("run")
	_, err = f.Load(append([]string{"--kubeconfig", "/nonexistent/kubeconfig"}, args...), env(nil))
	if err == nil || !containsAll(err.Error(), "--lease-namespace", "/nonexistent/kubeconfig") {
		t.Errorf("with a --kubeconfig that does not exist: %v, want an error naming the file and --lease-namespace", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func writeKubeconfig(t *testing.T, dir, name, namespace string) string {
	t.Helper()
	ns := ""
	if namespace != "" {
		ns = "\n    namespace: " + namespace
	}
	body := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
users:
- name: u
  user:
    token: t
contexts:
- name: ctx
  context:
    cluster: c
    user: u` + ns + `
current-context: ctx
`
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// homeWith returns a home directory whose .kube/config is a copy of kubeconfig.
func homeWith(t *testing.T, kubeconfig string) string {
	t.Helper()
	home := t.TempDir()
	b, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".kube", "config"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}
