// Package metrics owns every Prometheus collector lifeboat exports. Labels
// are bounded (kind, action, result, reason, source): never node names,
// instance IDs or event IDs.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics holds the collectors. Register them with Register.
type Metrics struct {
	EventsReceived    *prometheus.CounterVec // source, kind
	MessagesIgnored   *prometheus.CounterVec // reason
	MessagesRejected  *prometheus.CounterVec // reason
	UnknownInstance   prometheus.Counter
	Actions           *prometheus.CounterVec   // action, result
	ActionDuration    *prometheus.HistogramVec // action
	ToCordoned        *prometheus.HistogramVec // kind: signal sent -> node cordoned
	ToDrained         *prometheus.HistogramVec // kind: signal sent -> node drained
	Evictions         *prometheus.CounterVec   // result
	LifecycleCalls    *prometheus.CounterVec   // call (heartbeat, complete, describe-hook), result
	LifecycleLost     *prometheus.CounterVec   // transition (launch, terminate)
	ReceiveErrors     prometheus.Counter
	NodesInFlight     prometheus.Gauge
	SourceHealthy     *prometheus.GaugeVec // source
	Leader            prometheus.Gauge
	Notifications     *prometheus.CounterVec // result
	NotifyRetries     prometheus.Counter
	KubeRequests      *prometheus.CounterVec // verb, resource
	ForecastMisses    prometheus.Counter
	ForecastOutcomes  *prometheus.CounterVec // forecast (certain-miss, possible-miss, clear), outcome (missed, grace-cut, made)
	GhostNodes        prometheus.Gauge
	Replacements      *prometheus.CounterVec // result (ready, timeout, skipped, failed)
	LoadBalancerWaits *prometheus.CounterVec // result (none, drained, cut-short, unknown)
}

// New returns fresh collectors.
func New() *Metrics {
	// 90 and 110: LifeboatSpotDrainSlow's 110 s falls on a boundary (a
	// quantile inside a bucket is interpolated: with 60 and 120 only, one
	// 66 s drain read as a p99 of 119 s).
	latency := []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 90, 110, 120, 300, 900, 1800, 3600, 7200}
	return &Metrics{
		EventsReceived: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lifeboat_events_received_total",
			Help: "Interruption events received, by source and kind."}, []string{"source", "kind"}),
		MessagesIgnored: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lifeboat_messages_ignored_total",
			Help: "Messages understood but irrelevant (deleted), by reason."}, []string{"reason"}),
		MessagesRejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lifeboat_messages_rejected_total",
			Help: "Malformed messages (deleted), by reason."}, []string{"reason"}),
		UnknownInstance: prometheus.NewCounter(prometheus.CounterOpts{Name: "lifeboat_unknown_instance_events_total",
			Help: "Events about instances that are not nodes of this cluster."}),
		Actions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lifeboat_actions_total",
			Help: "Actions taken on nodes (cordon, drain, uncordon, lifecycle-complete), by result."}, []string{"action", "result"}),
		ActionDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lifeboat_action_duration_seconds",
			Help: "Duration of actions on nodes.", Buckets: latency}, []string{"action"}),
		ToCordoned: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lifeboat_signal_to_cordoned_seconds",
			Help: "Time from the signal (message sent or metadata seen) to the node cordoned.", Buckets: latency}, []string{"kind"}),
		ToDrained: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lifeboat_signal_to_drained_seconds",
			Help: "Time from the signal to the node drained.", Buckets: latency}, []string{"kind"}),
		Evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lifeboat_evictions_total",
			Help: "Pod evictions, by result (evicted, blocked, force-deleted, grace-capped)."}, []string{"result"}),
		LifecycleCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lifeboat_lifecycle_calls_total",
			Help: "Auto Scaling lifecycle calls, by call and result."}, []string{"call", "result"}),
		LifecycleLost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lifeboat_lifecycle_actions_lost_total",
			Help: "Lifecycle actions no longer active when lifeboat completed them: timed out (AWS applied the hook's default result) or completed by someone else."}, []string{"transition"}),
		ReceiveErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "lifeboat_queue_receive_errors_total",
			Help: "Failed SQS receives."}),
		NodesInFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "lifeboat_nodes_in_flight",
			Help: "Nodes lifeboat is working on."}),
		KubeRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lifeboat_kube_requests_total",
			Help: "Requests lifeboat made to the Kubernetes API (events excluded), by verb and resource."}, []string{"verb", "resource"}),
		SourceHealthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lifeboat_source_healthy",
			Help: "1 when the event source (sqs or imds) answered its last request."}, []string{"source"}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "lifeboat_leader",
			Help: "1 while this replica acts on interruptions (holds the leader lease, or runs without leader election); 0 on a standby."}),
		Notifications: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lifeboat_notifications_total",
			Help: "Webhook notifications, by result (sent, failed, dropped, deduplicated)."}, []string{"result"}),
		ForecastMisses: prometheus.NewCounter(prometheus.CounterOpts{Name: "lifeboat_drain_forecast_misses_total",
			Help: "Node drains forecast to certainly miss AWS's deadline (counted once per node's work, when first forecast)."}),
		ForecastOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lifeboat_drain_forecast_outcomes_total",
			Help: "Forecast drains by what was forecast (certain-miss, possible-miss, clear) and how the drain ended (missed, grace-cut, made)."}, []string{"forecast", "outcome"}),
		NotifyRetries: prometheus.NewCounter(prometheus.CounterOpts{Name: "lifeboat_notification_retries_total",
			Help: "Webhook deliveries tried again after a network error, HTTP 429 or 5xx."}),
		GhostNodes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "lifeboat_ghost_nodes",
			Help: "Nodes lifeboat cordoned whose instance EC2 said is terminated and that are still there --ghost-node-after later (queue mode, the leader)."}),
		Replacements: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lifeboat_replacements_total",
			Help: "Deployments whose last ready replicas on a draining node were to be replaced first (--replacement-first), by result: ready (a new pod Ready elsewhere before the eviction), timeout (not by the deadline), skipped (no time, or a strategy that would not wait), failed (an API error)."}, []string{"result"}),
		LoadBalancerWaits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lifeboat_load_balancer_waits_total",
			Help: "Terminate actions held for ELBv2 target groups (--wait-for-load-balancers), by result: none (no target group held the node), drained, cut-short (the deadline came first), unknown (target groups could not be read)."}, []string{"result"}),
	}
}

// Register registers every collector with r, the series known in advance
// at 0 (startAtZero).
func (m *Metrics) Register(r prometheus.Registerer) error {
	m.startAtZero()
	for _, c := range []prometheus.Collector{m.EventsReceived, m.MessagesIgnored, m.MessagesRejected, m.UnknownInstance,
		m.Actions, m.ActionDuration, m.ToCordoned, m.ToDrained, m.Evictions, m.LifecycleCalls, m.LifecycleLost, m.ReceiveErrors,
		m.NodesInFlight, m.SourceHealthy, m.Leader, m.Notifications, m.NotifyRetries, m.KubeRequests, m.ForecastMisses, m.ForecastOutcomes, m.GhostNodes,
		m.Replacements, m.LoadBalancerWaits} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}
