// Package outofservice looks after the nodes lifeboat handled once their
// instance has gone (queue mode): it adds node.kubernetes.io/out-of-service
// once EC2 confirms that the instance has shut down and removes it when the
// instance runs again (--out-of-service-taint), and it reports, and with
// --delete-ghost-nodes deletes, a Node still there a bound after EC2 said
// its instance terminated (--ghost-node-after).
//
// The taint makes the control plane force-delete the pods left on the node
// and detach their volumes; Kubernetes documents that it may be added only
// once the node is shut down, never while it may still run them. So the
// taint follows EC2's word on the instance: a state-change notification on
// the queue (Observe), or, when none came, DescribeInstances for the nodes
// lifeboat drained, batched and at a bounded rate.
//
// It owns those decisions (Decide and Ghost, pure) and the loop that
// applies them (Watcher). It must not cordon or drain, and it writes to
// Nodes only through package drain.
package outofservice

import "time"

// EC2 instance states, exactly as EC2 spells them.
const (
	StatePending      = "pending"
	StateRunning      = "running"
	StateShuttingDown = "shutting-down"
	StateTerminated   = "terminated"
	StateStopping     = "stopping"
	StateStopped      = "stopped"
)

// Action is what to do with a node's out-of-service taint.
type Action int

const (
	// Keep changes nothing.
	Keep Action = iota
	// Add taints the node: its instance has shut down.
	Add
	// Remove takes lifeboat's taint off: the instance runs again.
	Remove
)

func (a Action) String() string {
	switch a {
	case Add:
		return "add"
	case Remove:
		return "remove"
	}
	return "keep"
}

// Decide says what to do with the out-of-service taint of a node lifeboat
// handled, given its instance's state ("" when nothing current is known),
// whether the node carries the taint (anyone's) and whether lifeboat added
// it.
//
// Only stopped and terminated confirm a shutdown. stopping and
// shutting-down do not: the operating system may still be shutting down,
// its containers running and its volumes attached, so lifeboat waits for
// the next state. pending and running mean the instance runs (again): a
// taint lifeboat added goes; one it did not add is never touched.
func Decide(state string, tainted, ours bool) Action {
	switch state {
	case StateStopped, StateTerminated:
		if !tainted {
			return Add
		}
	case StatePending, StateRunning:
		if ours {
			return Remove
		}
	}
	return Keep
}

// Ghost reports whether a node is a ghost at now: its instance is
// terminated (EC2 said so at terminatedAt) and the Node is still there
// after, which the cloud controller normally deletes well within that.
// after 0 means never.
func Ghost(state string, terminatedAt, now time.Time, after time.Duration) bool {
	return after > 0 && state == StateTerminated && !now.Before(terminatedAt.Add(after))
}

// final reports whether an instance never leaves state: a terminated
// instance is gone for good, so what was learned about it never goes
// stale.
func final(state string) bool { return state == StateTerminated }
