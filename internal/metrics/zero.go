package metrics

import (
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/message"
)

// startAtZero exports at 0, from the start, the series of every label value
// known in advance that an alert or a dashboard panel counts with
// increase() or rate(). Prometheus sees no increase in a series that first
// appears at 1: without this, the first deadline, lost launch action or
// failed webhook after a start, and in IMDS mode (one node per pod, so one
// event per pod) every one, would fire no alert (test/prom showed it on a
// real run). Gauges are left alone (lifeboat_source_healthy 0 means
// unhealthy), as are labels whose values are not known in advance (the
// Kubernetes API's resources). Histograms by kind are preset for
// spot-interruption only: the kind with the two-minute notice, which an
// alert watches; each histogram series costs a series per bucket.
func (m *Metrics) startAtZero() {
	for _, source := range []event.Source{event.SourceSQS, event.SourceIMDS} {
		for _, kind := range event.Kinds {
			m.EventsReceived.WithLabelValues(string(source), string(kind))
		}
	}
	for _, reason := range message.IgnoredReasons {
		m.MessagesIgnored.WithLabelValues(reason)
	}
	for _, reason := range message.MalformedReasons {
		m.MessagesRejected.WithLabelValues(reason)
	}
	for action, results := range map[string][]string{
		"cordon":   {"ok", "error"},
		"drain":    {"ok", "error", "deadline", "incomplete"},
		"uncordon": {"ok", "error"},
	} {
		for _, result := range results {
			m.Actions.WithLabelValues(action, result)
		}
	}
	for _, action := range []string{"cordon", "drain"} {
		m.ActionDuration.WithLabelValues(action)
	}
	m.ToCordoned.WithLabelValues(string(event.SpotInterruption))
	m.ToDrained.WithLabelValues(string(event.SpotInterruption))
	for _, result := range []string{"evicted", "blocked", "grace-capped", "force-deleted", "refused", "stuck", "cut-off", "deleted-blocked"} {
		m.Evictions.WithLabelValues(result)
	}
	for call, results := range map[string][]string{
		"heartbeat":     {"ok", "gone", "error"},
		"complete":      {"ok", "gone", "error"},
		"describe-hook": {"error"},
	} {
		for _, result := range results {
			m.LifecycleCalls.WithLabelValues(call, result)
		}
	}
	for _, forecast := range []string{"certain-miss", "possible-miss", "clear"} {
		for _, outcome := range []string{"missed", "grace-cut", "made"} {
			m.ForecastOutcomes.WithLabelValues(forecast, outcome)
		}
	}
	for _, transition := range []string{"launch", "terminate"} {
		m.LifecycleLost.WithLabelValues(transition)
	}
	for _, result := range []string{"none", "drained", "cut-short", "unknown"} { // lbdrain.Results
		m.LoadBalancerWaits.WithLabelValues(result)
	}
	for _, result := range []string{"sent", "failed", "dropped", "deduplicated"} {
		m.Notifications.WithLabelValues(result)
	}
	// internal/replace.Results (not imported: lifeboat-imds links no
	// apps/v1).
	for _, result := range []string{"ready", "timeout", "skipped", "failed"} {
		m.Replacements.WithLabelValues(result)
	}
}
