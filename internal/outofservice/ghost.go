package outofservice

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ghost reports whether c is a ghost node now: reported once (a Warning
// Event) and, with Options.DeleteGhosts, deleted unless it is Ready (a
// kubelet still reports under its name: not the dead instance's node). A
// failed deletion is tried again after a pause.
func (w *Watcher) ghost(ctx context.Context, c candidate, now time.Time) bool {
	o := w.observation(c.instanceID)
	if !Ghost(o.state, o.at, now, w.o.GhostAfter) {
		return false
	}
	w.mu.Lock()
	t := w.nodes[c.node]
	first := !t.reported
	t.reported = true
	wait := now.Before(t.retry) || t.deleted
	w.mu.Unlock()
	if first {
		what := "delete it with --delete-ghost-nodes"
		switch {
		case w.o.DeleteGhosts && c.ready:
			what = "it is Ready, so lifeboat does not delete it"
		case w.o.DeleteGhosts:
			what = "lifeboat deletes it (--delete-ghost-nodes)"
		}
		w.reportType(c, corev1.EventTypeWarning, ReasonGhost, fmt.Sprintf("instance %s terminated at %s and its Node is still here %s later (the cloud controller normally deletes it): %s",
			c.instanceID, o.at.UTC().Format(time.RFC3339), now.Sub(o.at).Round(time.Second), what))
	}
	if !w.o.DeleteGhosts || c.ready || wait {
		return true
	}
	err := w.Writer.DeleteNode(ctx, c.node, c.uid)
	w.pause(t, err, now)
	if err != nil {
		w.Metrics.Actions.WithLabelValues("delete-ghost-node", "error").Inc()
		w.Log.Warn("ghost node not deleted", "node", c.node, "instanceID", c.instanceID, "error", err.Error())
		return true
	}
	w.mu.Lock()
	t.deleted = true
	w.mu.Unlock()
	w.Metrics.Actions.WithLabelValues("delete-ghost-node", "ok").Inc()
	w.report(c, ReasonGhostDeleted, fmt.Sprintf("instance %s is terminated: its Node deleted", c.instanceID))
	return true
}
