//go:build !imdsonly

package main

import (
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/asg"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/protect"
)

// protector keeps the instances of nodes running do-not-disrupt pods
// protected from scale-in (--scale-in-protection; the leader only).
func (a *app) protector(pods kubernetes.Interface, index *nodes.Index, drainer *drain.Drainer, client *asg.Client) *protect.Protector {
	return &protect.Protector{
		Pods: pods, Nodes: index, ASG: client, Annotate: drainer, Recorder: a.recorder,
		Clock: a.clock, Log: a.log, Interval: a.cfg.ScaleInProtectionInterval, DryRun: a.cfg.DryRun,
	}
}
