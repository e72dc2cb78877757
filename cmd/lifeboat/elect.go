//go:build !imdsonly

package main

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/leader"
)

// writeFence: only the holder of the Lease acts; the fence stops a replica
// that lost it without noticing (it was paused) from sending any write.
type writeFence = leader.Fence

func newFence(clk clock.PassiveClock, leaderElection bool) *writeFence {
	return leader.NewFence(clk, leaderElection)
}

// elect runs lead while this replica leads (or always, without leader
// election).
func (a *app) elect(ctx context.Context, lead func(context.Context) error) error {
	if !a.cfg.LeaderElect {
		a.ready.SetLeader(true)
		return lead(ctx)
	}
	client, err := kubernetes.NewForConfig(a.kube.electionConfig)
	if err != nil {
		return fmt.Errorf("kubernetes leader election client: %w", err)
	}
	a.log.Info("leader election", "lease", a.cfg.LeaseNamespace+"/"+a.cfg.LeaseName, "namespaceFrom", a.cfg.LeaseNamespaceFrom)
	host, _ := os.Hostname()
	id := leader.Identity(a.cfg.PodName, host)
	return leader.Run(ctx, leader.Options{
		Client: client, Name: a.cfg.LeaseName, Namespace: a.cfg.LeaseNamespace, Identity: id,
		LeaseDuration: a.cfg.LeaseDuration, Log: a.log, OnLeading: a.ready.SetLeader,
	}, a.fence, lead)
}

// mainClientset is a clientset sharing the main client's configuration and
// rate limiter, for what queue mode needs beyond kube.REST (the
// VolumeAttachment cache, scale-in protection's pod list).
func (a *app) mainClientset() (kubernetes.Interface, error) {
	cs, err := kubernetes.NewForConfig(a.kube.mainConfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return cs, nil
}

// clusterRecorder is queue mode's Event recorder: client-go's broadcaster,
// whose aggregation of similar Events and spam filter keep a burst of a
// thousand nodes from flooding the API server with Events. kube.Scheme
// (core/v1, policy/v1) names the objects Events are about.
func clusterRecorder(ctx context.Context, sink kube.EventSink, source corev1.EventSource) (kube.EventRecorder, func()) {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(sink)
	return b.NewRecorder(kube.Scheme, source), b.Shutdown
}
