package testenv

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/test/awssim"
)

// RealMachines backs the Auto Scaling simulator's instances with real nodes
// (ScenarioOptions.Machines): an instance that starts running boots a
// kubelet named after its private DNS name with its providerID; one that
// stops or is terminated is powered off, its containers killed as AWS
// powers a machine off. A Scenario's cleanup does not close it: the test
// calls Close (t.Cleanup).
type RealMachines struct {
	Env *Env
	// Images are imported into every node (BuildImages).
	Images map[string]string
	// BootDelay is how long an instance takes to boot before its kubelet
	// starts.
	BootDelay time.Duration

	mu      sync.Mutex
	nodes   map[string]*RealNode // running, by instance ID
	all     []*RealNode
	offs    map[string]time.Time // by instance ID: last power-off
	closing bool
}

var _ Machines = (*RealMachines)(nil)

// ErrPoweredOff is Boot's error when the instance was stopped or
// terminated while it booted: its node is not started, or torn down.
var ErrPoweredOff = errors.New("instance powered off while booting")

// Boot starts the instance's node and waits until it is Ready.
func (m *RealMachines) Boot(ctx context.Context, inst awssim.Instance, labels map[string]string) (time.Time, error) {
	start := time.Now()
	m.mu.Lock()
	if m.nodes == nil {
		m.nodes, m.offs = map[string]*RealNode{}, map[string]time.Time{}
	}
	m.mu.Unlock()
	offSinceStart := func() bool {
		off, ok := m.offs[inst.ID]
		return ok && !off.Before(start)
	}
	if m.BootDelay > 0 {
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(m.BootDelay):
		}
	}
	m.mu.Lock()
	off := offSinceStart()
	m.mu.Unlock()
	if off {
		return time.Time{}, ErrPoweredOff
	}
	n, err := NewRealNode(ctx, m.Env, RealNodeOptions{Name: inst.PrivateDNSName, InstanceID: inst.ID, AZ: inst.AvailabilityZone,
		Labels: labels, Images: m.Images})
	if err != nil {
		return time.Time{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		n.Close()
		return time.Time{}, fmt.Errorf("machines closed while %s booted", inst.ID)
	}
	if offSinceStart() {
		n.Close()
		return time.Time{}, ErrPoweredOff
	}
	m.nodes[inst.ID] = n
	m.all = append(m.all, n)
	return n.readyAt(ctx), nil
}

// PowerOff powers the instance's node off (nothing when it has none).
func (m *RealMachines) PowerOff(inst awssim.Instance) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.nodes == nil {
		m.nodes, m.offs = map[string]*RealNode{}, map[string]time.Time{}
	}
	if n := m.nodes[inst.ID]; n != nil {
		n.PowerOff()
	}
	delete(m.nodes, inst.ID)
	m.offs[inst.ID] = time.Now()
}

// Node returns the running node of an instance, or nil.
func (m *RealMachines) Node(instanceID string) *RealNode {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nodes[instanceID]
}

// PoweredOff returns when the instance was last stopped or terminated
// (its node powered off, or its boot cut short).
func (m *RealMachines) PoweredOff(instanceID string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.offs[instanceID]
	return t, ok
}

// Close tears down every node booted so far.
func (m *RealMachines) Close() {
	m.mu.Lock()
	m.closing = true
	all := m.all
	m.mu.Unlock()
	for _, n := range all {
		n.Close()
	}
}

// readyAt returns when the kubelet reported the node Ready (the Ready
// condition's transition, whole seconds), or now if unknown.
func (n *RealNode) readyAt(ctx context.Context) time.Time {
	node, err := n.env.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err == nil {
		for _, c := range node.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				return c.LastTransitionTime.Time
			}
		}
	}
	return time.Now()
}
