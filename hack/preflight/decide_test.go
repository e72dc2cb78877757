package main

import (
	"strings"
	"testing"
)

// thisMachine is the CI machine: root, cgroup v1 hybrid (v1 hierarchies
// under a tmpfs /sys/fs/cgroup, the unified one beside them), Debian with
// every package, moto, room on one disk.
func thisMachine() Facts {
	return Facts{
		Target: "test", Root: true, Cgroup: CgroupV1,
		V1Hierarchies: []string{"cpu", "cpuacct", "cpuset", "memory", "freezer", "pids", "devices", "blkio", "hugetlb", "name=systemd"},
		Apt:           true, Moto: true,
		Disks: []Disk{
			{What: "bin/", Path: "/work/bin", Dev: 1, Free: 70 << 30, Need: needBin},
			{What: "the Go build cache", Path: "/root/.cache/go-build", Dev: 1, Free: 70 << 30, Need: needGoCache, Fix: "go clean -cache"},
			{What: "the Go module cache", Path: "/root/go/pkg/mod", Dev: 1, Free: 70 << 30, Need: needModCache},
			{What: "the testbed (TMPDIR)", Path: "/tmp", Dev: 1, Free: 70 << 30, Need: needTmp},
		},
	}
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Facts)
		ok     bool
		// want: the message is exactly this (when exact) or contains
		// each line.
		exact string
		want  []string
		// problems is the number of problems listed.
		problems int
	}{
		{name: "this machine", change: func(*Facts) {}, ok: true,
			exact: "preflight: OK (root, cgroup v1, moto, disk)\n"},
		{name: "packages missing, root with apt: make deps installs them", ok: true,
			change: func(f *Facts) { f.MissingPackages = []string{"containerd", "chromium"} },
			exact:  "preflight: OK (root, cgroup v1, moto, disk); make deps installs now: containerd chromium\n"},
		{name: "pure cgroup v2 host, real node on v1 only", problems: 1,
			change: func(f *Facts) { f.Cgroup, f.V1Hierarchies = CgroupV2, nil },
			want: []string{"preflight: make test cannot run on this machine; 1 missing:",
				"cgroup v2 host (/sys/fs/cgroup is cgroup2fs): the real-node suites and the demo need cgroup v1's freezer",
				"systemd.unified_cgroup_hierarchy=0"}},
		{name: "pure cgroup v2 host, real node supports v2", ok: true,
			change: func(f *Facts) {
				f.Cgroup, f.V1Hierarchies, f.RealNodeCgroupV2 = CgroupV2, nil, true
				f.V2Controllers = []string{"cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc"}
			},
			exact: "preflight: OK (root, cgroup v2, moto, disk); note: the real node's cgroup v2 path was tested on a hybrid host's unified hierarchy, not end to end (docs/testing.md)\n"},
		{name: "pure cgroup v2 host without the cpuset and pids controllers", problems: 1,
			change: func(f *Facts) {
				f.Cgroup, f.V1Hierarchies, f.RealNodeCgroupV2 = CgroupV2, nil, true
				f.V2Controllers = []string{"cpu", "io", "memory"}
			},
			want: []string{"cgroup v2 controllers not offered by /sys/fs/cgroup (cgroup.controllers): cpuset, pids; the kubelet and runc need them.",
				"fix: remove cgroup_disable=cpuset,pids"}},
		{name: "v1 without the freezer hierarchy", problems: 1,
			change: func(f *Facts) { f.V1Hierarchies = []string{"cpu", "cpuacct", "cpuset", "memory"} },
			want: []string{"cgroup v1 hierarchy freezer is not mounted (the real node's power-off and clean-up freeze its cgroup subtree)",
				"fix: sudo mkdir -p /sys/fs/cgroup/freezer && sudo mount -t cgroup -o freezer freezer /sys/fs/cgroup/freezer"}},
		{name: "no cgroup file system", problems: 6,
			change: func(f *Facts) { f.Cgroup, f.V1Hierarchies = CgroupNone, nil },
			want:   []string{"no cgroup file system at /sys/fs/cgroup", "cgroup v1 hierarchy cpuset is not mounted (the kubelet needs it on cgroup v1)"}},
		{name: "not root, packages missing, no moto", problems: 3,
			change: func(f *Facts) { f.Root, f.MissingPackages, f.Moto = false, []string{"containerd", "runc"}, false },
			want: []string{"preflight: make test cannot run on this machine; 3 missing:",
				"not root", `fix: sudo env "PATH=$PATH" make test`,
				"Debian packages missing: containerd runc (make deps installs them as root).",
				"fix: sudo apt-get update && sudo apt-get install -y --no-install-recommends containerd runc",
				"moto_server (moto 5) is not on PATH", "fix: pip install 'moto[server]>=5,<6'"}},
		{name: "not a Debian host", problems: 1,
			change: func(f *Facts) { f.Apt, f.MissingPackages = false, []string{"containerd"} },
			want:   []string{"no apt-get/dpkg-query (not a Debian or Ubuntu host): containerd", "with your package manager"}},
		{name: "disk: the needs on one file system add up", problems: 1,
			change: func(f *Facts) {
				for i := range f.Disks {
					f.Disks[i].Free = 10 << 30 // 13 GiB needed in all
				}
			},
			want: []string{"disk: 10.0 GiB free on the file system of /work/bin, 13.0 GiB needed (bin/ 1.0 GiB, the Go build cache 8.0 GiB, the Go module cache 2.0 GiB, the testbed (TMPDIR) 2.0 GiB)",
				"fix: free space there (df -h /work/bin), e.g. go clean -cache"}},
		{name: "disk: file systems apart, each has room", ok: true,
			change: func(f *Facts) {
				for i := range f.Disks {
					f.Disks[i].Dev, f.Disks[i].Free = uint64(i), 8<<30
				}
			},
			exact: "preflight: OK (root, cgroup v1, moto, disk)\n"},
		{name: "prometheus missing, root with apt: make deps installs it", ok: true,
			change: func(f *Facts) {
				f.MissingPackages, f.MissingCommands = []string{"prometheus"}, []string{"prometheus", "promtool"}
			},
			exact: "preflight: OK (root, cgroup v1, moto, disk); make deps installs now: prometheus\n"},
		{name: "prometheus missing, not root: the package is named once", problems: 2,
			change: func(f *Facts) {
				f.Root, f.MissingPackages, f.MissingCommands = false, []string{"prometheus"}, []string{"prometheus", "promtool"}
			},
			want: []string{"Debian packages missing: prometheus (make deps installs them as root).",
				"fix: sudo apt-get update && sudo apt-get install -y --no-install-recommends prometheus"}},
		{name: "package installed, promtool not on PATH", problems: 1,
			change: func(f *Facts) { f.MissingCommands = []string{"promtool"} },
			want: []string{"promtool not on PATH although Debian's prometheus package is installed: test/prom runs Prometheus and test/monitoring promtool.",
				"fix: sudo apt-get install --reinstall prometheus"}},
		{name: "not a Debian host, without Prometheus", problems: 1,
			change: func(f *Facts) {
				f.Apt, f.MissingPackages, f.MissingCommands = false, []string{"containerd", "prometheus"}, []string{"prometheus", "promtool"}
			},
			want: []string{"no apt-get/dpkg-query (not a Debian or Ubuntu host): containerd prometheus", "Prometheus with promtool"}},
		{name: "demo: the target is named", problems: 1,
			change: func(f *Facts) { f.Target, f.Root = "demo", false },
			want:   []string{"preflight: make demo cannot run", `make demo`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := thisMachine()
			tc.change(&f)
			msg, ok := Decide(f)
			if ok != tc.ok {
				t.Errorf("ok = %v, want %v; message:\n%s", ok, tc.ok, msg)
			}
			if tc.exact != "" && msg != tc.exact {
				t.Errorf("message:\n%s\nwant:\n%s", msg, tc.exact)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message lacks %q:\n%s", w, msg)
				}
			}
			if n := strings.Count(msg, "\n  - "); !tc.ok && n != tc.problems {
				t.Errorf("%d problems listed, want %d:\n%s", n, tc.problems, msg)
			}
		})
	}
}
