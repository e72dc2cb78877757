// Package imdsflow is IMDS mode (a DaemonSet pod per node): the node
// cache watches only this node, the source polls this instance's metadata,
// the controller works on this node only, and the reboot rule undoes
// lifeboat's cordon once the node has rebooted for the maintenance it was
// cordoned for, and, when asked, the node's own terminate lifecycle actions
// ride on its termination event to be heartbeated and completed
// (docs/imds.md).
package imdsflow

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/plan"
	"lifeboat.dev/lifeboat/internal/rebootmark"
	imdssrc "lifeboat.dev/lifeboat/internal/source/imds"
)

// Options configure IMDS mode.
type Options struct {
	// NodeName is the node lifeboat runs on.
	NodeName string
	// Endpoint is the metadata service (imds.ResolveEndpoint; "": the IPv4 default); AllowV1
	// falls back to IMDSv1 when no token can be obtained.
	Endpoint string
	AllowV1  bool
	// Poll is how often the metadata is read.
	Poll           time.Duration
	DryRun         bool
	Policy         plan.Policy
	DeadlineMargin time.Duration
	// RebalanceCordonExpiry: see controller.Options.
	RebalanceCordonExpiry time.Duration
	// OnPoll is told after each poll whether the metadata answered
	// (readiness); optional.
	OnPoll func(healthy bool)
	// Lifecycle, if set, finds the node's terminate lifecycle actions when
	// the metadata announces the termination (--imds-complete-lifecycle):
	// the controller (deps.ASG and Policy.CompleteLifecycle set too)
	// heartbeats them while it drains and completes them after.
	Lifecycle LookupActions
	// LifecycleTimeoutResult: see controller.Options.
	LifecycleTimeoutResult lifecycle.Result
}

// Run runs IMDS mode until ctx ends. deps.Nodes must be an index
// restricted to o.NodeName (nodes.Options.OnlyNode) and already running;
// deps.Drainer also writes the reboot rule's changes.
func Run(ctx context.Context, o Options, deps controller.Deps, w RebootWriter) error {
	log := deps.Log
	if err := deps.Nodes.WaitSynced(ctx); err != nil {
		return err
	}
	self, ok := deps.Nodes.ByName(o.NodeName)
	if !ok {
		return fmt.Errorf("node %s not found: --node-name must name the node lifeboat runs on (downward API spec.nodeName)", o.NodeName)
	}
	seen, err := afterRebootRetrying(ctx, o, deps, w)
	if err != nil {
		return err
	}

	onPoll := o.OnPoll
	if onPoll == nil {
		onPoll = func(bool) {}
	}
	deps.Metrics.SourceHealthy.WithLabelValues(string(event.SourceIMDS)).Set(0) // until the first poll answers
	var checkInstance sync.Once
	var source *imdssrc.Source
	source = imdssrc.New(imdssrc.NewClient(o.Endpoint, o.AllowV1), deps.Clock, log, imdssrc.Options{
		Interval: o.Poll,
		Seen:     seen,
		OnPoll: func(err error) {
			healthy := 0.0
			if err == nil {
				healthy = 1
				checkInstance.Do(func() { warnOtherInstance(log, self, source.InstanceID()) })
			}
			deps.Metrics.SourceHealthy.WithLabelValues(string(event.SourceIMDS)).Set(healthy)
			onPoll(err == nil)
		},
	})
	ctrl := controller.New(deps, controller.Options{
		Policy:                 o.Policy,
		DeadlineMargin:         o.DeadlineMargin,
		CordonAnnotations:      rebootmark.Hook(deps.Nodes.ByName, deps.Clock),
		UndoAnnotations:        []string{rebootmark.Annotation},
		RebalanceCordonExpiry:  o.RebalanceCordonExpiry,
		LifecycleTimeoutResult: o.LifecycleTimeoutResult,
	})
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ctrl.Run(ctx) })
	g.Go(func() error {
		select {
		case <-ctx.Done():
			return nil
		case <-ctrl.Started():
		}
		return source.Run(ctx, func(evs []event.Event) { ctrl.SubmitNode(o.NodeName, withActions(ctx, log, o.Lifecycle, evs)) })
	})
	return g.Wait()
}

// warnOtherInstance warns once when the node's providerID names another
// instance than the metadata service: --node-name is probably wrong.
func warnOtherInstance(log *slog.Logger, self *corev1.Node, instanceID string) {
	if own := nodes.InstanceID(self.Spec.ProviderID); own != "" && instanceID != "" && own != instanceID {
		log.Warn("the node's providerID names another instance than the instance metadata; check --node-name",
			"node", self.Name, "instanceID", instanceID, "providerInstanceID", own)
	}
}
