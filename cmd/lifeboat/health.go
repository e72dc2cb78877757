package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/kube"
)

// apiProbeInterval bounds how often /readyz asks the API server.
const apiProbeInterval = 5 * time.Second

// readiness is what /readyz reports: lifeboat has started, the Kubernetes
// API answers, and this replica is either a standby (waiting for the lease)
// or the leader with an event source that answered its last request.
// /healthz only says the process serves HTTP.
type readiness struct {
	kube, source atomic.Bool
	leader       leaderFlag
	// kubeProbe, if set, asks the API server whether it answers; /readyz
	// calls it at most every apiProbeInterval.
	kubeProbe func(context.Context) error
	clock     clock.PassiveClock

	mu       sync.Mutex
	probedAt time.Time
	probeErr error
}

// leaderFlag is whether this replica leads; it keeps lifeboat_leader in step.
type leaderFlag struct {
	atomic.Bool
	gauge prometheus.Gauge
}

func (f *leaderFlag) Store(b bool) {
	f.Bool.Store(b)
	if f.gauge != nil {
		v := 0.0
		if b {
			v = 1
		}
		f.gauge.Set(v)
	}
}

// apiProbe asks the API server's /readyz (allowed to every authenticated
// user by the default system:public-info-viewer role).
func apiProbe(client *kube.REST) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return client.Readyz(ctx)
	}
}

// apiErr returns the API server's answer, asking it again when the last
// answer is older than apiProbeInterval.
func (r *readiness) apiErr(ctx context.Context) error {
	if r.kubeProbe == nil {
		return nil
	}
	clk := r.clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := clk.Now(); r.probedAt.IsZero() || now.Sub(r.probedAt) >= apiProbeInterval {
		r.probeErr = r.kubeProbe(ctx)
		r.probedAt = now
	}
	return r.probeErr
}

// ready returns whether lifeboat is ready and a short explanation.
func (r *readiness) ready(ctx context.Context) (bool, string) {
	if !r.kube.Load() {
		return false, "starting"
	}
	if err := r.apiErr(ctx); err != nil {
		return false, fmt.Sprintf("kubernetes API unreachable: %v", err)
	}
	if !r.leader.Load() {
		return true, "ok: standby"
	}
	if !r.source.Load() {
		return false, "leader, but the event source did not answer its last request"
	}
	return true, "ok: leader"
}

func serve(addr string, reg *prometheus.Registry, ready *readiness) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, req *http.Request) {
		ok, why := ready.ready(req.Context())
		if !ok {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, why)
	})
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }() // ends with Shutdown
	return srv, nil
}
