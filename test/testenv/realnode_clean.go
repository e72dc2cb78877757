package testenv

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// killProcessesMentioning kills (SIGKILL) every process whose command line
// mentions dir: a node's kubelet (--root-dir), containerd (--config) and
// shims (-address), also when they outlived the run that started them.
func killProcessesMentioning(dir string) {
	for range 3 {
		entries, _ := os.ReadDir("/proc")
		found := false
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil || !bytes.Contains(b, []byte(dir+"/")) {
				continue
			}
			found = true
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if !found {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// unmountUnder unmounts every mount at or under dir, deepest first (the
// kubelet's bind mount of its root, pod volumes, container root
// filesystems, sandbox shm, network namespaces).
func unmountUnder(dir string) error {
	for range 5 {
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return err
		}
		var points []string
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 5 {
				continue
			}
			p := strings.ReplaceAll(f[4], `\040`, " ")
			if p == dir || strings.HasPrefix(p, dir+"/") {
				points = append(points, p)
			}
		}
		if len(points) == 0 {
			return nil
		}
		sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
		for _, p := range points {
			_ = syscall.Unmount(p, syscall.MNT_DETACH)
		}
	}
	return fmt.Errorf("mounts under %s remain after five rounds of unmounting", dir)
}

// sweepRealNodeSlot removes every trace of a slot's node: its processes,
// mounts, network namespaces, bridge, cgroups, the shims' sockets, the CNI
// result cache, the kubelet's links in /var/log/containers and its
// directory. The slot's lock must be held.
func sweepRealNodeSlot(slot int) error {
	dir := slotDir(slot)
	n := &RealNode{slot: slot, Dir: dir, Socket: filepath.Join(dir, "containerd.sock")}
	var errs []error
	if _, err := os.Stat(dir); err == nil {
		killCgroup(n.cgroup(), freezeCgroup(n.cgroup()))
		killProcessesMentioning(dir)
		if err := unmountUnder(dir); err != nil {
			errs = append(errs, err)
		}
		removeTaskFiles(n)
		removeLogLinks(dir)
	}
	if _, err := os.Stat("/sys/class/net/" + n.bridge()); err == nil {
		if out, err := exec.Command("ip", "link", "delete", n.bridge()).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("deleting bridge %s: %w: %s", n.bridge(), err, out))
		}
	}
	if matches, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", n.bridge()+"-*")); len(matches) > 0 {
		for _, m := range matches {
			_ = os.Remove(m)
		}
	}
	if err := removeCgroup(n.cgroup()); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeTaskFiles removes the host-wide files of the node's tasks (pod
// sandboxes and containers) that a killed node leaves: the runc shims'
// sockets in /run/containerd/s, each named by the hash of the containerd
// address, namespace and task ID, and the CRI plugin's loopback results in
// the CNI cache.
func removeTaskFiles(n *RealNode) {
	tasks, _ := os.ReadDir(filepath.Join(n.containerdState(), "io.containerd.runtime.v2.task", "k8s.io"))
	for _, t := range tasks {
		sum := sha256.Sum256([]byte(filepath.Join(n.Socket, "k8s.io", t.Name())))
		_ = os.Remove(fmt.Sprintf("/run/containerd/s/%x", sum))
		_ = os.Remove(filepath.Join("/var/lib/cni/results", "cni-loopback-"+t.Name()+"-lo"))
	}
}

// removeLogLinks removes the kubelet's links in /var/log/containers (a
// fixed directory) that point into dir.
func removeLogLinks(dir string) {
	entries, _ := os.ReadDir("/var/log/containers")
	for _, e := range entries {
		p := filepath.Join("/var/log/containers", e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, dir+"/") {
			_ = os.Remove(p)
		}
	}
}

// Traces lists what is left of the node on this machine: processes that
// mention its directory, processes in its cgroups, mounts under its
// directory, the directory itself, its cgroups and its bridge. After Close
// it must be empty.
func (n *RealNode) Traces() []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(n.Dir+"/")) {
			out = append(out, fmt.Sprintf("process %s: %s", e.Name(), bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		}
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 5 && (f[4] == n.Dir || strings.HasPrefix(f[4], n.Dir+"/")) {
				out = append(out, "mount "+f[4])
			}
		}
	}
	if _, err := os.Stat(n.Dir); err == nil {
		out = append(out, "directory "+n.Dir)
	}
	mounts, _ := cgroupMounts()
	if v2, ok := hostCgroupV2(); ok {
		mounts = []string{v2.root}
	}
	for _, m := range mounts {
		d := filepath.Join(m, n.cgroup())
		if _, err := os.Stat(d); err == nil {
			out = append(out, fmt.Sprintf("cgroup %s (%d processes)", d, len(cgroupTasks(d))))
		}
	}
	if _, err := os.Stat("/sys/class/net/" + n.bridge()); err == nil {
		out = append(out, "bridge "+n.bridge())
	}
	return out
}

// Processes returns the processes in the node's cgroup subtree: its
// containerd, shims and every container's processes.
func (n *RealNode) Processes() []int {
	if v2, ok := hostCgroupV2(); ok {
		return v2.tasks(n.cgroup())
	}
	if d := freezerPath(n.cgroup()); d != "" {
		return cgroupTasks(d)
	}
	return nil
}
