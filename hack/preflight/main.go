// Command preflight checks, before `make demo` and `make test` start
// anything, what they need of the machine: root, cgroups (the real node's
// kubelet and clean-up), the Debian packages, the programs the tests run
// from PATH (prometheus, promtool), moto and free disk. It prints
// one message listing everything missing, each with the command that fixes
// it, and exits 1; when everything is there it prints one OK line.
// The decision is Decide (decide.go); the probes here only observe.
//
// Usage: go run ./hack/preflight -target test -packages "containerd runc …"
package main

import (
	"bufio"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Disk needs, measured on this project's CI machine after a full `make
// tools` and `make test`: bin/ holds the testbed tools (0.45 GiB); the Go
// build cache grows to ~7 GiB (Kubernetes' kubelet, apiserver, controller
// manager and scheduler, etcd, kwok, every test binary); the module cache to
// 1.5 GiB; the testbed under TMPDIR (real nodes' containerd roots and image
// archives, etcd data, logs) stays under 1 GiB. Rounded up.
const (
	needBin      = 1 << 30
	needGoCache  = 8 << 30
	needModCache = 2 << 30
	needTmp      = 2 << 30
)

func main() {
	target := flag.String("target", "test", "the make target checked (for the messages)")
	packages := flag.String("packages", "", "the Debian packages the target needs (Makefile DEBIAN_PACKAGES)")
	flag.Parse()
	msg, ok := Decide(observe(*target, strings.Fields(*packages)))
	if !ok {
		fmt.Fprint(os.Stderr, msg)
		os.Exit(1)
	}
	fmt.Print(msg)
}

func observe(target string, packages []string) Facts {
	f := Facts{Target: target, Root: os.Geteuid() == 0, RealNodeCgroupV2: realNodeCgroupV2}
	f.Cgroup, f.V1Hierarchies = cgroups()
	if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && f.Cgroup == CgroupV2 {
		f.V2Controllers = strings.Fields(string(b))
	}
	_, errApt := exec.LookPath("apt-get")
	_, errDpkg := exec.LookPath("dpkg-query")
	f.Apt = errApt == nil && errDpkg == nil
	for _, p := range packages {
		if !f.Apt || !installed(p) {
			f.MissingPackages = append(f.MissingPackages, p)
		}
	}
	for _, c := range slices.Sorted(maps.Keys(requiredCommands)) {
		if _, err := exec.LookPath(c); err != nil {
			f.MissingCommands = append(f.MissingCommands, c)
		}
	}
	f.Moto = moto()
	f.Disks = disks()
	return f
}

// realNodeCgroupV2: test/testenv's real node runs on a pure cgroup v2 host
// too, in its own subtree of the unified hierarchy (test/testenv/cgroupv2.go).
const realNodeCgroupV2 = true

// cgroups reads the file system type of /sys/fs/cgroup and the v1
// hierarchies of /proc/self/mountinfo (their controllers are the mount's
// super options: "rw,freezer").
func cgroups() (CgroupLayout, []string) {
	var st syscall.Statfs_t
	layout := CgroupNone
	if err := syscall.Statfs("/sys/fs/cgroup", &st); err == nil {
		switch st.Type {
		case 0x63677270: // CGROUP2_SUPER_MAGIC
			layout = CgroupV2
		case 0x01021994, 0x27e0eb: // TMPFS_MAGIC, CGROUP_SUPER_MAGIC
			layout = CgroupV1
		}
	}
	file, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return layout, nil
	}
	defer file.Close()
	var v1 []string
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		_, post, ok := strings.Cut(sc.Text(), " - ")
		fs := strings.Fields(post)
		if !ok || len(fs) < 3 || fs[0] != "cgroup" {
			continue
		}
		v1 = append(v1, strings.Split(fs[2], ",")...)
	}
	return layout, v1
}

func installed(pkg string) bool {
	out, err := exec.Command("dpkg-query", "-W", "-f=${Status}", pkg).Output()
	return err == nil && strings.Contains(string(out), "install ok installed")
}

// moto is test/testenv/moto.go's motoCommand's condition.
func moto() bool {
	if py, err := exec.LookPath("python3"); err == nil {
		if exec.Command(py, "-c", "import moto.server, jsonpath_ng.ext").Run() == nil {
			return true
		}
	}
	_, err := exec.LookPath("moto_server")
	return err == nil
}

func disks() []Disk {
	goenv := func(k string) string {
		out, _ := exec.Command("go", "env", k).Output()
		return strings.TrimSpace(string(out))
	}
	wd, _ := os.Getwd()
	var out []Disk
	for _, d := range []Disk{
		{What: "bin/", Path: filepath.Join(wd, "bin"), Need: needBin},
		{What: "the Go build cache", Path: goenv("GOCACHE"), Need: needGoCache, Fix: "go clean -cache"},
		{What: "the Go module cache", Path: goenv("GOMODCACHE"), Need: needModCache},
		{What: "the testbed (TMPDIR)", Path: os.TempDir(), Need: needTmp},
	} {
		if d.Path == "" {
			continue
		}
		// The cache directories may not exist yet: the first existing
		// parent holds them.
		p := d.Path
		var st syscall.Statfs_t
		var fi syscall.Stat_t
		for syscall.Stat(p, &fi) != nil && p != "/" {
			p = filepath.Dir(p)
		}
		if syscall.Statfs(p, &st) != nil {
			continue
		}
		d.Dev = uint64(fi.Dev)
		d.Free = st.Bavail * uint64(st.Bsize)
		out = append(out, d)
	}
	return out
}
