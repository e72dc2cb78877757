package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/lifecycle"
)

// hookRetryMax bounds the backoff between failed reads of a lifecycle hook.
const hookRetryMax = time.Minute

// beat is the heartbeat loop of one lifecycle action. It starts at once, at
// a conservative interval, and learns the hook's timeouts beside it.
type beat struct {
	stop     context.CancelFunc
	interval *lifecycle.Interval

	mu      sync.Mutex
	hook    lifecycle.Hook
	known   bool      // hook read
	unknown bool      // a plan was made while the hook was unknown: replan when it is read
	lastOK  time.Time // the last recorded heartbeat (the start, before any)
	failing bool      // the last heartbeat failed
	outage  bool      // the current outage was reported (it lasted half the heartbeat timeout)
	until   time.Time // heartbeats stop then (--heartbeat-until); zero: never
}

// Hook returns the action's hook once it has been read.
func (b *beat) Hook() (lifecycle.Hook, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.hook, b.known
}

// deadline returns when the action ends at the latest, given when it
// started: its global timeout, or earlier when heartbeats are failing (the
// action then times out one heartbeat timeout after the last that got
// through). ok is false while the hook is unknown; the caller plans without
// a lifecycle deadline and is woken (keepAlive's changed) once it is known.
func (b *beat) deadline(started time.Time) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.known {
		b.unknown = true
		return time.Time{}, false
	}
	d := started.Add(b.hook.GlobalTimeout)
	if !b.until.IsZero() {
		// The last heartbeat is sent at most one interval before until
		// (or was, at lastOK): the action times out one heartbeat timeout
		// after it. Both bounds are no later than the real timeout.
		capped := b.until.Add(b.hook.HeartbeatTimeout - b.interval.Get())
		if last := b.lastOK.Add(b.hook.HeartbeatTimeout); last.After(capped) {
			capped = last
		}
		if capped.Before(d) {
			d = capped
		}
	}
	if b.failing {
		if outage := b.lastOK.Add(b.hook.HeartbeatTimeout); outage.Before(d) {
			d = outage
		}
	}
	return d, true
}

// keepAlive heartbeats lifecycle action a of instanceID until the returned
// beat's stop is called or ctx ends. Heartbeats start at once: a hook that
// cannot be read (missing permission, throttling, renamed) must not leave
// the action without them, so the hook is read beside them, retried with
// backoff, and reported while it fails. w, if not nil, is the node that
// reports go to. changed, if not nil, is called when what planning depends
// on changed: the hook was read after a plan was made without it, or
// heartbeats have failed for half the heartbeat timeout (the action's
// deadline moves earlier).
func (c *Controller) keepAlive(ctx context.Context, w *nodeWork, instanceID string, a event.LifecycleAction, until time.Time, changed func()) *beat {
	bctx, stop := context.WithCancel(ctx)
	b := &beat{stop: stop, interval: lifecycle.NewInterval(lifecycle.IntervalUnknownHook(c.o.HeartbeatInterval)), lastOK: c.Clock.Now(), until: until}
	c.spawn(func() {
		err := c.ASG.KeepAlive(bctx, instanceID, a, b.interval, until, func(err error) { c.beaten(w, a, b, err, changed) })
		if errors.Is(err, lifecycle.ErrNoActiveAction) {
			c.Metrics.LifecycleCalls.WithLabelValues("heartbeat", "gone").Inc()
			c.Log.Info("lifecycle action gone; heartbeats stopped", "instanceID", instanceID, "group", a.GroupName, "hook", a.HookName)
		}
	})
	c.spawn(func() { c.readHook(bctx, w, instanceID, a, b, changed) })
	return b
}

// readHook reads the action's hook until it succeeds or ctx ends, then
// sets the heartbeat interval it calls for.
func (c *Controller) readHook(ctx context.Context, w *nodeWork, instanceID string, a event.LifecycleAction, b *beat, changed func()) {
	backoff := c.o.RetryBackoff
	for {
		h, err := c.ASG.Hook(ctx, a.GroupName, a.HookName)
		if err == nil {
			interval, clamped := lifecycle.HeartbeatInterval(c.o.HeartbeatInterval, h)
			if clamped {
				c.warnClamped(a, interval, h)
			}
			b.interval.Set(interval)
			b.mu.Lock()
			b.hook, b.known = h, true
			replan := b.unknown
			b.mu.Unlock()
			if replan && changed != nil {
				changed()
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		c.Metrics.LifecycleCalls.WithLabelValues("describe-hook", "error").Inc()
		c.warnAction(w, instanceID, "LifecycleHookUnknown", fmt.Sprintf("reading lifecycle hook %s/%s failed, retrying in %s; heartbeating every %s meanwhile, and the drain has no lifecycle deadline until it is read: %v",
			a.GroupName, a.HookName, backoff, b.interval.Get(), err))
		select {
		case <-ctx.Done():
			return
		case <-c.Clock.After(backoff):
		}
		backoff = min(2*backoff, hookRetryMax)
	}
}

// beaten records a heartbeat's outcome. Heartbeats that keep failing for
// half the hook's heartbeat timeout are reported once per outage, and
// changed is called so that the drain plans with the earlier deadline.
func (c *Controller) beaten(w *nodeWork, a event.LifecycleAction, b *beat, err error, changed func()) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	c.Metrics.LifecycleCalls.WithLabelValues("heartbeat", result).Inc()
	now := c.Clock.Now()
	b.mu.Lock()
	if err == nil {
		b.lastOK, b.failing, b.outage = now, false, false
		b.mu.Unlock()
		c.recordHeartbeat(w)
		return
	}
	b.failing = true
	long := b.known && !b.outage && now.Sub(b.lastOK) >= b.hook.HeartbeatTimeout/2
	b.outage = b.outage || long
	expires := b.lastOK.Add(b.hook.HeartbeatTimeout)
	b.mu.Unlock()
	if !long {
		return
	}
	c.warnAction(w, "", "HeartbeatsFailing", fmt.Sprintf("lifecycle heartbeats for %s/%s have failed since %s; unless one gets through the action times out at %s: draining with that deadline",
		a.GroupName, a.HookName, fmtDeadline(expires.Add(-b.hook.HeartbeatTimeout)), fmtDeadline(expires)))
	if changed != nil {
		changed()
	}
}

// warnAction reports a lifecycle action's trouble: as a Warning Event on
// the node when there is one, else as a log line.
func (c *Controller) warnAction(w *nodeWork, instanceID, reason, msg string) {
	if w != nil {
		c.reportOnce(w, reason, corev1.EventTypeWarning, "lifecycle-heartbeat", msg)
		return
	}
	c.Log.Warn(reason, "instanceID", instanceID, "detail", msg)
}

// warnClamped says once per hook that the configured heartbeat interval is
// too long for it.
func (c *Controller) warnClamped(a event.LifecycleAction, interval time.Duration, h lifecycle.Hook) {
	key := a.GroupName + "/" + a.HookName
	c.mu.Lock()
	seen := c.clamped[key]
	c.clamped[key] = true
	c.mu.Unlock()
	if !seen {
		c.Log.Warn("heartbeat interval clamped to half the hook's heartbeat timeout, so that a failed heartbeat can be retried in time",
			"hook", key, "configured", c.o.HeartbeatInterval, "heartbeatTimeout", h.HeartbeatTimeout, "interval", interval)
	}
}

// startHeartbeats keeps a terminate lifecycle action of the node alive while
// the node is worked on, from the moment its plan names it. It runs outside
// any worker slot and stops when the action is completed or gone, or the
// node's work ends.
func (c *Controller) startHeartbeats(ctx context.Context, w *nodeWork, a event.LifecycleAction, evs []event.Event) {
	if c.ASG == nil {
		return
	}
	c.mu.Lock()
	_, running := w.beats[a.Key()]
	if w.instanceID == "" {
		for _, e := range evs {
			if e.Lifecycle != nil && e.Lifecycle.Key() == a.Key() {
				w.instanceID = e.InstanceID
			}
		}
	}
	instanceID := w.instanceID
	c.mu.Unlock()
	if running {
		return
	}
	b := c.keepAlive(ctx, w, instanceID, a, c.heartbeatUntil(a, evs), func() { wake(w) })
	c.mu.Lock()
	w.beats[a.Key()] = b
	c.mu.Unlock()
}

// stopHeartbeats stops the heartbeats of one action of the node (by its
// event.LifecycleAction Key).
func (c *Controller) stopHeartbeats(w *nodeWork, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := w.beats[key]; ok {
		b.stop()
		delete(w.beats, key)
	}
}

// withLifecycleDeadlines sets the deadline of terminate lifecycle events
// that can be completed from their heartbeats' knowledge of the hook: the action's
// start plus the hook's global timeout, or earlier while heartbeats fail.
// It makes no API call.
func (c *Controller) withLifecycleDeadlines(w *nodeWork, evs []event.Event) []event.Event {
	out := make([]event.Event, len(evs))
	for i, e := range evs {
		out[i] = e
		if e.Kind != event.LifecycleTerminate || e.Lifecycle == nil || e.Lifecycle.Key() == "" || !e.Deadline.IsZero() {
			continue
		}
		c.mu.Lock()
		b := w.beats[e.Lifecycle.Key()]
		c.mu.Unlock()
		if b == nil {
			continue
		}
		started := e.Time
		if started.IsZero() {
			started = w.firstSeen
		}
		if d, ok := b.deadline(started); ok {
			out[i].Deadline = d
		}
	}
	return out
}

// wake makes the node's goroutine plan again (a drain in flight restarts
// with the new plan).
func wake(w *nodeWork) {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}
