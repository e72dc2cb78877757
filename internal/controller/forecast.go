package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	"lifeboat.dev/lifeboat/internal/forecast"
	"lifeboat.dev/lifeboat/internal/notify"
	"lifeboat.dev/lifeboat/internal/plan"
)

// forecastSource reads what the drain forecast needs: the pods a drain of
// the node would evict and the PodDisruptionBudgets, and the drain's
// --pod-grace-period and --node-grace-period (drain.ForecastSource).
type forecastSource interface {
	ForecastInputs(ctx context.Context, node string) ([]corev1.Pod, []policyv1.PodDisruptionBudget, error)
	DrainGrace() (pod, node time.Duration)
}

// reasonForecastMiss is the Event reason of a drain forecast to miss the
// deadline, on the node and on each pod concerned.
const reasonForecastMiss = "DrainForecastMiss"

// Refreshes of the forecast: a twelfth of the time left, within bounds, so
// that a two-minute Spot notice is looked at every 10 s and a scaled one
// in a test still several times.
const (
	minForecastEvery = time.Second
	maxForecastEvery = 15 * time.Second
)

// startForecast forecasts the node's drain now and again while it runs,
// until ctx ends, the deadline passes or a miss was reported. The
// returned channel is closed when it has stopped.
func (c *Controller) startForecast(ctx context.Context, w *nodeWork, p plan.Plan) <-chan struct{} {
	stopped := make(chan struct{})
	if c.Forecast == nil || p.Deadline.IsZero() {
		close(stopped)
		return stopped
	}
	started := c.Clock.Now() // the drain's start, from which --node-grace-period counts
	go func() {
		defer close(stopped)
		first := true
		for {
			now := c.Clock.Now()
			left := p.Deadline.Sub(now)
			if left <= 0 || c.forecastOnce(ctx, w, p, started, first) {
				return
			}
			first = false
			select {
			case <-ctx.Done():
				return
			case <-c.Clock.After(min(max(left/12, minForecastEvery), maxForecastEvery)):
			}
		}
	}()
	return stopped
}

// forecastOnce computes one forecast and reports a miss; it returns true
// when there is nothing more to watch (a miss was reported for this work).
func (c *Controller) forecastOnce(ctx context.Context, w *nodeWork, p plan.Plan, started time.Time, first bool) bool {
	pods, pdbs, err := c.Forecast.ForecastInputs(ctx, w.name)
	if err != nil {
		if ctx.Err() == nil {
			c.Log.Warn("drain forecast failed", "node", w.name, "error", err.Error())
		}
		return false
	}
	now := c.Clock.Now()
	podGrace, nodeGrace := c.Forecast.DrainGrace()
	f := forecast.For(forecast.Input{Now: now, Deadline: p.Deadline, Margin: c.o.DeadlineMargin, Pods: pods, PDBs: pdbs,
		PodGrace: podGrace, NodeGrace: nodeGrace, Started: started})
	if first {
		toEmpty := "unbounded (a PodDisruptionBudget blocks)"
		if f.Bounded {
			toEmpty = f.ToEmpty.String()
		}
		c.Log.Info("drain forecast", "node", w.name, "pods", f.Pods, "timeLeft", f.TimeLeft.Round(time.Millisecond).String(),
			"toEmpty", toEmpty, "misses", len(f.Misses))
	}
	if !f.Missed() {
		return false
	}
	c.mu.Lock()
	seen := w.reported[reasonForecastMiss]
	w.reported[reasonForecastMiss] = true
	c.mu.Unlock()
	if seen {
		return true
	}
	c.Metrics.ForecastMisses.Inc()
	names := make([]string, 0, len(f.Misses))
	for _, m := range f.Misses {
		names = append(names, m.Namespace+"/"+m.Name)
	}
	msg := fmt.Sprintf("drain forecast: %d of %d pods will not be gone before AWS's deadline %s (%s left): %s",
		len(f.Misses), f.Pods, fmtDeadline(p.Deadline), f.TimeLeft.Round(time.Second), listMisses(f.Misses))
	c.report(w, corev1.EventTypeWarning, reasonForecastMiss, "forecast", msg)
	c.notifyOnce(w, notify.PhaseForecastMiss, p, msg, names...)
	if c.Recorder != nil {
		for _, m := range f.Misses {
			ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: m.Namespace, Name: m.Name, UID: m.UID}
			c.Recorder.Event(ref, corev1.EventTypeWarning, reasonForecastMiss, fmt.Sprintf("node %s is drained for %s; this pod will not be gone before AWS's deadline %s: %s: %s",
				w.name, p.Reason, fmtDeadline(p.Deadline), m.Reason, m.Detail))
		}
	}
	return true
}

// listMisses lists up to five misses for a message.
func listMisses(ms []forecast.Miss) string {
	const most = 5
	var parts []string
	for i, m := range ms {
		if i == most {
			parts = append(parts, fmt.Sprintf("and %d more", len(ms)-most))
			break
		}
		parts = append(parts, m.String())
	}
	return strings.Join(parts, "; ")
}
