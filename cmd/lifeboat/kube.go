package main

import (
	"fmt"
	"net/http"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/kubesource"
	"lifeboat.dev/lifeboat/internal/metrics"
)

// restConfig is the one place the Kubernetes client configuration is
// built (run and check): --kubeconfig, else in-cluster in a pod, else
// KUBECONFIG or ~/.kube/config (kubesource); with protobuf.
func restConfig(cfg config.Config, userAgent string) (*rest.Config, error) {
	rc, err := kubesource.Find(cfg.Kubeconfig, os.Getenv).RESTConfig()
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

// kubeClients are lifeboat's Kubernetes clients, made from one rest.Config:
// lifeboat's own REST clients (kube.REST, core/v1 and policy/v1 only), in
// both builds. What only queue mode uses (leader election, the
// VolumeAttachment cache, scale-in protection) makes client-go clientsets
// from mainConfig and electionConfig in the full build (queue.go).
type kubeClients struct {
	// main does the work: QPS/burst from the configuration, every request
	// counted, writes only while the fence is open.
	main *kube.REST
	// mainConfig is main's configuration, with main's rate limiter: a
	// clientset made from it shares main's budget.
	mainConfig *rest.Config
	// nodes writes cordons, taints and node annotations with a rate limiter
	// of its own, so that a cordon never waits behind another node's
	// evictions: what stops new pods landing on a dying node goes first.
	// Counted and fenced like main.
	nodes *kube.REST
	// events records Kubernetes Events with its own, smaller rate limit, so
	// that reporting never delays a cordon or an eviction; fenced too, not
	// counted (docs/metrics.md: lifeboat_kube_requests_total leaves Events
	// out).
	events *kube.REST
	// electionConfig is the leader election's own client configuration:
	// never fenced, never queued behind a drain; counted.
	electionConfig *rest.Config
	// journalConfig writes the failover journal (internal/failover), at
	// most a few ConfigMaps a second, with a limiter of its own so that
	// it never waits behind a storm's drains; counted and fenced: only
	// the leader writes it.
	journalConfig *rest.Config
	// forecast reads pods and PodDisruptionBudgets for the drain forecast
	// with a small rate limit of its own: a forecast is never in the way
	// of an eviction (in a burst, forecasts come late instead). Reads
	// only; counted.
	forecast *kube.REST
	// podReads lists each drained node's pods and opens the pod watch the
	// drain waits on, with a rate limiter of its own: in a burst a
	// thousand drains' lists and watches would otherwise take two thousand
	// of main's tokens, ten seconds of evictions at the default limit. A
	// watch is one long-running request, which API priority and fairness
	// counts only while it starts. Reads only; counted.
	podReads *kube.REST
}

// newKubeClients makes the clients; fence wraps the transports of those
// that write (a replica that may have lost the lease sends no write).
func newKubeClients(rc *rest.Config, cfg config.Config, m *metrics.Metrics, fence func(http.RoundTripper) http.RoundTripper) (kubeClients, error) {
	var c kubeClients
	mc, nc, ec, lc := rest.CopyConfig(rc), rest.CopyConfig(rc), rest.CopyConfig(rc), rest.CopyConfig(rc)
	mc.QPS, mc.Burst = cfg.KubeQPS, cfg.KubeBurst
	if mc.QPS > 0 && mc.Burst > 0 {
		mc.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(mc.QPS, mc.Burst)
	}
	mc.Wrap(m.CountKubeRequests)
	mc.Wrap(fence)
	c.mainConfig = mc
	var err error
	if c.main, err = kube.NewREST(mc); err != nil {
		return c, err
	}
	// Node writes are about one per interrupted node (cordon, then the
	// events annotation cleared when done): a burst of a thousand is
	// cordoned in a second or two, whatever the evictions queue holds.
	nc.QPS, nc.Burst = nodeLaneQPS, nodeLaneBurst
	nc.Wrap(m.CountKubeRequests)
	nc.Wrap(fence)
	if c.nodes, err = kube.NewREST(nc); err != nil {
		return c, err
	}
	ec.QPS, ec.Burst = 20, 50
	ec.Wrap(fence)
	if c.events, err = kube.NewREST(ec); err != nil {
		return c, err
	}
	lc.QPS, lc.Burst = 5, 10
	lc.Wrap(m.CountKubeRequests)
	c.electionConfig = lc
	jc := rest.CopyConfig(rc)
	jc.QPS, jc.Burst = 5, 10
	jc.Wrap(m.CountKubeRequests)
	jc.Wrap(fence)
	c.journalConfig = jc
	fc := rest.CopyConfig(rc)
	fc.QPS, fc.Burst = 10, 20
	fc.Wrap(m.CountKubeRequests)
	if c.forecast, err = kube.NewREST(fc); err != nil {
		return c, err
	}
	wc := rest.CopyConfig(rc)
	wc.QPS, wc.Burst = podReadLaneQPS, podReadLaneBurst
	wc.Wrap(m.CountKubeRequests)
	if c.podReads, err = kube.NewREST(wc); err != nil {
		return c, err
	}
	return c, nil
}

// The node-write lane's rate limit (kubeClients.nodes) and the drains'
// pod-read lane's (kubeClients.podReads): about one and two requests per
// drained node.
const (
	nodeLaneQPS      = 500
	nodeLaneBurst    = 1000
	podReadLaneQPS   = 500
	podReadLaneBurst = 1000
)
