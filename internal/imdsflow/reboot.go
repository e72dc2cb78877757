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
	imdssrc "lifeboat.dev/lifeboat/internal/source/imds"
)

// RebootWriter is the part of the drainer the reboot rule uses.
type RebootWriter interface {
	Uncordon(ctx context.Context, node, taintPrefix string, annotations []string) (bool, error)
	SetAnnotations(ctx context.Context, node string, annotations map[string]string) error
}

var _ RebootWriter = (*drain.Drainer)(nil)

// rebootMarker is the controller's CordonAnnotations hook: when lifeboat
// cordons the node for a reboot-type maintenance it records the
// maintenance, the node's boot ID and the time (imds.Marker), so that the
// lifeboat that starts after the reboot can tell the maintenance is over.
func rebootMarker(index *nodes.Index, clk clock.PassiveClock) func(string, []event.Event) map[string]string {
	return func(node string, due []event.Event) map[string]string {
		e, ok := imdssrc.RebootEvent(due)
		if !ok {
			return nil
		}
		n, found := index.ByName(node)
		if found {
			// Cordon is called again on every plan: keep the first record.
			if m, ok, _ := imdssrc.DecodeMarker(n.Annotations[imdssrc.AnnotationReboot]); ok && m.EventID == e.ID {
				return map[string]string{imdssrc.AnnotationReboot: n.Annotations[imdssrc.AnnotationReboot]}
			}
		}
		m := imdssrc.Marker{EventID: e.ID, Code: e.Action, At: clk.Now().UTC()}
		if found {
			m.BootID = n.Status.NodeInfo.BootID
		}
		return map[string]string{imdssrc.AnnotationReboot: m.Encode()}
	}
}

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
// imds.Rebooted), it removes lifeboat's taints and events, uncordons the
// node if lifeboat cordoned it, and marks the maintenance rebooted. It
// returns the IDs of maintenance events the source must not act on again
// (the metadata may list an active maintenance for a while after it is done).
func afterReboot(ctx context.Context, self *corev1.Node, w RebootWriter, recorder kube.EventRecorder, log *slog.Logger,
	bootTime func() (time.Time, error), dryRun bool) ([]string, error) {
	raw := self.Annotations[imdssrc.AnnotationReboot]
	m, ok, err := imdssrc.DecodeMarker(raw)
	if err != nil {
		log.Warn("ignoring unreadable reboot annotation", "node", self.Name, "error", err.Error())
		return nil, nil
	}
	if !ok {
		return nil, nil
	}
	if m.Rebooted {
		return []string{m.EventID}, nil
	}
	booted, err := bootTime()
	if err != nil {
		booted = time.Time{} // the boot ID alone decides
	}
	if !imdssrc.Rebooted(m, self.Status.NodeInfo.BootID, booted) {
		return nil, nil
	}
	uncordoned, err := w.Uncordon(ctx, self.Name, plan.TaintPrefix, []string{drain.AnnotationEvents})
	if err != nil {
		return nil, err
	}
	m.Rebooted = true
	if err := w.SetAnnotations(ctx, self.Name, map[string]string{imdssrc.AnnotationReboot: m.Encode()}); err != nil {
		return nil, err
	}
	msg := fmt.Sprintf("rebooted for maintenance %s: lifeboat's taints removed", m.Code)
	if self.Annotations[drain.AnnotationCordoned] == "true" {
		msg += ", uncordoned"
	} else {
		msg += " (the node was cordoned before lifeboat: left cordoned)"
	}
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
			if m, ok, _ := imdssrc.DecodeMarker(n.Annotations[imdssrc.AnnotationReboot]); ok && m.Rebooted {
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
