//go:build !imdsonly

package main

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/asg"
	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/ec2tag"
	"lifeboat.dev/lifeboat/internal/intake"
	"lifeboat.dev/lifeboat/internal/lbdrain/poll"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/outofservice"
	"lifeboat.dev/lifeboat/internal/podwatch"
	"lifeboat.dev/lifeboat/internal/rebootmark"
	"lifeboat.dev/lifeboat/internal/rebootwatch"
	"lifeboat.dev/lifeboat/internal/source/sqs"
	"lifeboat.dev/lifeboat/internal/volumes"
)

// startQueue starts queue mode: the node cache, and, while this replica
// leads, the controller and the SQS source feeding it.
func (a *app) startQueue(ctx context.Context, g *errgroup.Group) error {
	cfg := a.cfg
	awsCfg, err := loadAWS(ctx, cfg)
	if err != nil {
		return err
	}
	httpClient := awsCfg.HTTPClient
	if httpClient == nil {
		httpClient = awshttp.NewBuildableClient() // the services' own default
	}
	fenced := a.fence.HTTPClient(httpClient)
	sqsClient := awssqs.NewFromConfig(awsCfg, func(o *awssqs.Options) {
		setEndpoint(&o.BaseEndpoint, cfg.Endpoints["sqs"])
		o.HTTPClient = fenced
	})
	// Handing messages back (visibility 0) acts on nothing: it goes past
	// the fence, so that a replica that lost the Lease still gives back
	// what it holds (sqs.Options.HandBack). Receives, extensions and
	// deletes stay fenced: a receive takes work, an extension hides it
	// from the next leader; a delete of finished work would be safe, but
	// a deposed replica's finished message simply comes back and is
	// recognised as done, as after a crash.
	handBackClient := awssqs.NewFromConfig(awsCfg, func(o *awssqs.Options) {
		setEndpoint(&o.BaseEndpoint, cfg.Endpoints["sqs"])
		o.HTTPClient = httpClient
	})

	cs, err := a.mainClientset()
	if err != nil {
		return err
	}
	index := nodes.New(a.kube.main, nodes.Options{LabelSelector: cfg.NodeScope(), OnListWatch: a.ready.NodeWatch})
	a.ready.WatchNodes(index.Synced)
	g.Go(func() error { index.Run(ctx); return nil })
	journal, err := a.failoverJournal()
	if err != nil {
		return err
	}
	source := sqs.New(sqsClient, a.clock, a.log, sqs.Options{
		QueueURL: cfg.QueueURL, Workers: cfg.Workers, Receivers: cfg.QueueReceivers, Visibility: cfg.VisibilityTimeout, DryRun: cfg.DryRun,
		OnReceiveError: func(error) {
			a.metrics.ReceiveErrors.Inc()
			a.metrics.SourceHealthy.WithLabelValues("sqs").Set(0)
			a.ready.SetSource(false)
		},
		OnReceive: func() { a.metrics.SourceHealthy.WithLabelValues("sqs").Set(1); a.ready.SetSource(true) },
		HandBack:  handBackClient,
		// A replica that may have lost the Lease leaves what the
		// journal holds to the next leader (failover.Journal.Recorded).
		KeepOnHandBack: func(handle string) bool { return journal != nil && !a.fence.Open() && journal.Recorded(handle) },
		OnHold: func() {
			if journal != nil {
				journal.Notify()
			}
		},
	})
	a.replacer = newReplacer(a, cs)
	// One shared pod watch serves every drain's wait (a burst's thousand
	// drains are one watch); IMDS mode drains one node and keeps its own.
	a.podWatch = podwatch.New(a.kube.podReads.Pods(metav1.NamespaceAll).Watch, clock.RealClock{}, a.log)
	drainer := a.drainer(index)
	deps := a.deps(index, drainer)
	var asgClient *asg.Client
	if cfg.CompleteLifecycle || cfg.ScaleInProtection {
		asClient := autoscaling.NewFromConfig(awsCfg, func(o *autoscaling.Options) {
			setEndpoint(&o.BaseEndpoint, cfg.Endpoints["autoscaling"])
			o.HTTPClient = fenced
		})
		asgClient = asg.New(asClient, a.clock, a.log, asg.Options{DryRun: cfg.DryRun, ClusterName: cfg.ClusterName, Managed: cfg.ManagedASGs})
	}
	if cfg.CompleteLifecycle {
		deps.ASG = asgClient
	}
	opts := controller.Options{
		Policy: a.policy(), HeartbeatInterval: cfg.HeartbeatInterval,
		DeadlineMargin: cfg.DeadlineMargin, LifecycleTimeoutResult: cfg.LifecycleTimeoutResult,
		LaunchReadyTimeout: cfg.LaunchReadyTimeout, LaunchTimeoutResult: cfg.LaunchTimeoutResult,
		HeartbeatUntil: cfg.HeartbeatUntil, CompleteLifecycleDelay: cfg.CompleteLifecycleDelay, RebalanceCordonExpiry: cfg.RebalanceCordonExpiry,
		CordonAnnotations: rebootmark.Hook(index.ByName, a.clock), UndoAnnotations: []string{rebootmark.Annotation},
	}
	if cfg.CompleteLifecycle && cfg.VolumeDetachTimeout > 0 {
		vols := volumes.New(cs, 0)
		g.Go(func() error { vols.Run(ctx); return nil })
		deps.Volumes = vols
		opts.VolumeDetachTimeout = cfg.VolumeDetachTimeout
	}
	if cfg.WaitForLoadBalancers && cfg.CompleteLifecycle {
		elbClient := elbv2.NewFromConfig(awsCfg, func(o *elbv2.Options) { setEndpoint(&o.BaseEndpoint, cfg.Endpoints["elasticloadbalancing"]) })
		deps.LoadBalancers = poll.New(elbClient, a.kube.main, a.clock, a.log, poll.Options{})
	}
	intakeOpts := intake.Options{UnknownInstance: cfg.UnknownInstance, Lifecycle: cfg.CompleteLifecycle}
	ec2Client := ec2.NewFromConfig(awsCfg, func(o *ec2.Options) { setEndpoint(&o.BaseEndpoint, cfg.Endpoints["ec2"]) })
	var oos *outofservice.Watcher // after the instance goes: the out-of-service taint, ghost nodes
	if cfg.OutOfServiceTaint || cfg.GhostNodeAfter > 0 {
		oos = outofservice.New(outofservice.Deps{Nodes: index, Writer: drainer, EC2: ec2Client, Recorder: a.recorder,
			Metrics: a.metrics, Clock: a.clock, Log: a.log},
			outofservice.Options{Taint: cfg.OutOfServiceTaint, GhostAfter: cfg.GhostNodeAfter, DeleteGhosts: cfg.DeleteGhostNodes})
		intakeOpts.Observe = oos.Observe
	}
	if cfg.PrivateDNSLookup {
		intakeOpts.Resolve = privateDNSResolver(ec2Client)
	}
	if cfg.ManagedTag != "" {
		intakeOpts.Managed = ec2tag.HasKey(ec2Client, cfg.ManagedTag)
	}
	ctrl := controller.New(deps, opts)
	// After a reboot maintenance: uncordon once the node has rebooted.
	reboots := rebootwatch.New(rebootwatch.Deps{Nodes: index, Writer: drainer, Recorder: a.recorder, Metrics: a.metrics, Clock: a.clock, Log: a.log},
		rebootwatch.Options{Policy: opts.Policy, DryRun: cfg.DryRun})
	in := intake.New(index, ctrl, source, a.metrics, a.log, intakeOpts)
	// lead runs the controller, the acknowledgements and, once the
	// controller has resumed the nodes it was working on, the queue; all
	// stop when leadership or the process ends. On a stop the queue stops
	// first: its last long polls are answered and the messages it holds
	// handed back while the controller still works (heartbeats included);
	// then the controller stops, and only then is the Lease released
	// (leader.Run), so the next leader finds the messages at once and the
	// lifecycle actions lose no heartbeat to the wait.
	lead := func(ctx context.Context) error {
		workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
		defer stopWork()
		lg, workCtx := errgroup.WithContext(workCtx)
		lg.Go(func() error { return ctrl.Run(workCtx) })
		lg.Go(func() error { return in.Run(workCtx) })
		if cfg.ScaleInProtection {
			lg.Go(func() error { return a.protector(cs, index, drainer, asgClient).Run(workCtx) })
		}
		if oos != nil {
			lg.Go(func() error { return oos.Run(workCtx) })
		}
		lg.Go(func() error { return reboots.Run(workCtx) })
		lg.Go(func() error {
			defer stopWork()
			queueCtx, stopQueue := context.WithCancel(workCtx)
			defer stopQueue()
			defer context.AfterFunc(ctx, stopQueue)()
			select {
			case <-queueCtx.Done():
				return nil
			case <-ctrl.Started():
			}
			a.log.Info("consuming queue", "queueURL", cfg.QueueURL)
			return a.journaled(queueCtx, journal, source, func() error { return source.Run(queueCtx, in.Handle) })
		})
		return lg.Wait()
	}
	g.Go(func() error { return a.elect(ctx, lead) })
	return nil
}

func setEndpoint(dst **string, url string) {
	if url != "" {
		*dst = aws.String(url)
	}
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
