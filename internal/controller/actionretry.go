package controller

import (
	"context"
	"log/slog"
	"time"

	"lifeboat.dev/lifeboat/internal/event"
)

// actionRetryMax bounds the backoff between retries of a lifecycle action's
// failed step (heartbeats run meanwhile: it only delays the completion).
const actionRetryMax = 30 * time.Second

// actionRetry spaces the retries of a failed step of a lifecycle action
// that is not a node's work: its ownership check, the uncordon of its
// node, its completion. One failed call (throttling) must not settle the
// action as failed: its heartbeats would stop until the message came back,
// and with a short hook it would time out (with ABANDON, AWS terminates a
// healthy new instance).
type actionRetry struct {
	c       *Controller
	log     *slog.Logger
	backoff time.Duration
	// end returns when the action is over for good (retrying is pointless
	// then); ok false: not known yet, keep retrying.
	end func() (at time.Time, ok bool)
}

// again waits out the backoff after a failed step and reports whether to
// try it again: false once ctx ended or the action's end passed.
func (r *actionRetry) again(ctx context.Context, step string, err error) bool {
	if end, ok := r.end(); ok && !r.c.Clock.Now().Before(end) {
		return false
	}
	r.log.Warn("lifecycle action step failed, retrying", "step", step, "retryIn", r.backoff, "error", err.Error())
	select {
	case <-ctx.Done():
		return false
	case <-r.c.Clock.After(r.backoff):
	}
	r.backoff = min(2*r.backoff, actionRetryMax)
	return true
}

// ownedRetried asks whether the action's group is this cluster's, retried
// with backoff until the launch's ready timeout has passed since the action
// started (no heartbeats yet: another cluster's action is not ours to
// keep alive).
func (c *Controller) ownedRetried(ctx context.Context, log *slog.Logger, e event.Event, started time.Time) (bool, error) {
	r := &actionRetry{c: c, log: log, backoff: c.o.RetryBackoff,
		end: func() (time.Time, bool) { return started.Add(c.o.LaunchReadyTimeout), true }}
	for {
		octx, cancel := context.WithTimeout(ctx, ownedTimeout)
		owned, err := c.ASG.Owned(octx, e.Lifecycle.GroupName)
		cancel()
		if err == nil || !r.again(ctx, "ownership check", err) {
			return owned, err
		}
	}
}

// settleRetried runs step (complete the action, or wait for its node and
// complete it) until it succeeds, under the action's heartbeats b: a
// failed step is retried with backoff until the hook's global timeout
// has passed since the action started (unknown hook: until ctx ends; AWS
// answers a completion of a gone action "no active action", which
// settles it).
func (c *Controller) settleRetried(ctx context.Context, log *slog.Logger, b *beat, started time.Time, step func() error) error {
	r := &actionRetry{c: c, log: log, backoff: c.o.RetryBackoff, end: func() (time.Time, bool) {
		h, ok := b.Hook()
		return started.Add(h.GlobalTimeout), ok
	}}
	for {
		err := step()
		if err == nil || !r.again(ctx, "settle", err) {
			return err
		}
	}
}
