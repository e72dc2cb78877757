package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/forecast"
	"lifeboat.dev/lifeboat/internal/notify"
	"lifeboat.dev/lifeboat/internal/plan"
)

// forecastSource reads what the drain forecast needs: the pods a drain of
// the node would evict and the PodDisruptionBudgets, and the drain's
// --pod-grace-period and --node-grace-period (drain.ForecastSource).
type forecastSource interface {
	ForecastInputs(ctx context.Context, node string) ([]corev1.Pod, []policyv1.PodDisruptionBudget, error)
	// Budgets returns the PodDisruptionBudgets alone: the first forecast
	// of a drain has the drain's own list of the pods.
	Budgets(ctx context.Context) ([]policyv1.PodDisruptionBudget, error)
	DrainGrace() (pod, node time.Duration)
	DeletesBlocked() bool
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

// forecastRun is the forecast of one drain, running beside it.
type forecastRun struct {
	cancel  context.CancelFunc
	stopped chan struct{}
	listed  chan []corev1.Pod // the drain's list of its pods, once (drainListed)
	once    sync.Once
	mu      sync.Mutex
	class   forecast.Class // the gravest class forecast so far; "": none made
}

// drainListed hands the forecast the pods the drain listed to evict
// (drain.Progress.Pods; nil: the forecast lists them itself). Only the
// first call counts; it never blocks.
func (r *forecastRun) drainListed(pods []corev1.Pod) {
	r.once.Do(func() { r.listed <- pods })
}

// note records the class of a forecast: a drain's class is the gravest
// any of its forecasts had (certain-miss, then possible-miss, then clear).
func (r *forecastRun) note(cl forecast.Class) {
	rank := map[forecast.Class]int{"": 0, forecast.Clear: 1, forecast.PossibleMiss: 2, forecast.CertainMiss: 3}
	r.mu.Lock()
	defer r.mu.Unlock()
	if rank[cl] > rank[r.class] {
		r.class = cl
	}
}

// stop ends the forecast and returns its class ("": none was made).
func (r *forecastRun) stop() forecast.Class {
	r.cancel()
	<-r.stopped
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.class
}

// startForecast forecasts the node's drain once the drain has listed the
// pods it evicts (drainListed; a drain with none to evict is not
// forecast), from that list, then again while it runs, until ctx ends,
// the run is stopped, the deadline passes or a certain miss was reported.
// Starting from the drain's list costs a drain no second list of its pods:
// in a Spot reclaim of a thousand nodes each drain's first forecast would
// otherwise list them again.
func (c *Controller) startForecast(ctx context.Context, w *nodeWork, p plan.Plan) *forecastRun {
	ctx, cancel := context.WithCancel(ctx)
	r := &forecastRun{cancel: cancel, stopped: make(chan struct{}), listed: make(chan []corev1.Pod, 1)}
	if c.Forecast == nil || p.PodDeadline().IsZero() {
		close(r.stopped)
		return r
	}
	started := c.Clock.Now() // the drain's start, from which --node-grace-period counts
	go func() {
		defer close(r.stopped)
		var pods []corev1.Pod
		select {
		case <-ctx.Done():
			return
		case pods = <-r.listed:
		}
		first := true
		for {
			now := c.Clock.Now()
			left := p.PodDeadline().Sub(now) // the drain's (plan.DrainEnd)
			if left <= 0 || c.forecastOnce(ctx, w, p, r, started, first, pods) {
				return
			}
			first, pods = false, nil
			select {
			case <-ctx.Done():
				return
			case <-c.Clock.After(min(max(left/12, minForecastEvery), maxForecastEvery)):
			}
		}
	}()
	return r
}

// forecastOutcome stops the drain's forecast and records whether it came
// true (lifeboat_drain_forecast_outcomes_total): the drain ended with pods
// on the node at its deadline, left or force-deleted (missed), empty
// before it but with grace periods cut to fit it (grace-cut: whether a pod
// needed the time it lost is not known), or empty before it (made). A
// drain that ended otherwise (an error it retries, a cancellation) and
// one that was not forecast are not recorded.
func (c *Controller) forecastOutcome(r *forecastRun, res drain.Result, err error) {
	class := r.stop()
	ended := err == nil || errors.Is(err, drain.ErrDeadline) || errors.Is(err, drain.ErrNotEvicted) || errors.Is(err, drain.ErrStuck)
	if class == "" || !ended {
		return
	}
	var outcome string
	switch {
	case errors.Is(err, drain.ErrDeadline) || res.ForceDeleted > 0 || res.Remaining > 0:
		outcome = "missed"
	case res.GraceCapped > 0:
		outcome = "grace-cut"
	default:
		outcome = "made"
	}
	c.Metrics.ForecastOutcomes.WithLabelValues(string(class), outcome).Inc()
}

// forecastOnce computes one forecast and reports a certain miss; it
// returns true when there is nothing more to watch (a certain miss was
// reported for this work). drainPods are the drain's own list of its pods
// (then only the budgets are read); nil: they are listed (a refresh, or a
// drain that did not hand its list over). The worst case (every pod uses its whole
// grace) is logged at the first forecast of a drain, not warned about.
func (c *Controller) forecastOnce(ctx context.Context, w *nodeWork, p plan.Plan, r *forecastRun, started time.Time, first bool, drainPods []corev1.Pod) bool {
	pods := drainPods
	var pdbs []policyv1.PodDisruptionBudget
	var err error
	if pods != nil {
		pdbs, err = c.Forecast.Budgets(ctx)
	} else {
		pods, pdbs, err = c.Forecast.ForecastInputs(ctx, w.name)
	}
	if err != nil {
		if ctx.Err() == nil {
			c.Log.Warn("drain forecast failed", "node", w.name, "error", err.Error())
		}
		return false
	}
	now := c.Clock.Now()
	podGrace, nodeGrace := c.Forecast.DrainGrace()
	f := forecast.For(forecast.Input{Now: now, Deadline: p.PodDeadline(), Margin: c.o.DeadlineMargin, Pods: pods, PDBs: pdbs,
		PodGrace: podGrace, NodeGrace: nodeGrace, Started: started, DeleteBlocked: p.Enforced && c.Forecast.DeletesBlocked()})
	r.note(f.Class())
	certain := f.CertainMisses()
	if first {
		toEmpty := "unbounded (a PodDisruptionBudget blocks)"
		if f.Bounded {
			toEmpty = f.ToEmpty.String()
		}
		attrs := []any{"node", w.name, "pods", f.Pods, "timeLeft", f.TimeLeft.Round(time.Millisecond).String(),
			"toEmpty", toEmpty, "misses", len(f.Misses), "certain", len(certain), "class", string(f.Class())}
		if f.Missed() {
			attrs = append(attrs, "worstCase", listMisses(f.Misses))
		}
		c.Log.Info("drain forecast", attrs...)
	}
	if len(certain) == 0 {
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
	names := make([]string, 0, len(certain))
	for _, m := range certain {
		names = append(names, m.Namespace+"/"+m.Name)
	}
	msg := fmt.Sprintf("drain forecast: %d of %d pods cannot finish their shutdown before AWS's deadline %s (%s left), whatever they do: %s",
		len(certain), f.Pods, fmtPlanDeadline(p), f.TimeLeft.Round(time.Second), listMisses(certain))
	c.report(w, corev1.EventTypeWarning, reasonForecastMiss, "forecast", msg)
	c.notifyOnce(w, notify.PhaseForecastMiss, p, msg, names...)
	if c.Recorder != nil {
		for _, m := range certain {
			ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: m.Namespace, Name: m.Name, UID: m.UID}
			c.Recorder.Event(ref, corev1.EventTypeWarning, reasonForecastMiss, fmt.Sprintf("node %s is drained for %s; this pod cannot finish its shutdown before AWS's deadline %s, whatever it does: %s: %s",
				w.name, p.Reason, fmtPlanDeadline(p), m.Reason, m.Detail))
		}
	}
	return true
}

// listMisses lists up to five misses for a message.
func listMisses(ms []forecast.Miss) string { return drain.ListFive(ms) }
