// Package lifecycle holds the plain types and rules of Auto Scaling
// lifecycle actions that the controller needs: a hook's timeouts, the
// heartbeat interval and the "action is gone" error. It imports no AWS
// SDK, so that what links the controller (IMDS mode) does not link Auto
// Scaling; internal/asg makes the calls.
package lifecycle

import (
	"errors"
	"sync"
	"time"
)

// Result is how a lifecycle action is completed.
type Result string

// Results, exactly as AWS spells them.
const (
	Continue Result = "CONTINUE"
	Abandon  Result = "ABANDON"
)

// ErrNoActiveAction means Auto Scaling has no such action any more: it was
// completed by someone else, timed out, or never existed. It is final.
var ErrNoActiveAction = errors.New("no active lifecycle action")

// MaxGlobalTimeout is AWS's cap on a lifecycle action's life.
const MaxGlobalTimeout = 48 * time.Hour

// Hook is what lifeboat needs to know about a lifecycle hook.
type Hook struct {
	HeartbeatTimeout time.Duration
	// GlobalTimeout is min(100 × HeartbeatTimeout, 48 h) unless AWS says otherwise.
	GlobalTimeout time.Duration
	DefaultResult string
}

// Interval is a heartbeat interval that may change while a heartbeat loop
// waits on it. It is safe for concurrent use.
type Interval struct {
	mu      sync.Mutex
	d       time.Duration
	changed chan struct{} // closed (and replaced) by Set
}

// NewInterval returns an Interval of d.
func NewInterval(d time.Duration) *Interval {
	return &Interval{d: d, changed: make(chan struct{})}
}

// Set changes the interval; a loop waiting on the old one (Watch)
// heartbeats at once and then waits the new one.
func (i *Interval) Set(d time.Duration) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if d == i.d {
		return
	}
	i.d = d
	close(i.changed)
	i.changed = make(chan struct{})
}

// Get returns the current interval.
func (i *Interval) Get() time.Duration {
	d, _ := i.Watch()
	return d
}

// Watch returns the current interval and a channel closed when it changes.
func (i *Interval) Watch() (time.Duration, <-chan struct{}) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.d, i.changed
}

// UnknownHookInterval is the heartbeat interval while a hook's timeout is
// not known (reading it failed or is still under way): a third of the
// shortest heartbeat timeout AWS allows (30 s).
const UnknownHookInterval = 10 * time.Second

// HeartbeatInterval is the interval to use for a hook: configured, or half
// the hook's heartbeat timeout. A configured interval is never longer than
// half the timeout, so that a failed heartbeat can be retried before the
// action times out; clamped reports that it was cut.
func HeartbeatInterval(configured time.Duration, h Hook) (interval time.Duration, clamped bool) {
	most := max(h.HeartbeatTimeout/2, 500*time.Millisecond)
	if configured <= 0 {
		return most, false
	}
	if configured > most {
		return most, true
	}
	return configured, false
}

// IntervalUnknownHook is the interval to use before a hook's timeout is
// known: configured, but never longer than UnknownHookInterval.
func IntervalUnknownHook(configured time.Duration) time.Duration {
	if configured > 0 {
		return min(configured, UnknownHookInterval)
	}
	return UnknownHookInterval
}
