package testenv

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// cgroupV2 is the real node's cgroup subtree on a cgroup v2 host, in the
// unified hierarchy mounted at root: one tree instead of v1's one per
// controller. "Power off" freezes it through cgroup.freeze and kills it
// through cgroup.kill (every process of the subtree, frozen or not, forks
// racing included); clean-up removes it deepest first.
type cgroupV2 struct{ root string }

// v2Controllers are delegated down the node's subtree when the parent
// offers them: what the kubelet (cgroupfs driver) and runc set for pods and
// containers.
var v2Controllers = []string{"cpu", "cpuset", "memory", "pids", "io", "hugetlb"}

// hostCgroupV2 returns the host's cgroup v2 tree when /sys/fs/cgroup is the
// unified hierarchy itself (a pure v2 host); ok is false on a v1 or hybrid
// host, where the v1 hierarchies are used as before.
func hostCgroupV2() (cgroupV2, bool) {
	var st syscall.Statfs_t
	if syscall.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == 0x63677270 { // CGROUP2_SUPER_MAGIC
		return cgroupV2{root: "/sys/fs/cgroup"}, true
	}
	return cgroupV2{}, false
}

// unifiedMount returns where the unified hierarchy is mounted (a v2 host's
// /sys/fs/cgroup, a hybrid host's /sys/fs/cgroup/unified), or "".
func unifiedMount() string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, fs := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) >= 5 && len(fs) >= 1 && fs[0] == "cgroup2" {
			return f[4]
		}
	}
	return ""
}

// make creates path and its parents; each parent delegates to its children
// the controllers of v2Controllers it has (the leaf delegates none: it holds
// processes, which a cgroup with controllers in subtree_control may not).
func (c cgroupV2) make(path string) error {
	dir := c.root
	for _, p := range strings.Split(strings.Trim(path, "/"), "/") {
		if err := delegate(dir); err != nil {
			return err
		}
		dir = filepath.Join(dir, p)
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// delegate enables in dir's cgroup.subtree_control the controllers of
// v2Controllers that dir has and has not enabled yet.
func delegate(dir string) error {
	have, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return err
	}
	on, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	var add []string
	for _, ctl := range v2Controllers {
		if slices.Contains(strings.Fields(string(have)), ctl) && !slices.Contains(strings.Fields(string(on)), ctl) {
			add = append(add, "+"+ctl)
		}
	}
	if len(add) == 0 {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(add, " ")), 0o644); err != nil {
		return fmt.Errorf("delegating %s in %s: %w", add, dir, err)
	}
	return nil
}

// freeze freezes every process under path at one instant, as a power cut
// stops them; it reports whether they were frozen.
func (c cgroupV2) freeze(path string) bool {
	dir := filepath.Join(c.root, path)
	if err := os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte("1"), 0o644); err != nil {
		return false
	}
	for range 200 {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
		if err != nil || bytes.Contains(b, []byte("frozen 1")) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// kill kills every process under path (cgroup.kill: SIGKILL to the whole
// subtree, frozen processes included; before Linux 5.14, SIGKILL to each
// process of cgroup.procs, then a thaw), and waits, up to 10 s, until none
// is left.
func (c cgroupV2) kill(path string, frozen bool) {
	dir := filepath.Join(c.root, path)
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := cgroupTasks(dir)
		if len(left) == 0 {
			break
		}
		if os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0o644) != nil {
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if frozen {
			_ = os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte("0"), 0o644)
			frozen = false
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte("0"), 0o644)
}

// tasks returns the processes under path.
func (c cgroupV2) tasks(path string) []int { return cgroupTasks(filepath.Join(c.root, path)) }

// remove removes path and its descendants, deepest first, then its parent
// once empty.
func (c cgroupV2) remove(path string) error {
	err := removeCgroupTree(filepath.Join(c.root, path))
	_ = syscall.Rmdir(filepath.Join(c.root, filepath.Dir(path)))
	return err
}
