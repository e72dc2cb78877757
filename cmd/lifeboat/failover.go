//go:build !imdsonly

package main

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/failover"
	"lifeboat.dev/lifeboat/internal/source/sqs"
)

// journalSuffix names the failover journal after the Lease:
// <lease-name>-inflight-0 to -3 (the chart's Role grants exactly those).
const journalSuffix = "-inflight"

// failoverJournal is the journal of the messages the leader holds, or nil
// when there is none (--failover-journal=false, no leader election, or a
// dry run, which writes nothing).
func (a *app) failoverJournal() (*failover.Journal, error) {
	cfg := a.cfg
	if !cfg.FailoverJournal || !cfg.LeaderElect || cfg.DryRun {
		return nil, nil
	}
	cs, err := kubernetes.NewForConfig(a.kube.journalConfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client of the failover journal: %w", err)
	}
	labels := map[string]string{"app.kubernetes.io/managed-by": "lifeboat", "lifeboat.io/journal-of": cfg.LeaseName}
	return failover.New(cs.CoreV1().ConfigMaps(cfg.LeaseNamespace), cfg.LeaseName+journalSuffix, labels, a.clock, a.log), nil
}

// journaled runs consume (the source's Run) with the journal kept: first
// the messages a previous leader left in it are made visible, then what
// the source holds is written while it runs, and emptied once it has
// handed its messages back.
func (a *app) journaled(ctx context.Context, j *failover.Journal, source *sqs.Source, consume func() error) error {
	if j == nil {
		return consume()
	}
	if err := j.Recover(ctx, source.Reveal); err != nil {
		// Not fatal: the previous leader's messages come back after
		// their visibility timeout, as without the journal.
		a.log.Warn("the failover journal could not be read; a previous leader's messages come back after their visibility timeout", "error", err.Error())
	}
	jctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { defer close(done); j.Run(jctx, source) }()
	defer func() { stop(); <-done }()
	return consume()
}
