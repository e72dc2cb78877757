package leader

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
)

// logHook is a slog.Handler that calls on for every record.
type logHook struct{ on func(msg string) }

func (h logHook) Enabled(context.Context, slog.Level) bool      { return true }
func (h logHook) Handle(_ context.Context, r slog.Record) error { h.on(r.Message); return nil }
func (h logHook) WithAttrs([]slog.Attr) slog.Handler            { return h }
func (h logHook) WithGroup(string) slog.Handler                 { return h }

// lead is the leader's work of the tests: it runs until its context ends,
// then stops, which takes until release is closed, and returns err.
type lead struct {
	started  chan struct{}
	release  chan struct{}
	finished atomic.Bool
	err      error
}

func newLead(err error) *lead {
	return &lead{started: make(chan struct{}), release: make(chan struct{}), err: err}
}

func (l *lead) run(ctx context.Context) error {
	close(l.started)
	<-ctx.Done()
	<-l.release // stopping: draining goroutines, a last report...
	l.finished.Store(true)
	return l.err
}

// options returns election options on a fake API server whose log closes
// l.release when Run says it waits for the work (and never before): Run
// must not return while the work is stopping.
func options(t *testing.T, kube *fake.Clientset, l *lead) Options {
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(l.release) }) }) // never leave the work blocked
	log := slog.New(logHook{on: func(msg string) {
		if strings.Contains(msg, "waiting for the work to stop") {
			once.Do(func() { close(l.release) })
		}
	}})
	return Options{Client: kube, Name: "lifeboat", Namespace: "lifeboat", Identity: "me",
		LeaseDuration: 600 * time.Millisecond, Log: log}
}

// Issue 14 item 7: the work's error was read without synchronisation and
// the process could exit (Run returned) while the controller was still
// stopping. Run must return after the work, with its error.
func TestRunWaitsForTheWorkOnShutdown(t *testing.T) {
	errStop := errors.New("the controller's last write failed")
	l := newLead(errStop)
	kube := fake.NewClientset()
	fence := NewFence(clock.RealClock{}, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	result := make(chan error, 1)
	go func() { result <- Run(ctx, options(t, kube, l), fence, l.run) }()
	<-l.started
	if !fence.Open() {
		t.Error("the fence is shut while this replica leads")
	}
	cancel()
	err := <-result
	if !l.finished.Load() {
		t.Fatal("Run returned while the leader's work was still stopping")
	}
	if !errors.Is(err, errStop) {
		t.Errorf("Run = %v, want the work's error %v", err, errStop)
	}
	if fence.Open() {
		t.Error("the fence is open after the lease was released")
	}
}

func TestRunWaitsForTheWorkWhenTheLeaseIsLost(t *testing.T) {
	l := newLead(nil)
	kube := fake.NewClientset()
	var lose atomic.Bool
	kube.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if lose.Load() {
			return true, nil, errors.New("the API server is unreachable")
		}
		return false, nil, nil
	})
	fence := NewFence(clock.RealClock{}, true)
	var leading []bool
	var mu sync.Mutex
	o := options(t, kube, l)
	o.OnLeading = func(b bool) { mu.Lock(); leading = append(leading, b); mu.Unlock() }
	result := make(chan error, 1)
	go func() { result <- Run(context.Background(), o, fence, l.run) }()
	<-l.started
	lose.Store(true) // renewals fail until the renew deadline passes
	err := <-result
	if !l.finished.Load() {
		t.Fatal("Run returned while the leader's work was still stopping")
	}
	if !errors.Is(err, ErrLost) {
		t.Errorf("Run = %v, want %v", err, ErrLost)
	}
	if fence.Open() {
		t.Error("the fence is open after the lease was lost")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leading) != 2 || !leading[0] || leading[1] {
		t.Errorf("OnLeading calls = %v, want [true false]", leading)
	}
}

// Stopped before it ever led: the work never starts.
func TestRunCanceledBeforeLeading(t *testing.T) {
	l := newLead(nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Run(ctx, options(t, fake.NewClientset(), l), NewFence(clock.RealClock{}, true), l.run); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	select {
	case <-l.started:
		t.Error("the work started although the context had ended")
	default:
	}
}

// Issue 22: a stopping replica keeps the Lease (fence open) while its work
// stops, so that its last acts go through, and releases it after; a work
// that does not stop within ReleaseWithin loses the Lease anyway (the
// fence shuts), and Run still waits for it.
func TestRunReleasesTheLeaseAfterTheWork(t *testing.T) {
	for _, tc := range []struct {
		name      string
		hangs     bool // the work does not stop within ReleaseWithin
		openWhile bool // the fence is open while the work stops
	}{
		{"the work stops in time", false, true},
		{"the work hangs", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset()
			fence := NewFence(clock.RealClock{}, true)
			l := newLead(nil)
			o := options(t, kube, l)
			o.Log = slog.New(logHook{on: func(string) {}}) // l.release is closed by the work itself
			// A renewal is trusted for 2 s: the fence stays open through
			// the work's 1 s stop unless the Lease is released.
			o.LeaseDuration = 3 * time.Second
			o.ReleaseWithin = 1500 * time.Millisecond
			var openWhileStopping atomic.Bool
			work := func(ctx context.Context) error {
				close(l.started)
				<-ctx.Done()
				if tc.hangs {
					time.Sleep(o.ReleaseWithin + time.Second) // past ReleaseWithin: released meanwhile
				} else {
					time.Sleep(time.Second)
				}
				openWhileStopping.Store(fence.Open())
				l.finished.Store(true)
				return nil
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			result := make(chan error, 1)
			go func() { result <- Run(ctx, o, fence, work) }()
			<-l.started
			cancel()
			if err := <-result; err != nil {
				t.Errorf("Run = %v, want nil", err)
			}
			if !l.finished.Load() {
				t.Fatal("Run returned while the work was still stopping")
			}
			if got := openWhileStopping.Load(); got != tc.openWhile {
				t.Errorf("fence open at the end of the work's stop: %v, want %v", got, tc.openWhile)
			}
			lease, err := kube.CoordinationV1().Leases("lifeboat").Get(context.Background(), "lifeboat", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
				t.Errorf("Lease still held by %q after Run returned", *h)
			}
			if fence.Open() {
				t.Error("the fence is open after the Lease was released")
			}
		})
	}
}
