package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RealNodeOptions configure a real node.
type RealNodeOptions struct {
	// Name is the node's name (the kubelet's hostname override); empty
	// means an EC2-style private DNS name.
	Name string
	// InstanceID and AZ make the providerID aws:///<AZ>/<InstanceID>;
	// defaults: a random ID, us-east-1a.
	InstanceID, AZ string
	// Labels are added to the node's labels at registration.
	Labels map[string]string
	// Images are image archives (BuildImages) imported before the kubelet
	// starts; they must include SandboxImage.
	Images map[string]string
	// ReadyTimeout bounds the wait for the node to be Ready; default 90 s.
	ReadyTimeout time.Duration
	// KubeletAddress is the address the kubelet serves on and reports as
	// the node's InternalIP (--node-ip); default 127.0.0.1, which a kubelet
	// refuses as a node IP (the node then has no address) and the API
	// server's node proxy refuses to dial. A test that goes through the
	// node proxy gives one of the machine's own addresses.
	KubeletAddress string
	// KubeletConfig are KubeletConfiguration fields (YAML lines) added to
	// the node's kubelet configuration, e.g. "shutdownGracePeriod: 150s".
	KubeletConfig string
	// Netns, when set, is the node's network, as an EC2 instance's is its
	// own: its containerd and kubelet run in it (Netns.Enter), and so do
	// its host-network pods and its pod network's bridge; the kubelet
	// reaches the API server through Netns.Kubeconfig, a host-network pod
	// through Netns.Reach (PodReach does not serve such a node). The
	// kubelet's port answers only inside it. Only StartRealNode takes it.
	Netns *Netns

	// kubeconfig is the kubelet's kubeconfig when it is not the Env's
	// (StartRealNode sets it for Netns).
	kubeconfig string
}

// RealNode is a real Kubernetes node on this machine: a kubelet built from
// the pinned module with its own containerd (root, state, socket), CNI
// bridge and subnet, ports, directories and cgroup subtree, so that several
// can run side by side and each can be powered off exactly (every process
// of its containerd, shims and containers is in its cgroup subtree).
//
// Everything it makes lives under Dir and the cgroup subtree, bar a few
// host-wide traces that teardown also removes: the CNI bridge, the CNI
// result cache entries in /var/lib/cni, the shims' sockets under
// /run/containerd/s and the kubelet's links in /var/log/containers. A node's slot is held by a lock file for the life of
// the process; a slot whose lock is free is swept (processes killed,
// mounts, bridge, cgroups and files removed) before it is used again, so a
// crashed or interrupted run leaves nothing behind for long.
type RealNode struct {
	Name, ProviderID, InstanceID string
	// Dir holds everything of the node: configuration, the kubelet's root,
	// containerd's root and state, pod logs and the component logs.
	Dir string
	// Socket is the node's containerd socket.
	Socket string
	// PodCIDR is the node's pod subnet (host-local, on its own bridge).
	PodCIDR string
	// KubeletPort is the kubelet's HTTPS port on 127.0.0.1 (anonymous
	// access allowed: /stats/summary, /pods, /metrics/resource).
	KubeletPort int

	env         *Env
	o           RealNodeOptions
	slot        int
	lock        *os.File
	containerd  *Process
	kubelet     *Process
	kubeletRuns int
	// containerdRuns and kubeletRuns count starts; logs are named after
	// them (containerd-1.log, kubelet-1.log, ...).
	containerdRuns int
	poweredOff     bool
	closed         bool
}

// realNodesDir holds one directory and one lock file per slot.
var realNodesDir = filepath.Join(os.TempDir(), "lifeboat-realnodes")

// realNodeSlots bounds how many real nodes run at once on one machine.
const realNodeSlots = 16

// StartRealNode starts a real node for t: it is torn down in t's cleanup
// and its kubelet's and containerd's logs are printed when t fails.
func StartRealNode(t testing.TB, env *Env, o RealNodeOptions) *RealNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	if o.Netns != nil {
		o.kubeconfig = o.Netns.Kubeconfig(t, env)
	}
	n, err := NewRealNode(ctx, env, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			n.DumpLogs(failureLog(t), 40)
		}
		n.Close()
	})
	t.Logf("testenv: real node %s (%s) Ready in %v (dir %s)", n.Name, n.ProviderID, time.Since(start).Round(time.Millisecond), n.Dir)
	return n
}

// NewRealNode starts a real node and waits until it is Ready. On error
// nothing is left running and the error carries the logs' tails. The
// caller must call Close.
func NewRealNode(ctx context.Context, env *Env, o RealNodeOptions) (_ *RealNode, err error) {
	if err := checkRealNodeDeps(); err != nil {
		return nil, err
	}
	kubelet, err := BinPath("kubelet")
	if err != nil {
		return nil, err
	}
	if _, ok := o.Images[SandboxImage]; !ok {
		return nil, fmt.Errorf("real node: RealNodeOptions.Images must hold the sandbox image %s (BuildImages)", SandboxImage)
	}
	if o.Netns != nil && o.kubeconfig == "" {
		return nil, errors.New("real node: RealNodeOptions.Netns needs StartRealNode (its kubelet reaches the API server through the namespace)")
	}
	if o.AZ == "" {
		o.AZ = "us-east-1a"
	}
	if o.InstanceID == "" {
		o.InstanceID = RandomInstanceID()
	}
	if o.Name == "" {
		o.Name = UniqueName("ip-10-0-0")
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 90 * time.Second
	}
	slot, lock, err := acquireRealNodeSlot()
	if err != nil {
		return nil, err
	}
	n := &RealNode{
		Name: o.Name, InstanceID: o.InstanceID, ProviderID: ProviderID(o.AZ, o.InstanceID),
		Dir: slotDir(slot), PodCIDR: fmt.Sprintf("10.250.%d.0/24", slot),
		env: env, o: o, slot: slot, lock: lock,
	}
	n.Socket = filepath.Join(n.Dir, "containerd.sock")
	defer func() {
		if err != nil {
			err = fmt.Errorf("real node %s: %w\n%s", n.Name, err, n.logTails(30))
			n.Close()
		}
	}()
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return nil, err
	}
	if err := makeCgroup(n.cgroup("pods")); err != nil {
		return nil, err
	}
	if err := makeCgroup(n.cgroup("runtime")); err != nil {
		return nil, err
	}
	if err := n.startContainerd(ctx); err != nil {
		return nil, err
	}
	refs := make([]string, 0, len(o.Images))
	for ref := range o.Images {
		refs = append(refs, ref)
	}
	sort.Strings(refs)
	for _, ref := range refs {
		if err := n.ImportImage(ctx, o.Images[ref]); err != nil {
			return nil, fmt.Errorf("importing %s: %w", ref, err)
		}
	}
	if err := n.writeKubeletConfig(); err != nil {
		return nil, err
	}
	if err := n.StartKubelet(kubelet); err != nil {
		return nil, err
	}
	if err := n.WaitReady(ctx, o.ReadyTimeout); err != nil {
		return nil, err
	}
	return n, nil
}

// cgroup returns the path of the node's cgroup subtree (or a child of it),
// the same in every cgroup v1 hierarchy and in the unified one.
func (n *RealNode) cgroup(child ...string) string {
	return "/" + filepath.Join(append([]string{"lifeboat-realnodes", fmt.Sprintf("node-%d", n.slot)}, child...)...)
}

func (n *RealNode) bridge() string { return fmt.Sprintf("lbr%d", n.slot) }

// command is bin args as the node runs them: in its Netns when it has one.
func (n *RealNode) command(bin string, args ...string) (string, []string) {
	if n.o.Netns != nil {
		return n.o.Netns.Enter(bin, args...)
	}
	return bin, args
}

// Kubelet returns the kubelet's current run.
func (n *RealNode) Kubelet() *Process { return n.kubelet }

// Containerd returns the containerd process.
func (n *RealNode) Containerd() *Process { return n.containerd }

// WaitReady waits until the node's Ready condition is True, failing early
// when the kubelet or containerd exits.
func (n *RealNode) WaitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last *corev1.Node
	for {
		for _, p := range []*Process{n.kubelet, n.containerd} {
			if exited, err := p.Exited(); exited {
				return fmt.Errorf("%s exited (%v) before the node was Ready", p.Name, err)
			}
		}
		node, err := n.env.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err == nil {
			last = node
			if NodeReady(node) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node not Ready after %v (conditions %v)", timeout, conditionsOf(last))
		case <-tick.C:
		}
	}
}

// PowerOff ends the node as AWS powers off an instance: every process of
// the node (containers, shims, containerd, kubelet) stops at one instant
// and is killed with SIGKILL; nobody gets a signal it could handle. The
// Node object stays (the cloud controller deletes it). Close still has to
// be called.
func (n *RealNode) PowerOff() {
	if n.poweredOff {
		return
	}
	n.poweredOff = true
	frozen := freezeCgroup(n.cgroup())
	if n.kubelet != nil {
		n.kubelet.Kill()
	}
	killCgroup(n.cgroup(), frozen)
	if n.containerd != nil {
		n.containerd.Kill()
	}
	killProcessesMentioning(n.Dir)
}

// Close powers the node off if it still runs, deletes its Node object and
// removes every trace of it (DumpLogs first to keep its logs). It is safe
// to call more than once.
func (n *RealNode) Close() {
	if n.closed {
		return
	}
	n.closed = true
	n.PowerOff()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := n.env.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		fmt.Fprintf(os.Stderr, "real node %s: deleting the Node: %v\n", n.Name, err)
	}
	if err := sweepRealNodeSlot(n.slot); err != nil {
		fmt.Fprintf(os.Stderr, "real node %s: teardown: %v\n", n.Name, err)
	}
	_ = n.lock.Close() // releases the slot
}

// DumpLogs writes the tails of the kubelet's and containerd's logs to w.
func (n *RealNode) DumpLogs(w io.Writer, lines int) {
	fmt.Fprint(w, n.logTails(lines))
}

func (n *RealNode) logTails(lines int) string {
	var b strings.Builder
	for _, p := range []*Process{n.containerd, n.kubelet} {
		if p != nil {
			fmt.Fprintf(&b, "---- node %s: %s log (%s), last %d lines ----\n%s\n", n.Name, p.Name, p.LogPath, lines, p.Tail(lines))
		}
	}
	return b.String()
}

// errNoFreeSlot is returned when realNodeSlots nodes already run.
var errNoFreeSlot = errors.New("no free real-node slot")

// slotDir is the directory of a slot.
func slotDir(slot int) string { return filepath.Join(realNodesDir, fmt.Sprintf("node-%d", slot)) }

// acquireRealNodeSlot takes the first free slot, after sweeping every free
// slot's leftovers (a crashed earlier run), and returns it with its lock,
// which the process holds until Close (or its death) releases it.
func acquireRealNodeSlot() (int, *os.File, error) {
	if err := os.MkdirAll(realNodesDir, 0o755); err != nil {
		return 0, nil, err
	}
	var taken *os.File
	slot := -1
	for i := range realNodeSlots {
		path := filepath.Join(realNodesDir, fmt.Sprintf("node-%d.lock", i))
		if _, err := os.Stat(path); err != nil && taken != nil {
			continue // never used: nothing to sweep
		}
		f, err := lockSlot(i)
		if err != nil {
			return 0, nil, err
		}
		if f == nil {
			continue // in use by a live node or network namespace
		}
		if err := sweepRealNodeSlot(i); err != nil {
			f.Close()
			return 0, nil, fmt.Errorf("removing the leftovers of real-node slot %d: %w", i, err)
		}
		if taken == nil {
			taken, slot = f, i
			continue
		}
		f.Close()
	}
	if taken == nil {
		return 0, nil, errNoFreeSlot
	}
	return slot, taken, nil
}

// lockSlot takes a slot's lock file without waiting: nil when another
// holder (a live node or network namespace, in any process) has it.
func lockSlot(slot int) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(realNodesDir, fmt.Sprintf("node-%d.lock", slot)), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, nil
	}
	return f, nil
}
