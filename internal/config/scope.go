package config

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// KarpenterNodes says whether lifeboat acts on nodes Karpenter manages.
type KarpenterNodes string

// Karpenter policies.
const (
	// KarpenterSkip leaves Karpenter's nodes to Karpenter, which handles
	// their interruptions from its own queue.
	KarpenterSkip KarpenterNodes = "skip"
	// KarpenterHandle treats them like any other node.
	KarpenterHandle KarpenterNodes = "handle"
)

// KarpenterNodeLabel is the label Karpenter puts on every node it launches.
const KarpenterNodeLabel = "karpenter.sh/nodepool"

// NodeScope is the label selector of the nodes lifeboat acts on:
// --node-selector, and, with --karpenter-nodes=skip, no karpenter.sh/nodepool
// label. Empty means every node. Nodes outside it are not watched at all, so
// a message about one is treated exactly like one about another cluster's
// instance (--unknown-instance).
func (c Config) NodeScope() string {
	var parts []string
	if s := strings.TrimSpace(c.NodeSelector); s != "" {
		parts = append(parts, s)
	}
	if c.KarpenterNodes == KarpenterSkip {
		parts = append(parts, "!"+KarpenterNodeLabel)
	}
	return strings.Join(parts, ",")
}

func (c *Config) validateScope() []error {
	var errs []error
	if _, err := labels.Parse(c.NodeSelector); err != nil {
		errs = append(errs, fmt.Errorf("--node-selector %q: %w", c.NodeSelector, err))
	}
	if c.KarpenterNodes != KarpenterSkip && c.KarpenterNodes != KarpenterHandle {
		errs = append(errs, fmt.Errorf("--karpenter-nodes %q: must be skip or handle", c.KarpenterNodes))
	}
	if c.VolumeDetachTimeout < 0 {
		errs = append(errs, fmt.Errorf("--volume-detach-timeout %s: must be ≥ 0", c.VolumeDetachTimeout))
	}
	if c.GhostNodeAfter < 0 {
		errs = append(errs, fmt.Errorf("--ghost-node-after %s: must be ≥ 0", c.GhostNodeAfter))
	}
	if c.WaitForLoadBalancers && !c.CompleteLifecycle {
		errs = append(errs, errors.New("--wait-for-load-balancers holds the completion of terminate actions: it needs --complete-lifecycle"))
	}
	if c.DeleteGhostNodes && c.GhostNodeAfter == 0 {
		errs = append(errs, errors.New("--delete-ghost-nodes needs --ghost-node-after > 0 (how long a terminated instance's Node may stay)"))
	}
	return errs
}
