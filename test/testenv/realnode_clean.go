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

// cgroupMounts returns the mount points of the cgroup v1 hierarchies
// (cpu, memory, freezer, pids, name=systemd, ...) and of the unified one
// mounted beside them, from mountinfo.
func cgroupMounts() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	v1 := false
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, fs := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(fs) < 1 {
			continue
		}
		switch fs[0] {
		case "cgroup":
			out = append(out, f[4])
			v1 = true
		case "cgroup2": // the unified hierarchy beside v1: runc uses it too
			out = append(out, f[4])
		}
	}
	if !v1 {
		return nil, errors.New("no cgroup v1 hierarchy is mounted (the real node runs the kubelet with the cgroupfs driver on cgroup v1)")
	}
	return out, nil
}

// makeCgroup creates path (and its parents) in every cgroup hierarchy.
// New cpuset cgroups get their parent's cpus and memory nodes: they start
// empty, and no task may join an empty cpuset. It tries again when another
// node's teardown removed the shared parent meanwhile.
func makeCgroup(path string) error {
	var err error
	for range 3 {
		if err = makeCgroupOnce(path); !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return err
}

func makeCgroupOnce(path string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for _, m := range mounts {
		dir := m
		for _, p := range parts {
			parent := dir
			dir = filepath.Join(dir, p)
			if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
				return fmt.Errorf("creating cgroup %s: %w", dir, err)
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				cur, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil || len(bytes.TrimSpace(cur)) > 0 {
					continue // not the cpuset hierarchy, or already set
				}
				v, err := os.ReadFile(filepath.Join(parent, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("setting %s of %s: %w", f, dir, err)
				}
			}
		}
	}
	return nil
}

// freezerPath returns the freezer hierarchy's directory of path, or "" when
// it does not exist (the root cgroup has no freezer.state).
func freezerPath(path string) string {
	mounts, _ := cgroupMounts()
	for _, m := range mounts {
		if _, err := os.Stat(filepath.Join(m, path, "freezer.state")); err == nil {
			return filepath.Join(m, path)
		}
	}
	return ""
}

// freezeCgroup freezes every task under path at one instant, as a power
// cut stops them; it reports whether the tasks were frozen.
func freezeCgroup(path string) bool {
	dir := freezerPath(path)
	if dir == "" {
		return false
	}
	if err := os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("FROZEN"), 0o644); err != nil {
		return false
	}
	for range 200 {
		b, err := os.ReadFile(filepath.Join(dir, "freezer.state"))
		if err != nil || strings.TrimSpace(string(b)) == "FROZEN" {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// cgroupTasks returns the processes in dir and its descendants.
func cgroupTasks(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// killCgroup kills every process under path with SIGKILL (thawing them
// when they were frozen, so that the kill lands) and waits, up to 10 s,
// until none is left.
func killCgroup(path string, frozen bool) {
	mounts, err := cgroupMounts()
	if err != nil {
		return
	}
	dirs := make([]string, 0, len(mounts))
	for _, m := range mounts {
		dirs = append(dirs, filepath.Join(m, path))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := 0
		for _, d := range dirs {
			for _, pid := range cgroupTasks(d) {
				left++
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if frozen {
			if d := freezerPath(path); d != "" {
				_ = os.WriteFile(filepath.Join(d, "freezer.state"), []byte("THAWED"), 0o644)
			}
			frozen = false
		}
		if left == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// removeCgroup removes path and its descendants from every hierarchy,
// deepest first.
func removeCgroup(path string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(m, path), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			var err error
			for range 50 { // a killed task leaves its cgroup a moment later
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	for _, m := range mounts {
		_ = syscall.Rmdir(filepath.Join(m, filepath.Dir(path))) // the parent, once empty
	}
	return errors.Join(errs...)
}

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
	if d := freezerPath(n.cgroup()); d != "" {
		return cgroupTasks(d)
	}
	return nil
}
