package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Debian packages and the binaries of theirs a real node runs. A missing
// one fails with the package's name and `make deps`.
var realNodePackages = []struct{ pkg, path string }{
	{"containerd", "/usr/bin/containerd"},
	{"containerd", "/usr/bin/containerd-shim-runc-v2"},
	{"containerd", "/usr/bin/ctr"},
	{"runc", "/usr/sbin/runc"},
	{"containernetworking-plugins", cniBinDir + "/bridge"},
	{"containernetworking-plugins", cniBinDir + "/host-local"},
	{"containernetworking-plugins", cniBinDir + "/loopback"}, // the CRI plugin's own loopback network
	{"iproute2", "/usr/sbin/ip"},
	{"util-linux", "/usr/bin/nsenter"}, // a node in its own network namespace (RealNodeOptions.Netns)
}

// cniBinDir is where Debian's containernetworking-plugins puts the plugins.
const cniBinDir = "/usr/lib/cni"

// checkRealNodeDeps reports every missing package of a real node at once.
// CheckRealNodeDeps fails, naming what is missing, unless a real node can
// start here: the Debian packages' binaries, root and the kubelet in bin/.
func CheckRealNodeDeps() error {
	if err := checkRealNodeDeps(); err != nil {
		return err
	}
	_, err := BinPath("kubelet")
	return err
}

func checkRealNodeDeps() error {
	var missing []string
	seen := map[string]bool{}
	for _, p := range realNodePackages {
		if _, err := os.Stat(p.path); err != nil && !seen[p.pkg] {
			seen[p.pkg] = true
			missing = append(missing, fmt.Sprintf("%s (Debian package %s)", p.path, p.pkg))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the real node needs %s: run `make deps` as root (hack/debian-deps.sh installs them)", strings.Join(missing, ", "))
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("the real node runs containerd and a kubelet, which need root; this process runs as uid %d", os.Geteuid())
	}
	return nil
}

// containerdConfig is the configuration of one node's containerd: its own
// root, state, socket, CNI configuration and cgroup (inside the node's
// cgroup subtree, so its shims and every container are there too).
func containerdConfig(n *RealNode) string {
	cri := `plugins."io.containerd.grpc.v1.cri"`
	return fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %q

[cgroup]
  path = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[%s]
  sandbox_image = %q
  # This sandbox has no CAP_SYS_RESOURCE: without it runc fails every pod
  # sandbox ("can't get final child's PID from pipe: EOF").
  restrict_oom_score_adj = true
  # The pods' network namespaces live under the node's state directory, not
  # in the host's /var/run/netns, so that teardown finds exactly this node's.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [%s.cni]
    bin_dir = %q
    conf_dir = %q
    max_conf_num = 1
  [%s.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [%s.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [%s.containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %q
`, n.containerdRoot(), n.containerdState(), n.Socket, n.cgroup("runtime"), filepath.Join(n.Dir, "opt"),
		cri, SandboxImage, cri, cniBinDir, n.cniConfDir(), cri, cri, cri, filepath.Join(n.containerdState(), "runc"))
}

// cniConfig is the node's pod network: its own bridge and subnet, addresses
// from host-local with its state under the node's directory. No masquerade
// (no iptables rules to clean up); the bridge is the pods' gateway.
func cniConfig(n *RealNode) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"cniVersion": "0.4.0",
		"name":       n.bridge(),
		"plugins": []map[string]any{
			{
				"type": "bridge", "bridge": n.bridge(), "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type": "host-local", "dataDir": filepath.Join(n.Dir, "cni-ipam"),
					"ranges": [][]map[string]string{{{"subnet": n.PodCIDR}}},
					"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
		},
	}, "", "  ")
}

func (n *RealNode) containerdRoot() string  { return filepath.Join(n.Dir, "containerd", "root") }
func (n *RealNode) containerdState() string { return filepath.Join(n.Dir, "containerd", "state") }
func (n *RealNode) cniConfDir() string      { return filepath.Join(n.Dir, "cni") }

// startContainerd writes the node's containerd and CNI configuration,
// starts containerd and waits until it answers on its socket.
func (n *RealNode) startContainerd(ctx context.Context) error {
	if err := os.MkdirAll(n.cniConfDir(), 0o755); err != nil {
		return err
	}
	cni, err := cniConfig(n)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.cniConfDir(), "10-lifeboat.conflist"), cni, 0o644); err != nil {
		return fmt.Errorf("writing CNI configuration: %w", err)
	}
	cfg := filepath.Join(n.Dir, "containerd.toml")
	if err := os.WriteFile(cfg, []byte(containerdConfig(n)), 0o644); err != nil {
		return fmt.Errorf("writing containerd configuration: %w", err)
	}
	n.containerdRuns++
	bin, args := n.command("/usr/bin/containerd", "--config", cfg, "--log-level", "info")
	p, err := StartProcess(fmt.Sprintf("containerd-%d", n.containerdRuns), bin, args, nil, n.Dir)
	if err != nil {
		return err
	}
	n.containerd = p
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("containerd exited while starting (%v); log tail:\n%s", err, p.Tail(30))
		}
		if _, err := n.ctr(ctx, "version"); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("containerd did not answer on %s: %w; log tail:\n%s", n.Socket, ctx.Err(), p.Tail(30))
		case <-tick.C:
		}
	}
}

// ctr runs the containerd client against this node's containerd, in the
// namespace of the CRI plugin (k8s.io).
func (n *RealNode) ctr(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/usr/bin/ctr", append([]string{"--address", n.Socket, "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// ImportImage imports an image archive (BuildImages) into the node's
// containerd, where the kubelet finds it (imagePullPolicy Never).
func (n *RealNode) ImportImage(ctx context.Context, archive string) error {
	_, err := n.ctr(ctx, "images", "import", archive)
	return err
}

// RestartContainerd kills containerd (SIGKILL, as a crash would) and starts
// it again with the same configuration; the shims and containers keep
// running and the new containerd reconnects to them.
func (n *RealNode) RestartContainerd(ctx context.Context) error {
	n.containerd.Kill()
	return n.startContainerd(ctx)
}
