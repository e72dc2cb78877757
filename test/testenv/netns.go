package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// Netns is a network namespace a test made for one node, joined to the
// host by a veth pair, as an EC2 instance's network is its own: what
// listens in it (the metadata service at 169.254.169.254:80) is not on the
// machine's interfaces, and what runs in it reaches the host's services
// only through Reach. The host side of the pair has a real-node slot's
// gateway address, which the API server's certificate names (pki.go), so
// TLS to the API server verifies from inside. The namespace, the pair and
// every forward are removed in t's cleanup, on failure too. It needs root
// and iproute2's ip: without them t fails.
type Netns struct {
	Name   string
	HostIP string // the host side of the veth pair
	NSIP   string // the namespace's side
}

// NewNetns creates a network namespace with a veth pair to the host, on
// the first real-node slot whose gateway address is not on the host.
func NewNetns(t testing.TB) *Netns {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("creating a network namespace needs root (ip netns add)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("creating a network namespace needs iproute2's ip: %v", err)
	}
	// The slot's lock is held for the namespace's life, so that no other
	// test process (packages run side by side) takes the same gateway.
	if err := os.MkdirAll(realNodesDir, 0o755); err != nil {
		t.Fatal(err)
	}
	slot := -1
	for s := realNodeSlots - 1; s >= 0; s-- {
		if hostHas(slotGateway(s)) {
			continue
		}
		lock, err := lockSlot(s)
		if err != nil {
			t.Fatal(err)
		}
		if lock != nil {
			slot = s
			t.Cleanup(func() { _ = lock.Close() }) // registered first: released last
			break
		}
	}
	if slot < 0 {
		t.Fatal("every real-node slot is held or its gateway address is in use on the host")
	}
	suffix := strings.ToLower(RandomInstanceID()[len("i-0123456789"):]) // 7 hex digits
	n := &Netns{Name: "lb-" + suffix, HostIP: slotGateway(slot), NSIP: fmt.Sprintf("10.250.%d.2", slot)}
	hostIf, nsIf := "lbh"+suffix, "lbn"+suffix
	t.Cleanup(func() {
		// Deleting the namespace deletes its end of the pair, and with
		// it the host's; the host's is deleted first in case the
		// namespace never got its end.
		_ = exec.Command("ip", "link", "del", hostIf).Run()
		if out, err := exec.Command("ip", "netns", "del", n.Name).CombinedOutput(); err != nil && !strings.Contains(string(out), "No such file") {
			t.Errorf("ip netns del %s: %v: %s", n.Name, err, out)
		}
	})
	steps := [][]string{
		{"netns", "add", n.Name},
		{"link", "add", hostIf, "type", "veth", "peer", "name", nsIf},
		{"link", "set", nsIf, "netns", n.Name},
		{"addr", "add", n.HostIP + "/24", "dev", hostIf},
		{"link", "set", hostIf, "up"},
		{"-n", n.Name, "addr", "add", n.NSIP + "/24", "dev", nsIf},
		{"-n", n.Name, "link", "set", nsIf, "up"},
		{"-n", n.Name, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	return n
}

// hostHas reports whether ip is one of the host's addresses.
func hostHas(ip string) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.String() == ip {
			return true
		}
	}
	return false
}

// AddAddress adds an address (CIDR) to the namespace's loopback: the
// metadata service's 169.254.169.254/32.
func (n *Netns) AddAddress(t testing.TB, cidr string) {
	t.Helper()
	if out, err := exec.Command("ip", "-n", n.Name, "addr", "add", cidr, "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("ip -n %s addr add %s dev lo: %v: %s", n.Name, cidr, err, out)
	}
}

// Command is bin args run inside the namespace: ip netns exec execs bin,
// so the process started is bin itself (its PID, its signals).
func (n *Netns) Command(bin string, args ...string) (string, []string) {
	return "ip", append([]string{"netns", "exec", n.Name, bin}, args...)
}

// Enter is bin args run in the namespace's network only: nsenter joins
// the network namespace and execs bin (its PID, its signals), in the
// caller's mount namespace. A real node's kubelet and containerd are
// started so (RealNodeOptions.Netns): unlike Command, which gives each
// process a mount namespace of its own, they then share theirs with each
// other and with the test, so the volumes the kubelet mounts reach the
// containers and teardown finds every mount.
func (n *Netns) Enter(bin string, args ...string) (string, []string) {
	return "nsenter", append([]string{"--net=/run/netns/" + n.Name, "--", bin}, args...)
}

// Reach makes target (a loopback service of the host) reachable from
// inside the namespace and returns the address to dial there: a port on
// the host side of the pair, forwarded to target until t's cleanup.
func (n *Netns) Reach(t testing.TB, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(n.HostIP, "0"))
	if err != nil {
		t.Fatalf("forwarding to %s: %v", target, err)
	}
	f := &forwarder{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go f.serve()
	t.Cleanup(f.close)
	return net.JoinHostPort(n.HostIP, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
}

// Kubeconfig writes a copy of e's admin kubeconfig whose server is
// reached from inside the namespace (through Reach) and returns its path.
func (n *Netns) Kubeconfig(t testing.TB, e *Env) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(e.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(e.URL, "https://")
	addr := n.Reach(t, host)
	for _, c := range cfg.Clusters {
		c.Server = "https://" + addr
	}
	path := t.TempDir() + "/kubeconfig"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
