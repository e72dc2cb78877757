package testenv

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// writeKubeletConfig writes the kubelet's configuration file. What matters
// on this kind of machine: cgroupfs on cgroup v1 (failCgroupV1 false), no
// swap check, eviction thresholds at 0% and no image garbage collection
// (the images are imported, never pulled), pods under the node's cgroup
// subtree.
func (n *RealNode) writeKubeletConfig() error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	n.KubeletPort = port
	healthz, err := FreePort()
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
cgroupsPerQOS: true
cgroupRoot: %s
enforceNodeAllocatable: []
failSwapOn: false
failCgroupV1: false
providerID: %s
podLogsDir: %s
volumePluginDir: %s
resolvConf: ""
evictionHard: {memory.available: "0%%", nodefs.available: "0%%", nodefs.inodesFree: "0%%", imagefs.available: "0%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
nodeStatusUpdateFrequency: 2s
nodeStatusReportFrequency: 10s
syncFrequency: 10s
maxPods: 30
serializeImagePulls: false
`, n.kubeletAddress(), port, healthz, n.Socket, n.cgroup("pods"), n.ProviderID, filepath.Join(n.Dir, "pod-logs"), filepath.Join(n.Dir, "volume-plugins"))
	if n.o.KubeletConfig != "" {
		cfg += strings.TrimRight(n.o.KubeletConfig, "\n") + "\n"
	}
	return os.WriteFile(filepath.Join(n.Dir, "kubelet.yaml"), []byte(cfg), 0o644)
}

// StartKubelet starts the kubelet (again, after StopKubelet or a kill) with
// the node's configuration. It does not wait for it.
func (n *RealNode) StartKubelet(bin string) error {
	if bin == "" {
		var err error
		if bin, err = BinPath("kubelet"); err != nil {
			return err
		}
	}
	labels := map[string]string{"topology.kubernetes.io/zone": n.o.AZ, "topology.kubernetes.io/region": strings.TrimRight(n.o.AZ, "abcdefghijklmnopqrstuvwxyz")}
	maps.Copy(labels, n.o.Labels)
	var kv []string
	for k, v := range labels {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	kubeconfig := n.env.Kubeconfig
	if n.o.kubeconfig != "" {
		kubeconfig = n.o.kubeconfig
	}
	n.kubeletRuns++
	bin, args := n.command(bin,
		"--config="+filepath.Join(n.Dir, "kubelet.yaml"),
		"--kubeconfig="+kubeconfig,
		"--root-dir="+filepath.Join(n.Dir, "kubelet"),
		"--cert-dir="+filepath.Join(n.Dir, "kubelet-pki"),
		"--hostname-override="+n.Name,
		"--node-ip="+n.kubeletAddress(),
		"--node-labels="+strings.Join(kv, ","),
		"--v=2",
	)
	p, err := StartProcess(fmt.Sprintf("kubelet-%d", n.kubeletRuns), bin, args, nil, n.Dir)
	if err != nil {
		return err
	}
	n.kubelet = p
	return nil
}

// RestartKubelet kills the kubelet (SIGKILL, as a crash would) and starts
// it again with the same configuration; the containers keep running.
func (n *RealNode) RestartKubelet() error {
	n.kubelet.Kill()
	return n.StartKubelet("")
}

// kubeletAddress is where the kubelet serves (RealNodeOptions.KubeletAddress).
func (n *RealNode) kubeletAddress() string {
	if n.o.KubeletAddress != "" {
		return n.o.KubeletAddress
	}
	return "127.0.0.1"
}
