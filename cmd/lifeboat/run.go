package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/asg"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/plan"
	"lifeboat.dev/lifeboat/internal/source/sqs"
)

// runHandler is `lifeboat run`.
func runHandler(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	cfg, err := config.Load(args, getenv)
	if err != nil {
		return usageError{fmt.Errorf("configuration:\n%w", err)}
	}
	log := newLogger(cfg, stderr)
	log.Info("starting", "version", version, "mode", cfg.Mode, "dryRun", cfg.DryRun)
	for _, w := range cfg.Warnings {
		log.Warn("configuration warning", "detail", w)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New()
	if err := m.Register(reg); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	clk := clock.RealClock{}
	// Only the holder of the Lease acts; the fence stops a replica that
	// lost it without noticing (it was paused) from sending any write.
	fence := newFence(clk, cfg.Mode == config.ModeQueue && cfg.LeaderElect)
	kube, eventsClient, electionClient, err := kubeClients(cfg, m, fence)
	if err != nil {
		return err
	}

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: eventsClient.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "lifeboat"})

	var ready readiness
	ready.kubeProbe = apiProbe(kube)
	ready.leader.gauge = m.Leader
	g, ctx := errgroup.WithContext(ctx)
	notifier, err := newNotifier(cfg, clk, log, m)
	if err != nil {
		return usageError{err}
	}
	if notifier != nil {
		g.Go(func() error { return notifier.Run(ctx) })
	}
	if cfg.ListenAddr != "" {
		srv, err := serve(cfg.ListenAddr, reg, &ready)
		if err != nil {
			return err
		}
		g.Go(func() error {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			return srv.Shutdown(sctx)
		})
	}

	skipOwn := func(p *corev1.Pod) bool { return p.Name == cfg.PodName && p.Namespace == cfg.PodNamespace }
	// newDrainer makes the drainer; index (the node cache) saves a GET per cordon.
	newDrainer := func(index *nodes.Index) *drain.Drainer {
		return drain.New(kube, clk, log, drain.Options{
			Backoff: cfg.EvictionBackoff, Margin: cfg.DeadlineMargin, ForceDeleteAtDeadline: cfg.ForceDeleteAtDeadline,
			Skip: skipOwn, DryRun: cfg.DryRun, NodeCache: index.ByName,
		})
	}
	policy := plan.Policy{DrainKinds: cfg.DrainKinds, ScheduledChangeLead: cfg.ScheduledChangeLead, CompleteLifecycle: cfg.CompleteLifecycle}

	switch cfg.Mode {
	case config.ModeQueue:
		awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsClientDefaults, func(o *awsconfig.LoadOptions) error {
			if cfg.Region != "" {
				o.Region = cfg.Region
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("loading AWS configuration: %w", err)
		}
		httpClient := awsCfg.HTTPClient
		if httpClient == nil {
			httpClient = awshttp.NewBuildableClient() // the services' own default
		}
		fencedAWS := fencedHTTPClient{next: httpClient, fence: fence}
		sqsClient := awssqs.NewFromConfig(awsCfg, func(o *awssqs.Options) {
			setEndpoint(&o.BaseEndpoint, cfg.Endpoints["sqs"])
			o.HTTPClient = fencedAWS
		})
		asClient := autoscaling.NewFromConfig(awsCfg, func(o *autoscaling.Options) {
			setEndpoint(&o.BaseEndpoint, cfg.Endpoints["autoscaling"])
			o.HTTPClient = fencedAWS
		})
		index := nodes.New(kube, nodes.Options{})
		g.Go(func() error { index.Run(ctx); return nil })
		source := sqs.New(sqsClient, clk, log, sqs.Options{
			QueueURL: cfg.QueueURL, Workers: cfg.Workers, Visibility: cfg.VisibilityTimeout, DryRun: cfg.DryRun,
			OnReceiveError: func(error) {
				m.ReceiveErrors.Inc()
				m.SourceHealthy.WithLabelValues("sqs").Set(0)
				ready.source.Store(false)
			},
			OnReceive: func() { m.SourceHealthy.WithLabelValues("sqs").Set(1); ready.source.Store(true) },
		})
		var lifecycle *asg.Client
		if cfg.CompleteLifecycle {
			lifecycle = asg.New(asClient, clk, log, asg.Options{DryRun: cfg.DryRun, ClusterName: cfg.ClusterName, Managed: cfg.ManagedASGs})
		}
		opts := controller.Options{
			Policy: policy, UnknownInstance: cfg.UnknownInstance, HeartbeatInterval: cfg.HeartbeatInterval,
			DeadlineMargin: cfg.DeadlineMargin, LifecycleTimeoutResult: cfg.LifecycleTimeoutResult,
			LaunchReadyTimeout: cfg.LaunchReadyTimeout, LaunchTimeoutResult: cfg.LaunchTimeoutResult,
		}
		if cfg.PrivateDNSLookup {
			ec2Client := ec2.NewFromConfig(awsCfg, func(o *ec2.Options) { setEndpoint(&o.BaseEndpoint, cfg.Endpoints["ec2"]) })
			opts.Resolve = privateDNSResolver(ec2Client)
		}
		deps := controller.Deps{Nodes: index, Drainer: newDrainer(index), Acker: source, Recorder: recorder, Metrics: m, Clock: clk, Log: log}
		if lifecycle != nil {
			deps.ASG = lifecycle
		}
		if notifier != nil {
			deps.Notifier = notifier
		}
		ctrl := controller.New(deps, opts)
		lead := func(ctx context.Context) error {
			lg, ctx := errgroup.WithContext(ctx)
			lg.Go(func() error { return ctrl.Run(ctx) })
			lg.Go(func() error {
				select {
				case <-ctx.Done():
					return nil
				case <-ctrl.Started():
				}
				log.Info("consuming queue", "queueURL", cfg.QueueURL)
				return source.Run(ctx, ctrl.HandleMessage)
			})
			return lg.Wait()
		}
		g.Go(func() error {
			if !cfg.LeaderElect {
				ready.leader.Store(true)
				return lead(ctx)
			}
			return leaderElect(ctx, cfg, electionClient, fence, log, &ready, lead)
		})
	case config.ModeIMDS:
		// One pod per node: it watches only its own Node and acts only on it.
		index := nodes.New(kube, nodes.Options{OnlyNode: cfg.NodeName})
		g.Go(func() error { index.Run(ctx); return nil })
		deps := controller.Deps{Nodes: index, Drainer: newDrainer(index), Recorder: recorder, Metrics: m, Clock: clk, Log: log}
		if notifier != nil {
			deps.Notifier = notifier
		}
		// No election: every pod works, so readiness follows its source
		// (the flag, not the lifeboat_leader gauge, which stays 0).
		ready.leader.Bool.Store(true)
		g.Go(func() error { return runIMDS(ctx, cfg, deps, policy, &ready) })
	}
	ready.kube.Store(true)
	err = g.Wait()
	if errors.Is(err, context.Canceled) || ctx.Err() != nil && err == nil {
		log.Info("stopped")
		return nil
	}
	return err
}

func setEndpoint(dst **string, url string) {
	if url != "" {
		*dst = aws.String(url)
	}
}

// kubeClients returns lifeboat's Kubernetes client (QPS/burst from the
// configuration, every request counted), a separate client for Kubernetes
// Events with its own, smaller rate limit, so that reporting never delays a
// cordon or an eviction, both writing only while fence is open, and the
// leader election's own client (never fenced, never queued behind a drain).
func kubeClients(cfg config.Config, m *metrics.Metrics, fence *fence) (kube, events, election kubernetes.Interface, err error) {
	rc, err := restConfig(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	ec := rest.CopyConfig(rc)
	lc := rest.CopyConfig(rc)
	withFence := func(rt http.RoundTripper) http.RoundTripper { return fencedTransport{next: rt, fence: fence} }
	rc.QPS, rc.Burst = cfg.KubeQPS, cfg.KubeBurst
	rc.Wrap(m.CountKubeRequests)
	rc.Wrap(withFence)
	if kube, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	ec.QPS, ec.Burst = 20, 50
	ec.Wrap(withFence)
	if events, err = kubernetes.NewForConfig(ec); err != nil {
		return nil, nil, nil, fmt.Errorf("kubernetes events client: %w", err)
	}
	lc.QPS, lc.Burst = 5, 10
	if election, err = kubernetes.NewForConfig(lc); err != nil {
		return nil, nil, nil, fmt.Errorf("kubernetes leader election client: %w", err)
	}
	return kube, events, election, nil
}

func restConfig(cfg config.Config) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	rc.UserAgent = "lifeboat/" + version
	// Protobuf: a node list decodes with a fraction of JSON's garbage (the
	// memory peak of a 5,000-node cache fill), and every lifeboat request is
	// for a built-in type.
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return rc, nil
}

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
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

// leaderElect runs lead while this replica holds the Lease. Losing the lease
// ends the process (with an error) so that it never acts beside a new
// leader; until it ends, fence keeps it from writing.
func leaderElect(ctx context.Context, cfg config.Config, kube kubernetes.Interface, fence *fence, log *slog.Logger, ready *readiness, lead func(context.Context) error) error {
	id, _ := os.Hostname()
	if cfg.PodName != "" {
		id = cfg.PodName
	}
	renewDeadline := cfg.LeaseDuration * 2 / 3
	lock := &fencedLock{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: cfg.LeaseName, Namespace: cfg.LeaseNamespace},
			Client:     kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		},
		fence: fence,
		// A renewal is trusted for the renew deadline, a third of the lease
		// less than the other replicas wait: room for clock drift.
		valid: renewDeadline,
	}
	var leadErr error
	lost := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   renewDeadline,
		RetryPeriod:     cfg.LeaseDuration / 6,
		ReleaseOnCancel: true,
		Name:            "lifeboat",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				log.Info("became leader", "identity", id)
				ready.leader.Store(true)
				leadErr = lead(ctx)
			},
			OnStoppedLeading: func() {
				fence.shut()
				ready.leader.Store(false)
				close(lost)
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	le.Run(ctx)
	if ctx.Err() != nil {
		return leadErr
	}
	<-lost
	if leadErr != nil {
		return leadErr
	}
	return errors.New("lost the leader lease")
}

func privateDNSResolver(api *ec2.Client) func(context.Context, string) (string, error) {
	return func(ctx context.Context, instanceID string) (string, error) {
		out, err := api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{instanceID}})
		if err != nil {
			return "", fmt.Errorf("describing instance %s: %w", instanceID, err)
		}
		for _, r := range out.Reservations {
			for _, i := range r.Instances {
				return aws.ToString(i.PrivateDnsName), nil
			}
		}
		return "", nil
	}
}
