package main

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/leader"
	"lifeboat.dev/lifeboat/internal/metrics"
)

// restConfig is the one place the Kubernetes client configuration is
// built (run and check): --kubeconfig or in-cluster, with protobuf.
func restConfig(cfg config.Config, userAgent string) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	rc.UserAgent = userAgent
	// Protobuf: a node list decodes with a fraction of JSON's garbage (the
	// memory peak of a 5,000-node cache fill), and every lifeboat request is
	// for a built-in type.
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return rc, nil
}

// kubeClients are lifeboat's Kubernetes clients, made from one rest.Config.
type kubeClients struct {
	// main does the work: QPS/burst from the configuration, every request
	// counted, writes only while the fence is open.
	main kubernetes.Interface
	// nodes writes cordons, taints and node annotations with a rate limiter
	// of its own, so that a cordon never waits behind another node's
	// evictions: what stops new pods landing on a dying node goes first.
	// Counted and fenced like main.
	nodes kubernetes.Interface
	// events records Kubernetes Events with its own, smaller rate limit, so
	// that reporting never delays a cordon or an eviction; fenced too.
	events kubernetes.Interface
	// election is the leader election's own client: never fenced, never
	// queued behind a drain.
	election kubernetes.Interface
	// forecast reads pods and PodDisruptionBudgets for the drain forecast
	// with a small rate limit of its own: a forecast is never in the way
	// of an eviction (in a burst, forecasts come late instead). Reads
	// only; counted.
	forecast kubernetes.Interface
}

func newKubeClients(rc *rest.Config, cfg config.Config, m *metrics.Metrics, fence *leader.Fence) (kubeClients, error) {
	var c kubeClients
	mc, nc, ec, lc := rest.CopyConfig(rc), rest.CopyConfig(rc), rest.CopyConfig(rc), rest.CopyConfig(rc)
	mc.QPS, mc.Burst = cfg.KubeQPS, cfg.KubeBurst
	mc.Wrap(m.CountKubeRequests)
	mc.Wrap(fence.Transport)
	var err error
	if c.main, err = kubernetes.NewForConfig(mc); err != nil {
		return c, fmt.Errorf("kubernetes client: %w", err)
	}
	// Node writes are about one per interrupted node (cordon, then the
	// events annotation cleared when done): a burst of a thousand is
	// cordoned in a second or two, whatever the evictions queue holds.
	nc.QPS, nc.Burst = nodeLaneQPS, nodeLaneBurst
	nc.Wrap(m.CountKubeRequests)
	nc.Wrap(fence.Transport)
	if c.nodes, err = kubernetes.NewForConfig(nc); err != nil {
		return c, fmt.Errorf("kubernetes node client: %w", err)
	}
	ec.QPS, ec.Burst = 20, 50
	ec.Wrap(fence.Transport)
	if c.events, err = kubernetes.NewForConfig(ec); err != nil {
		return c, fmt.Errorf("kubernetes events client: %w", err)
	}
	lc.QPS, lc.Burst = 5, 10
	if c.election, err = kubernetes.NewForConfig(lc); err != nil {
		return c, fmt.Errorf("kubernetes leader election client: %w", err)
	}
	fc := rest.CopyConfig(rc)
	fc.QPS, fc.Burst = 10, 20
	fc.Wrap(m.CountKubeRequests)
	if c.forecast, err = kubernetes.NewForConfig(fc); err != nil {
		return c, fmt.Errorf("kubernetes forecast client: %w", err)
	}
	return c, nil
}

// The node-write lane's rate limit (kubeClients.nodes).
const (
	nodeLaneQPS   = 500
	nodeLaneBurst = 1000
)
