package imdsflow

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/plan"
	"lifeboat.dev/lifeboat/internal/rebootmark"
	imdssrc "lifeboat.dev/lifeboat/internal/source/imds"
)

// RebootWriter is the part of the drainer the reboot rule uses.
type RebootWriter interface {
	Uncordon(ctx context.Context, node, taintPrefix string, annotations []string) (bool, error)
	SetAnnotations(ctx context.Context, node string, annotations map[string]string) error
}

var _ RebootWriter = (*drain.Drainer)(nil)

// afterRebootRetrying runs afterReboot until it succeeds (the API server
// may be briefly unreachable while the node boots); readiness stays false
// meanwhile.
func afterRebootRetrying(ctx context.Context, o Options, deps controller.Deps, w RebootWriter) ([]string, error) {
	backoff := time.Second
	for {
		self, ok := deps.Nodes.ByName(o.NodeName)
		if !ok {
			return nil, fmt.Errorf("node %s disappeared", o.NodeName)
		}
		seen, err := afterReboot(ctx, self, w, deps.Recorder, deps.Log, hostBootTime, o.DryRun)
		if err == nil {
			if len(seen) > 0 && !o.DryRun {
				waitMarkerCached(ctx, deps.Nodes, o.NodeName, deps.Clock)
			}
			return seen, nil
		}
		deps.Log.Warn("undoing the cordon of a reboot maintenance failed; retrying", "node", o.NodeName, "error", err.Error(), "backoff", backoff)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deps.Clock.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// afterReboot applies the reboot rule at start: if lifeboat cordoned the node
// for a reboot-type maintenance and the node has rebooted since (see
// rebootmark.Decide), it removes lifeboat's taints and events, uncordons the
// node if lifeboat cordoned it, and marks the maintenance rebooted. It
// returns the IDs of maintenance events the source must not act on again
// (the metadata may list an active maintenance for a while after it is done).
func afterReboot(ctx context.Context, self *corev1.Node, w RebootWriter, recorder kube.EventRecorder, log *slog.Logger,
	bootTime func() (time.Time, error), dryRun bool) ([]string, error) {
	booted, err := bootTime()
	if err != nil {
		booted = time.Time{} // the boot ID alone decides
	}
	m, verdict, err := rebootmark.Decide(self.Annotations[rebootmark.Annotation], self.Status.NodeInfo.BootID, booted)
	if err != nil {
		log.Warn("ignoring unreadable reboot annotation", "node", self.Name, "error", err.Error())
	}
	switch verdict {
	case rebootmark.Done:
		return []string{m.EventID}, nil
	case rebootmark.Undo:
	default:
		return nil, nil
	}
	uncordoned, err := w.Uncordon(ctx, self.Name, plan.TaintPrefix, []string{drain.AnnotationEvents})
	if err != nil {
		return nil, err
	}
	m.Rebooted = true
	if err := w.SetAnnotations(ctx, self.Name, map[string]string{rebootmark.Annotation: m.Encode()}); err != nil {
		return nil, err
	}
	msg := rebootmark.UndoMessage(m, self.Annotations[drain.AnnotationCordoned] == "true")
	if dryRun {
		msg = "dry run: would have: " + msg
	}
	log.Info("Uncordoned", "node", self.Name, "eventID", m.EventID, "kind", event.ScheduledChange, "changed", uncordoned, "detail", msg)
	if recorder != nil {
		recorder.Event(&corev1.ObjectReference{Kind: "Node", Name: self.Name, UID: types.UID(self.Name)}, corev1.EventTypeNormal, "Uncordoned", msg)
	}
	return []string{m.EventID}, nil
}

// waitMarkerCached waits (at most 30 s) until the node cache shows the
// rebooted marker, so that the controller, which resumes from the cache,
// does not act on the events the reboot made obsolete.
func waitMarkerCached(ctx context.Context, index *nodes.Index, name string, clk clock.WithTicker) {
	tick := clk.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := clk.Now().Add(30 * time.Second)
	for clk.Now().Before(deadline) {
		if n, ok := index.ByName(name); ok {
			if m, ok, _ := rebootmark.DecodeMarker(n.Annotations[rebootmark.Annotation]); ok && m.Rebooted {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
	}
}

// hostBootTime reads the boot time of the host's kernel (/proc/stat is not
// namespaced: a container sees the node's).
func hostBootTime() (time.Time, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, fmt.Errorf("reading boot time: %w", err)
	}
	return imdssrc.ParseBootTime(b)
}
