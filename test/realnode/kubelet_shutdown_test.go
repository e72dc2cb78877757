package realnode

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/test/testenv"
)

// TestCheckReadsKubeletShutdown (issue 25 item 5): lifeboat check reads the
// real kubelets' /configz through the API server's node proxy and reports
// the graceful node shutdown each is configured with: 150 s with 30 s for
// critical pods (EKS's AL2023 from 1.34) on one node, nothing (the
// kubelet's default, shutdownGracePeriod 0) on the other. The first
// kubelet's own log shows why "configured" is all check may say: this
// machine has no systemd-logind on a system D-Bus, so its shutdown manager
// failed to start, which the API does not show.
func TestCheckReadsKubeletShutdown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// The API server's node proxy dials the node's InternalIP, and never
	// a loopback address: the kubelets serve on one of this machine's own.
	addr := machineAddress(t)
	graceful := testenv.StartRealNode(t, suite.Kube, testenv.RealNodeOptions{Images: suite.Images, KubeletAddress: addr,
		Labels:        map[string]string{"eks.amazonaws.com/nodegroup": "graceful"},
		KubeletConfig: "shutdownGracePeriod: 150s\nshutdownGracePeriodCriticalPods: 30s"})
	plain := testenv.StartRealNode(t, suite.Kube, testenv.RealNodeOptions{Images: suite.Images, KubeletAddress: addr,
		Labels: map[string]string{"eks.amazonaws.com/nodegroup": "plain"}})

	cmd := exec.CommandContext(ctx, suite.Lifeboat, "check", "--output", "json", "--mode", "imds", "--node-name", graceful.Name,
		"--imds-endpoint", "http://127.0.0.1:1", "--kubeconfig", suite.Kube.Kubeconfig)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	_ = cmd.Run() // the IMDS checks fail on this machine: exit 1
	var report struct {
		Checks []struct {
			Name, Status, Found string
			Items               []string
		} `json:"checks"`
	}
	if err := json.Unmarshal(out.Bytes(), &report); err != nil {
		t.Fatalf("lifeboat check --output json: %v\n%s", err, out.String())
	}
	found := false
	for _, c := range report.Checks {
		if c.Name != "kubelet graceful shutdown" {
			continue
		}
		found = true
		t.Logf("%s: %s", c.Status, c.Found)
		if c.Status != "ok" {
			t.Errorf("status %s, want ok", c.Status)
		}
		want := map[string]string{
			graceful.Name: "shutdownGracePeriod 2m30s, shutdownGracePeriodCriticalPods 30s: other pods get 2m0s once the shutdown begins, then system-critical pods 30s",
			plain.Name:    "not configured (shutdownGracePeriod 0)",
		}
		for node, s := range want {
			ok := false
			for _, it := range c.Items {
				ok = ok || strings.HasPrefix(it, node+" (") && strings.HasSuffix(it, s)
			}
			if !ok {
				t.Errorf("no item says %s: %s; items %q", node, s, c.Items)
			}
		}
		if !strings.Contains(c.Found, "configured, not confirmed active") {
			t.Errorf("found does not say configured is not confirmed active: %s", c.Found)
		}
	}
	if !found {
		t.Fatalf("no kubelet graceful shutdown row:\n%s", out.String())
	}
	// What the API did not show: the kubelet's own log.
	logOf := func(n *testenv.RealNode) string {
		b, err := os.ReadFile(filepath.Join(n.Dir, "kubelet-1.log"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	gl, pl := logOf(graceful), logOf(plain)
	if !strings.Contains(gl, "Creating node shutdown manager") || !strings.Contains(gl, "Failed to start node shutdown manager") {
		t.Errorf("the configured kubelet's log does not show its shutdown manager created and failing to start (no systemd-logind here)")
	} else {
		for _, l := range strings.Split(gl, "\n") {
			if strings.Contains(l, "node shutdown manager") {
				t.Logf("kubelet %s: %s", graceful.Name, l)
			}
		}
	}
	if strings.Contains(pl, "Creating node shutdown manager") {
		t.Errorf("the kubelet without shutdownGracePeriod created a shutdown manager")
	}
}

// machineAddress is one of this machine's IPv4 addresses that is not a
// loopback or link-local one.
func machineAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Fatalf("no non-loopback IPv4 address on this machine: %v", addrs)
	return ""
}
