package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The series the alerts (deploy/helm/lifeboat/files/alerts.yaml) and the
// dashboard count with increase() or rate() exist at 0 before anything
// happened: Prometheus sees no increase in a series that first appears at
// 1 (test/prom: on a real run the deadline, lost-launch, lifecycle-error,
// webhook and Spot-latency alerts stayed silent).
func TestSeriesStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := New().Register(reg); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range families {
		byName[f.GetName()] = f
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
	}{
		{"lifeboat_actions_total", map[string]string{"action": "drain", "result": "deadline"}},
		{"lifeboat_actions_total", map[string]string{"action": "drain", "result": "ok"}},
		{"lifeboat_actions_total", map[string]string{"action": "cordon", "result": "ok"}},
		{"lifeboat_lifecycle_calls_total", map[string]string{"call": "heartbeat", "result": "error"}},
		{"lifeboat_lifecycle_calls_total", map[string]string{"call": "complete", "result": "error"}},
		{"lifeboat_lifecycle_calls_total", map[string]string{"call": "describe-hook", "result": "error"}},
		{"lifeboat_lifecycle_actions_lost_total", map[string]string{"transition": "launch"}},
		{"lifeboat_notifications_total", map[string]string{"result": "failed"}},
		{"lifeboat_notifications_total", map[string]string{"result": "dropped"}},
		{"lifeboat_notifications_total", map[string]string{"result": "sent"}},
		{"lifeboat_evictions_total", map[string]string{"result": "evicted"}},
		{"lifeboat_evictions_total", map[string]string{"result": "blocked"}},
		{"lifeboat_evictions_total", map[string]string{"result": "cut-off"}},
		{"lifeboat_evictions_total", map[string]string{"result": "deleted-blocked"}},
		{"lifeboat_drain_forecast_outcomes_total", map[string]string{"forecast": "certain-miss", "outcome": "made"}},
		{"lifeboat_drain_forecast_outcomes_total", map[string]string{"forecast": "possible-miss", "outcome": "made"}},
		{"lifeboat_ghost_nodes", nil},
		{"lifeboat_replacements_total", map[string]string{"result": "timeout"}},
		{"lifeboat_replacements_total", map[string]string{"result": "skipped"}},
		{"lifeboat_events_received_total", map[string]string{"source": "sqs", "kind": "spot-interruption"}},
		{"lifeboat_events_received_total", map[string]string{"source": "imds", "kind": "lifecycle-terminate"}},
		{"lifeboat_events_received_total", map[string]string{"source": "sqs", "kind": "lifecycle-launch"}},
		{"lifeboat_messages_ignored_total", map[string]string{"reason": "test-notification"}},
		{"lifeboat_messages_rejected_total", map[string]string{"reason": "invalid-json"}},
		{"lifeboat_signal_to_drained_seconds", map[string]string{"kind": "spot-interruption"}},
		{"lifeboat_signal_to_cordoned_seconds", map[string]string{"kind": "spot-interruption"}},
		{"lifeboat_action_duration_seconds", map[string]string{"action": "drain"}},
	} {
		if !hasZero(byName[tc.name], tc.labels) {
			t.Errorf("%s %v is not exported at 0 from the start", tc.name, tc.labels)
		}
	}
	// Gauges are not preset: lifeboat_source_healthy 0 would say unhealthy.
	if f := byName["lifeboat_source_healthy"]; f != nil && len(f.GetMetric()) > 0 {
		t.Errorf("lifeboat_source_healthy is exported before any source answered: %v", f.GetMetric())
	}
}

// hasZero reports whether f has a sample with labels whose value (or
// count, for a histogram) is 0.
func hasZero(f *dto.MetricFamily, labels map[string]string) bool {
	if f == nil {
		return false
	}
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		match := len(got) == len(labels)
		for k, v := range labels {
			match = match && got[k] == v
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue() == 0
		case m.Histogram != nil:
			return m.Histogram.GetSampleCount() == 0
		case m.Gauge != nil:
			return m.Gauge.GetValue() == 0
		}
	}
	return false
}
