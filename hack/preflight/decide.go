package main

import (
	"fmt"
	"slices"
	"strings"
)

// CgroupLayout is how the host mounts cgroups.
type CgroupLayout string

// Cgroup layouts (stat -fc %T /sys/fs/cgroup).
const (
	// CgroupV1: /sys/fs/cgroup is a tmpfs holding v1 hierarchies (with or
	// without the unified one beside them: "hybrid").
	CgroupV1 CgroupLayout = "v1"
	// CgroupV2: /sys/fs/cgroup is the unified hierarchy itself (cgroup2fs).
	CgroupV2 CgroupLayout = "v2"
	// CgroupNone: no cgroup file system at /sys/fs/cgroup.
	CgroupNone CgroupLayout = "none"
)

// requiredV1 are the cgroup v1 hierarchies the real node needs: the
// kubelet (cgroupfs driver, cgroup v1) refuses to start without cpu,
// cpuacct, cpuset and memory (validateSystemRequirements in
// pkg/kubelet/cm/container_manager_linux.go); test/testenv's power-off and
// clean-up freeze the node's subtree through freezer (realnode_clean.go).
var requiredV1 = []string{"cpu", "cpuacct", "cpuset", "memory", "freezer"}

// requiredV2 are the controllers the kubelet and runc need on a cgroup v2
// host, offered by the root (/sys/fs/cgroup/cgroup.controllers); the
// freezer and cgroup.kill are core to v2.
var requiredV2 = []string{"cpu", "cpuset", "memory", "pids"}

// Disk is the free space a run needs on one path's file system.
type Disk struct {
	What string // "the Go build cache (GOCACHE)"
	Path string
	// Dev identifies the file system: paths on the same one add their needs.
	Dev uint64
	// Free and Need are in bytes.
	Free, Need uint64
	// Fix frees space there, if there is one command for it.
	Fix string
}

// Facts are what the probes observed on this machine.
type Facts struct {
	// Target is the make target being checked (demo, test).
	Target string
	Root   bool
	Cgroup CgroupLayout
	// V1Hierarchies are the controllers mounted as cgroup v1 hierarchies.
	V1Hierarchies []string
	// V2Controllers are the controllers the root offers on a v2 host.
	V2Controllers []string
	// RealNodeCgroupV2 says whether test/testenv's real node runs on a
	// cgroup v2 host.
	RealNodeCgroupV2 bool
	// Apt says whether apt-get and dpkg-query are there.
	Apt bool
	// MissingPackages are the Debian packages of DEBIAN_PACKAGES not
	// installed (dpkg-query).
	MissingPackages []string
	// MissingCommands are the commands of requiredCommands not on PATH.
	MissingCommands []string
	// Moto says whether moto's server can start (moto_server on PATH, or
	// a python3 that imports moto.server: test/testenv/moto.go).
	Moto  bool
	Disks []Disk
}

// requiredCommands are the programs the tests run from PATH, and the
// Debian package of DEBIAN_PACKAGES that installs them: test/prom runs
// Prometheus, test/monitoring promtool.
var requiredCommands = map[string]string{"prometheus": "prometheus", "promtool": "prometheus"}

// Decide returns the one message preflight prints and whether the run can
// go on. Every problem is listed at once, each with the command that fixes
// it.
func Decide(f Facts) (msg string, ok bool) {
	var problems []string
	add := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	if !f.Root {
		add("not root: the real node (kubelet, containerd) mounts, creates network namespaces and cgroups.\n    fix: sudo env \"PATH=$PATH\" make %s", f.Target)
	}
	switch f.Cgroup {
	case CgroupV2:
		var missing []string
		for _, c := range requiredV2 {
			if !slices.Contains(f.V2Controllers, c) {
				missing = append(missing, c)
			}
		}
		if f.RealNodeCgroupV2 && len(missing) > 0 {
			add("cgroup v2 controllers not offered by /sys/fs/cgroup (cgroup.controllers): %s; the kubelet and runc need them.\n    fix: remove cgroup_disable=%s (or their v1 mounts) from the kernel command line in /etc/default/grub, then sudo update-grub && sudo reboot",
				strings.Join(missing, ", "), strings.Join(missing, ","))
		}
		if !f.RealNodeCgroupV2 {
			add("cgroup v2 host (/sys/fs/cgroup is cgroup2fs): the real-node suites and the demo need cgroup v1's freezer; the real node does not support cgroup v2 yet (issue 24).\n" +
				"    fix: boot with cgroup v1: sudo sed -i 's/^GRUB_CMDLINE_LINUX=\"/&systemd.unified_cgroup_hierarchy=0 SYSTEMD_CGROUP_ENABLE_LEGACY_FORCE=1 /' /etc/default/grub && sudo update-grub && sudo reboot (systemd 258 and later have no cgroup v1)")
		}
	case CgroupNone:
		add("no cgroup file system at /sys/fs/cgroup: the real node's kubelet and containerd need cgroups.\n    fix: sudo mount -t tmpfs cgroup /sys/fs/cgroup, then mount the v1 hierarchies (and the hierarchies below)")
		fallthrough
	case CgroupV1:
		for _, c := range requiredV1 {
			if slices.Contains(f.V1Hierarchies, c) {
				continue
			}
			why := "the kubelet needs it on cgroup v1"
			if c == "freezer" {
				why = "the real node's power-off and clean-up freeze its cgroup subtree"
			}
			add("cgroup v1 hierarchy %s is not mounted (%s).\n    fix: sudo mkdir -p /sys/fs/cgroup/%s && sudo mount -t cgroup -o %s %s /sys/fs/cgroup/%s", c, why, c, c, c, c)
		}
	}
	pkgs := strings.Join(f.MissingPackages, " ")
	switch {
	case len(f.MissingPackages) == 0:
	case !f.Apt:
		add("Debian packages missing and no apt-get/dpkg-query (not a Debian or Ubuntu host): %s.\n    fix: install their equivalents with your package manager (containerd, runc, the CNI plugins in /usr/lib/cni, iptables, iproute2, chromium, Prometheus with promtool, the CA certificates bundle)", pkgs)
	case !f.Root:
		add("Debian packages missing: %s (make deps installs them as root).\n    fix: sudo apt-get update && sudo apt-get install -y --no-install-recommends %s", pkgs, pkgs)
	}
	if cmds := commandsNotInstalledNext(f); len(cmds) > 0 {
		add("%s not on PATH although Debian's prometheus package is installed: test/prom runs Prometheus and test/monitoring promtool.\n    fix: sudo apt-get install --reinstall prometheus, or put a prometheus and promtool (2.42 or later) on PATH", strings.Join(cmds, " and "))
	}
	problems = append(problems, diskProblems(f.Disks)...)
	if !f.Moto {
		add("moto_server (moto 5) is not on PATH, and python3 cannot import moto.server: the testbed's SQS, EC2 and EventBridge.\n    fix: pip install 'moto[server]>=5,<6'")
	}
	if len(problems) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "preflight: make %s cannot run on this machine; %d missing:\n", f.Target, len(problems))
		for _, p := range problems {
			fmt.Fprintf(&b, "  - %s\n", p)
		}
		return b.String(), false
	}
	okMsg := fmt.Sprintf("preflight: OK (root, cgroup %s, moto, disk)", f.Cgroup)
	if f.Cgroup == CgroupV2 {
		okMsg += "; note: the real node's cgroup v2 path was tested on a hybrid host's unified hierarchy, not end to end (docs/testing.md)"
	}
	if len(f.MissingPackages) > 0 {
		okMsg += "; make deps installs now: " + pkgs
	}
	return okMsg + "\n", true
}

// commandsNotInstalledNext returns the missing commands whose package is
// installed: a missing package is reported (or installed by make deps) as
// such.
func commandsNotInstalledNext(f Facts) []string {
	var out []string
	for _, c := range f.MissingCommands {
		if slices.Contains(f.MissingPackages, requiredCommands[c]) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// diskProblems adds up what the paths on each file system need.
func diskProblems(disks []Disk) []string {
	var out []string
	var devs []uint64
	for _, d := range disks {
		if !slices.Contains(devs, d.Dev) {
			devs = append(devs, d.Dev)
		}
	}
	for _, dev := range devs {
		var need, free uint64
		var whats, fixes []string
		path := ""
		for _, d := range disks {
			if d.Dev != dev {
				continue
			}
			if path == "" {
				path = d.Path
			}
			need += d.Need
			free = d.Free
			whats = append(whats, fmt.Sprintf("%s %s", d.What, gib(d.Need)))
			if d.Fix != "" {
				fixes = append(fixes, d.Fix)
			}
		}
		if free >= need {
			continue
		}
		fix := "free space there (df -h " + path + ")"
		if len(fixes) > 0 {
			fix += ", e.g. " + strings.Join(fixes, "; ")
		}
		out = append(out, fmt.Sprintf("disk: %s free on the file system of %s, %s needed (%s).\n    fix: %s",
			gib(free), path, gib(need), strings.Join(whats, ", "), fix))
	}
	return out
}

func gib(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }
