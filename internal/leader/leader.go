// Package leader runs lifeboat's work only while this replica holds the
// leader Lease (client-go's leader election), and fences every write of a
// replica that may have lost it (Fence).
//
// Run returns only after the work it started has returned: the process
// never exits, and a new leader's writes never interleave with this
// replica's, while the controller is still stopping.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ErrLost is returned by Run when the Lease was lost and the work stopped
// without an error of its own.
var ErrLost = errors.New("lost the leader lease")

// Options configure the election.
type Options struct {
	// Client is the election's own client: never fenced, never queued
	// behind a drain.
	Client kubernetes.Interface
	// Name and Namespace name the Lease; Identity is this replica's.
	Name, Namespace, Identity string
	// LeaseDuration is how long the other replicas wait before taking over
	// an unrenewed Lease. This replica renews within two thirds of it and
	// retries every sixth.
	LeaseDuration time.Duration
	Log           *slog.Logger
	// OnLeading is told when this replica starts (true) and stops (false)
	// leading; optional.
	OnLeading func(bool)
}

// Run runs lead while this replica holds the Lease, with a context that
// ends when the Lease is lost or ctx ends. Losing the Lease ends Run (with
// lead's error, else ErrLost) so that the process never acts beside a new
// leader; until lead has returned, fence keeps it from writing. Run returns
// only after lead has returned.
func Run(ctx context.Context, o Options, fence *Fence, lead func(context.Context) error) error {
	renewDeadline := o.LeaseDuration * 2 / 3
	lock := &fencedLock{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace},
			Client:     o.Client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: o.Identity},
		},
		fence: fence,
		// A renewal is trusted for the renew deadline, a third of the lease
		// less than the other replicas wait: room for clock drift.
		valid: renewDeadline,
	}
	onLeading := o.OnLeading
	if onLeading == nil {
		onLeading = func(bool) {}
	}
	var w work
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.LeaseDuration,
		RenewDeadline:   renewDeadline,
		RetryPeriod:     o.LeaseDuration / 6,
		ReleaseOnCancel: true,
		Name:            "lifeboat",
		Callbacks: leaderelection.LeaderCallbacks{
			// client-go calls this in a goroutine of its own and does not
			// wait for it: w keeps track.
			OnStartedLeading: func(ctx context.Context) {
				w.run(ctx, func(ctx context.Context) error {
					o.Log.Info("became leader", "identity", o.Identity)
					onLeading(true)
					return lead(ctx)
				})
			},
			OnStoppedLeading: func() {
				fence.shut()
				onLeading(false)
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	le.Run(ctx) // returns when ctx ends or the Lease is lost; lead's context has ended
	leadErr := w.wait(func() { o.Log.Info("leadership ended; waiting for the work to stop") })
	if ctx.Err() != nil || leadErr != nil {
		return leadErr
	}
	return ErrLost
}

// work is the leader's work: started at most once, by the elector's
// goroutine, and waited for by Run. Once Run waits, work that has not
// started never will.
type work struct {
	mu      sync.Mutex
	closed  bool
	started bool
	done    chan struct{}
	err     error
}

func (w *work) run(ctx context.Context, f func(context.Context) error) {
	w.mu.Lock()
	if w.closed || w.started {
		w.mu.Unlock()
		return
	}
	w.started = true
	w.done = make(chan struct{})
	w.mu.Unlock()
	err := f(ctx)
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
	close(w.done)
}

// wait closes w to new work and waits for the work that started (calling
// waiting first); it returns the work's error.
func (w *work) wait(waiting func()) error {
	w.mu.Lock()
	w.closed = true
	started, done := w.started, w.done
	w.mu.Unlock()
	if !started {
		return nil
	}
	waiting()
	<-done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}
