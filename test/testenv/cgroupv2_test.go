package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The real node's cgroup v2 path (issue 24), on the unified hierarchy this
// machine mounts: a hybrid host (/sys/fs/cgroup/unified, its controllers
// bound to v1 but for hugetlb) or a pure v2 host (/sys/fs/cgroup). The
// subtree is made with the controllers delegated down to the leaves'
// parent, holds processes that ignore SIGTERM and fork, freezes at one
// instant, is killed through cgroup.kill even while frozen, and is removed
// without a trace. What this cannot show: a kubelet, containerd and runc
// running on a pure v2 host (they go by /sys/fs/cgroup's type, v1 here).
func TestCgroupV2Subtree(t *testing.T) {
	root := unifiedMount()
	if root == "" {
		t.Fatal("no cgroup2 file system is mounted on this machine: the real node's cgroup v2 path cannot be tested")
	}
	c := cgroupV2{root: root}
	base := fmt.Sprintf("/lifeboat-cgv2test-%d", os.Getpid())
	node := base + "/node-0"
	// The clean-up does not trust the code under test: it kills what is
	// left by process ID and thaws.
	t.Cleanup(func() {
		for _, pid := range cgroupTasks(filepath.Join(root, node)) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = os.WriteFile(filepath.Join(root, node, "cgroup.freeze"), []byte("0"), 0o644)
		_ = c.remove(node)
	})
	for _, child := range []string{"runtime", "pods/kubepods/besteffort"} {
		if err := c.make(node + "/" + child); err != nil {
			t.Fatalf("make %s/%s: %v", node, child, err)
		}
	}
	// Every controller the unified root offers that the kubelet and runc
	// use is delegated to node-0's children (on this hybrid host, hugetlb).
	offered := strings.Fields(readString(t, filepath.Join(root, "cgroup.controllers")))
	enabled := strings.Fields(readString(t, filepath.Join(root, node, "cgroup.subtree_control")))
	for _, ctl := range v2Controllers {
		if slices.Contains(offered, ctl) && !slices.Contains(enabled, ctl) {
			t.Errorf("controller %s offered at the root but not delegated by %s (subtree_control %q)", ctl, node, enabled)
		}
	}
	// Processes in two leaves: each a shell that ignores SIGTERM and forks
	// two sleeps.
	var cmds []*exec.Cmd
	for _, leaf := range []string{"runtime", "pods/kubepods/besteffort"} {
		cmds = append(cmds, startInCgroup(t, filepath.Join(root, node, leaf)))
	}
	t.Cleanup(func() {
		for _, cmd := range cmds {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	waitFor(t, "6 processes in the subtree", func() bool { return len(c.tasks(node)) >= 6 })
	if !c.freeze(node) {
		t.Fatal("freeze reported that nothing was frozen")
	}
	if ev := readString(t, filepath.Join(root, node, "cgroup.events")); !strings.Contains(ev, "frozen 1") {
		t.Errorf("after freeze, cgroup.events = %q, want frozen 1", ev)
	}
	c.kill(node, true)
	if left := c.tasks(node); len(left) > 0 {
		t.Fatalf("after kill, processes left in the subtree: %v", left)
	}
	for _, cmd := range cmds {
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("shell %d ended with %v, want killed by SIGKILL", cmd.Process.Pid, err)
		}
	}
	if err := c.remove(node); err != nil {
		t.Fatalf("remove: %v", err)
	}
	for _, d := range []string{node, base} {
		if _, err := os.Stat(filepath.Join(root, d)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s still there after remove (%v)", filepath.Join(root, d), err)
		}
	}
}

// startInCgroup starts, inside the cgroup dir (clone3 CLONE_INTO_CGROUP),
// a shell that ignores SIGTERM and runs two sleeps.
func startInCgroup(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	fd, err := syscall.Open(dir, syscall.O_DIRECTORY|syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	cmd := exec.Command("sh", "-c", `trap "" TERM; sleep 1000 & sleep 1000 & wait`)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting a shell in %s: %v", dir, err)
	}
	return cmd
}

func readString(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 250 {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
