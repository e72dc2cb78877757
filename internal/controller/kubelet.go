package controller

import (
	"context"
	"fmt"
	"time"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/kubeletshutdown"
	"lifeboat.dev/lifeboat/internal/plan"
)

// kubeletShutdown says what a node's kubelet graceful node shutdown gives
// its pods (kubeletshutdown.Reader: read once per node).
type kubeletShutdown interface {
	Verdict(ctx context.Context, node string) (kubeletshutdown.Verdict, error)
}

// withKubeletShutdown plans a Spot drain with the window the node's
// kubelet still gives its pods after the notice's end
// (--plan-with-kubelet-shutdown, plan.WithKubeletShutdown). The kubelet is
// read only for such a plan; a node whose kubelet could not be read, or
// has no window configured, is drained to AWS's deadline as without the
// option.
func (c *Controller) withKubeletShutdown(ctx context.Context, w *nodeWork, evs []event.Event, p plan.Plan) plan.Plan {
	if c.Kubelet == nil || !plan.KubeletShutdownApplies(p, evs) {
		return p
	}
	v, err := c.Kubelet.Verdict(ctx, w.name)
	if err != nil {
		c.Log.Warn("planning the drain to AWS's deadline: the kubelet's graceful node shutdown is unknown", "node", w.name, "error", err.Error())
		return p
	}
	if v.State != kubeletshutdown.Configured {
		c.Log.Info("planning the drain to AWS's deadline: the kubelet's graceful node shutdown is "+string(v.State), "node", w.name)
		return p
	}
	p = plan.WithKubeletShutdown(p, evs, v.Ordinary)
	c.Log.Info("planning the drain with the kubelet's graceful node shutdown", "node", w.name, "deadline", fmtDeadline(p.Deadline),
		"kubeletWindow", p.KubeletWindow.String(), "podDeadline", fmtDeadline(p.PodDeadline()))
	return p
}

// fmtPlanDeadline is the plan's deadline for people, with the kubelet's
// window after it when the drain works to that.
func fmtPlanDeadline(p plan.Plan) string {
	if p.KubeletWindow <= 0 || p.Deadline.IsZero() {
		return fmtDeadline(p.Deadline)
	}
	return fmt.Sprintf("%s, and the kubelet's graceful node shutdown %s after it, until %s", fmtDeadline(p.Deadline), p.KubeletWindow.Round(time.Second), fmtDeadline(p.PodDeadline()))
}
