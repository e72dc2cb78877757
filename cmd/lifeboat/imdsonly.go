//go:build imdsonly

package main

// The IMDS-only build (go build -tags imdsonly, the DaemonSet's
// lifeboat-imds): IMDS mode, replay and version, without queue mode and
// check, so that the AWS service clients (EC2, SQS, EventBridge, Auto
// Scaling, STS) are neither linked nor initialised. The node's memory is
// what this saves: docs/benchmarks.md.

import (
	"context"
	"errors"
	"io"
	"net/http"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/imdsflow"
	"lifeboat.dev/lifeboat/internal/kube"
)

var errIMDSOnly = errors.New("this build of lifeboat (lifeboat-imds) runs only --mode imds; queue mode and check are in the lifeboat binary of the same image")

func (a *app) startQueue(context.Context, *errgroup.Group) error {
	return usageError{errIMDSOnly, "lifeboat run --help"}
}

// errIMDSLifecycle: completing the lifecycle action needs the Auto Scaling
// client, which this build leaves out.
var errIMDSLifecycle = errors.New("--imds-complete-lifecycle needs the Auto Scaling client, which this build of lifeboat (lifeboat-imds) does not include: run the lifeboat binary of the same image (chart: daemonsetCommand: [])")

// buildRefuses refuses, at start, what this build leaves out.
func buildRefuses(cfg config.Config) error {
	if cfg.IMDSCompleteLifecycle {
		return usageError{errIMDSLifecycle, "lifeboat run --help"}
	}
	return nil
}

// imdsLifecycle: buildRefuses refused --imds-complete-lifecycle.
func (a *app) imdsLifecycle(context.Context, *controller.Deps, *imdsflow.Options) error { return nil }

func checkCommand(context.Context, []string, func(string) string, io.Writer, io.Writer) error {
	return usageError{errIMDSOnly, "lifeboat --help"}
}

// writeFence: IMDS mode has no leader election (every pod acts on its own
// node), so every write goes; this build leaves internal/leader and its
// client-go leader election out.
type writeFence struct{}

func newFence(clock.PassiveClock, bool) *writeFence { return &writeFence{} }

// Transport is rt itself: nothing to fence.
func (*writeFence) Transport(rt http.RoundTripper) http.RoundTripper { return rt }

// clusterRecorder: this build runs IMDS mode only, whose recorder newApp
// makes; queue mode is refused before any Event.
func clusterRecorder(context.Context, kube.EventSink, corev1.EventSource) (kube.EventRecorder, func()) {
	return nil, func() {}
}
