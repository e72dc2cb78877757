package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The functions below make, freeze, kill and remove the real node's cgroup
// subtree in every cgroup v1 hierarchy (and the unified one beside them on
// a hybrid host); on a pure cgroup v2 host each hands over to cgroupV2
// (cgroupv2.go).

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
// node's teardown removed the shared parent meanwhile: creating in it then
// fails with ENOENT, writing into it with ENODEV
// (TestCgroupParentSharedByNodes).
func makeCgroup(path string) error {
	mk := makeCgroupOnce
	if v2, ok := hostCgroupV2(); ok {
		mk = v2.make
	}
	var err error
	for range 10 {
		if err = mk(path); !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENODEV) {
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
	if v2, ok := hostCgroupV2(); ok {
		return v2.freeze(path)
	}
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
	if v2, ok := hostCgroupV2(); ok {
		v2.kill(path, frozen)
		return
	}
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

// removeCgroupTree removes the cgroup directory dir and its descendants,
// deepest first; each removal is tried for up to a second, as a killed
// process leaves its cgroup a moment later. Both cgroup versions use it.
func removeCgroupTree(dir string) error {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	var errs []error
	for _, d := range dirs {
		var err error
		for range 50 {
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
	return errors.Join(errs...)
}

// removeCgroup removes path and its descendants from every hierarchy,
// deepest first.
func removeCgroup(path string) error {
	if v2, ok := hostCgroupV2(); ok {
		return v2.remove(path)
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		errs = append(errs, removeCgroupTree(filepath.Join(m, path)))
	}
	for _, m := range mounts {
		_ = syscall.Rmdir(filepath.Join(m, filepath.Dir(path))) // the parent, once empty
	}
	return errors.Join(errs...)
}
