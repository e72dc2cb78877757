package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/dsstop"
	"lifeboat.dev/lifeboat/internal/imdsflow"
	"lifeboat.dev/lifeboat/internal/kevents"
	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/kubeletshutdown"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notify"
	"lifeboat.dev/lifeboat/internal/plan"
	"lifeboat.dev/lifeboat/internal/readiness"
)

const runHeader = `usage: lifeboat run [flags]

Handle interruptions until stopped (SIGTERM): queue mode reads an SQS queue
fed by EventBridge or Auto Scaling (a leader-elected Deployment); imds mode
polls the instance metadata of its own node (a DaemonSet).

`

// runCommand is `lifeboat run`.
func runCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, ok, err := loadConfig(config.NewFlags("run"), "run", runHeader, args, getenv, stdout)
	if !ok {
		return err
	}
	if err := buildRefuses(cfg); err != nil {
		return err
	}
	if cfg, err = resolveIMDSEndpoint(cfg, getenv); err != nil {
		return usageError{err, "lifeboat run --help"}
	}
	log := newLogger(cfg, stderr)
	log.Info("starting", "version", version, "mode", cfg.Mode, "dryRun", cfg.DryRun)
	for _, w := range cfg.Warnings {
		log.Warn("configuration warning", "detail", w)
	}
	a, err := newApp(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.stopEvents()

	g, ctx := errgroup.WithContext(ctx)
	if err := a.serve(ctx, g); err != nil {
		return err
	}
	switch cfg.Mode {
	case config.ModeQueue:
		err = a.startQueue(ctx, g)
	case config.ModeIMDS:
		err = a.startIMDS(ctx, g)
	}
	if err != nil {
		g.Go(func() error { return err }) // stop what started, then report
	}
	a.ready.Started()
	err = g.Wait()
	if errors.Is(err, context.Canceled) || ctx.Err() != nil && err == nil {
		log.Info("stopped")
		return nil
	}
	return err
}

// app holds what both modes share.
type app struct {
	cfg        config.Config
	log        *slog.Logger
	clock      clock.WithTickerAndDelayedExecution
	registry   *prometheus.Registry
	metrics    *metrics.Metrics
	fence      *writeFence
	kube       kubeClients
	recorder   kube.EventRecorder
	stopEvents func()
	notifier   *notify.Webhook // nil: no webhook
	ready      *readiness.State
	replacer   drain.Replacer       // --replacement-first (queue mode); nil: off
	podWatch   drain.NodePodWatcher // the shared pod watch (queue mode); nil: each drain its own
}

func newApp(ctx context.Context, cfg config.Config, log *slog.Logger) (*app, error) {
	a := &app{cfg: cfg, log: log, clock: clock.RealClock{}, registry: prometheus.NewRegistry(), metrics: metrics.New()}
	a.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := a.metrics.Register(a.registry); err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	// Only the holder of the Lease acts; the fence stops a replica that
	// lost it without noticing (it was paused) from sending any write.
	a.fence = newFence(a.clock, cfg.Mode == config.ModeQueue && cfg.LeaderElect)
	rc, err := restConfig(cfg, "lifeboat/"+version)
	if err != nil {
		return nil, err
	}
	if a.kube, err = newKubeClients(rc, cfg, a.metrics, a.fence.Transport); err != nil {
		return nil, err
	}
	source := corev1.EventSource{Component: "lifeboat"}
	var rec kube.EventRecorder
	if cfg.Mode == config.ModeIMDS {
		// One pod records a few Events on its own node: lifeboat's small
		// recorder, in both builds (client-go's links the OpenAPI models).
		r := kube.NewRecorder(a.kube.events.EventSink(), source, a.clock, log)
		rctx, cancel := context.WithCancel(ctx)
		go r.Run(rctx)
		rec, a.stopEvents = r, cancel
	} else {
		rec, a.stopEvents = clusterRecorder(ctx, a.kube.events.EventSink(), source)
	}
	a.recorder = kevents.Annotated(rec, cfg.EventAnnotations)
	a.ready = &readiness.State{Gauge: a.metrics.Leader}
	if a.notifier, err = newNotifier(cfg, a.clock, log, a.metrics); err != nil {
		a.stopEvents()
		return nil, usageError{err, "lifeboat run --help"}
	}
	return a, nil
}

// serve starts the webhook sender and the HTTP server of /metrics,
// /healthz and /readyz.
func (a *app) serve(ctx context.Context, g *errgroup.Group) error {
	if a.notifier != nil {
		g.Go(func() error { return a.notifier.Run(ctx) })
	}
	if a.cfg.ListenAddr == "" {
		return nil
	}
	srv, err := serve(a.cfg.ListenAddr, a.registry, a.ready)
	if err != nil {
		return err
	}
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	return nil
}

// drainer writes to the nodes of index and their pods; the node cache
// saves a GET per cordon. lifeboat's own pod is never evicted.
func (a *app) drainer(index *nodes.Index) *drain.Drainer {
	return drain.New(a.kube.main, a.clock, a.log, drain.Options{
		Backoff: a.cfg.EvictionBackoff, Margin: a.cfg.DeadlineMargin, ForceDeleteAtDeadline: a.cfg.ForceDeleteAtDeadline,
		DeleteBlocked: a.cfg.DeleteBlockedPods, AnnotatePods: a.cfg.AnnotatePods,
		TerminatingCondition: a.cfg.TerminatingCondition, Recorder: a.recorder,
		Skip: a.skipOwn, DryRun: a.cfg.DryRun, NodeCache: index.ByName, NodeClient: a.kube.nodes, PodReadClient: a.kube.podReads, PodWatch: a.podWatch,
		Actions: drain.Actions{PodGrace: a.cfg.PodGracePeriod, NodeGrace: a.cfg.NodeGracePeriod, TaintEffect: corev1.TaintEffect(a.cfg.TaintEffect),
			ExcludeFromLB: a.cfg.ExcludeFromLB},
		Replacer: a.replacer,
	})
}

// skipOwn reports lifeboat's own pod, which it never evicts.
func (a *app) skipOwn(p *corev1.Pod) bool {
	return p.Name == a.cfg.PodName && p.Namespace == a.cfg.PodNamespace
}

// deps are the controller's collaborators on the nodes of index.
func (a *app) deps(index *nodes.Index, drainer *drain.Drainer) controller.Deps {
	d := controller.Deps{Nodes: index, Drainer: drainer, Recorder: a.recorder, Metrics: a.metrics, Clock: a.clock, Log: a.log,
		Forecast: &drain.ForecastSource{Client: a.kube.forecast, Skip: a.skipOwn, PodGrace: a.cfg.PodGracePeriod, NodeGrace: a.cfg.NodeGracePeriod,
			DeleteBlocked: a.cfg.DeleteBlockedPods, Clock: a.clock}}
	if a.notifier != nil {
		d.Notifier = a.notifier
	}
	if a.cfg.CompleteLifecycle { // DaemonSet pods last, before CONTINUE (dsstop)
		d.DaemonSets = dsstop.New(a.kube.main, a.clock, a.log, dsstop.Options{All: a.cfg.StopDaemonSetPods, Own: a.skipOwn,
			PodGrace: a.cfg.PodGracePeriod, Margin: a.cfg.DeadlineMargin, Backoff: a.cfg.EvictionBackoff, Recorder: a.recorder, DryRun: a.cfg.DryRun})
	}
	if a.cfg.PlanWithKubeletShutdown {
		// Reads on the forecast's lane: never in the way of an eviction.
		d.Kubelet = kubeletshutdown.NewReader(kubeletshutdown.ProxyFetch(a.kube.forecast.CoreREST()))
	}
	return d
}

func (a *app) policy() plan.Policy {
	return plan.Policy{DrainKinds: a.cfg.DrainKinds, ScheduledChangeLead: a.cfg.ScheduledChangeLead, Windows: a.cfg.MaintenanceWindows,
		CompleteLifecycle: a.cfg.CompleteLifecycle}
}

// startIMDS starts IMDS mode: one pod per node, which watches only its own
// Node and acts only on it. There is no election: every pod works, so
// readiness follows its node watch and its source (Acting, not the
// lifeboat_leader gauge, which stays 0).
func (a *app) startIMDS(ctx context.Context, g *errgroup.Group) error {
	index := nodes.New(a.kube.main, nodes.Options{OnlyNode: a.cfg.NodeName, OnListWatch: a.ready.NodeWatch})
	a.ready.WatchNodes(index.Synced)
	drainer := a.drainer(index)
	deps := a.deps(index, drainer)
	o := imdsflow.Options{
		NodeName: a.cfg.NodeName, Endpoint: a.cfg.IMDSEndpoint, AllowV1: a.cfg.IMDSAllowV1, Poll: a.cfg.IMDSPoll,
		DryRun: a.cfg.DryRun, Policy: a.policy(), DeadlineMargin: a.cfg.DeadlineMargin, RebalanceCordonExpiry: a.cfg.RebalanceCordonExpiry,
		OnPoll: a.ready.SetSource,
	}
	if err := a.imdsLifecycle(ctx, &deps, &o); err != nil {
		return err
	}
	g.Go(func() error { index.Run(ctx); return nil })
	a.ready.Acting()
	g.Go(func() error { return imdsflow.Run(ctx, o, deps, drainer) })
	return nil
}

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel)) // validated by config
	opts := &slog.HandlerOptions{Level: level}
	var l *slog.Logger
	if cfg.LogFormat == "text" {
		l = slog.New(slog.NewTextHandler(w, opts))
	} else {
		l = slog.New(slog.NewJSONHandler(w, opts))
	}
	// client-go (leader election, the event broadcaster) logs through klog:
	// send it to the same handler so that every line has one format.
	klog.SetSlogLogger(l)
	return l
}
