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
	// ReleaseWithin bounds how long a stopping replica keeps the Lease
	// while its work stops (0: 20 s, see defaultReleaseWithin).
	ReleaseWithin time.Duration
}

// Run runs lead while this replica holds the Lease, with a context that
// ends when the Lease is lost or ctx ends. Losing the Lease ends Run (with
// lead's error, else ErrLost) so that the process never acts beside a new
// leader; until lead has returned, fence keeps it from writing. Run returns
// only after lead has returned.
//
// When ctx ends (SIGTERM: a rollout, a restart) the work stops first,
// while this replica still holds the Lease and keeps renewing it, so that
// its last acts (the SQS source handing back the messages it holds) go
// through the open fence; only then is the Lease released, and the next
// leader finds the messages on the queue at once. A work that takes longer
// than Options.ReleaseWithin to stop loses the Lease anyway (and is fenced).
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
	// The election's own context ends only after the work has stopped (or
	// ReleaseWithin after ctx ended): ending it releases the Lease.
	electCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()
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
			// wait for it: w keeps track. The work ends when the Lease is
			// lost (leading ends) or the process stops (ctx ends).
			OnStartedLeading: func(leading context.Context) {
				wctx, cancel := context.WithCancel(leading)
				defer cancel()
				stop := context.AfterFunc(ctx, cancel)
				defer stop()
				w.run(wctx, func(ctx context.Context) error {
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
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		le.Run(electCtx) // returns when the Lease is lost or electCtx ends
	}()
	var leadErr error
	select {
	case <-elected: // lost the Lease (or ctx ended while acquiring): the work's context has ended
		leadErr = w.wait(func() { o.Log.Info("leadership ended; waiting for the work to stop") })
	case <-ctx.Done():
		within := o.ReleaseWithin
		if within <= 0 {
			within = defaultReleaseWithin
		}
		leadErr = stopThenRelease(&w, stopElection, within, o.Log)
	}
	stopElection()
	<-elected
	if ctx.Err() != nil || leadErr != nil {
		return leadErr
	}
	return ErrLost
}

// defaultReleaseWithin bounds how long a stopping replica keeps the Lease while its
// work stops (normally the SQS source's long polls in flight, at most 8 s,
// and its hand-back, at most 5 s): the chart gives a stopping pod 30 s
// before SIGKILL, and the next leader should not wait for the Lease to run
// out.
const defaultReleaseWithin = 20 * time.Second

// stopThenRelease waits for the work, whose context has ended, and then
// releases the Lease (stopElection); if the work takes longer than within,
// it releases the Lease first and still waits.
func stopThenRelease(w *work, stopElection func(), within time.Duration, log *slog.Logger) error {
	done := make(chan error, 1)
	go func() {
		done <- w.wait(func() { log.Info("stopping: waiting for the work to stop before releasing the leader lease") })
	}()
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		log.Warn("the work did not stop in time; releasing the leader lease while it stops (fenced)", "after", within)
		stopElection()
		return <-done
	}
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
