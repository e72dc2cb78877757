package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// volumeAttachments tells which VolumeAttachments a node still has.
type volumeAttachments interface {
	Synced() bool
	OnNode(node string) []string
}

// volumePoll is how often the node's VolumeAttachments are looked at while
// waiting (a cache read, no API request).
const volumePoll = 250 * time.Millisecond

// volumeSyncGrace bounds the wait for the VolumeAttachment cache to fill
// (it never does without the RBAC grant); then lifeboat does not wait.
const volumeSyncGrace = 5 * time.Second

// awaitVolumesDetached waits, before a terminate action is completed with
// CONTINUE, until the node has no VolumeAttachment: the replacement pods'
// EBS volumes can then attach elsewhere at once instead of after the
// instance is gone. The wait is bounded by --volume-detach-timeout and by
// AWS's deadline less the margin (heartbeats keep the action alive
// meanwhile); when the bound is reached the action is completed anyway,
// with a Warning. It returns only ctx's error.
func (c *Controller) awaitVolumesDetached(ctx context.Context, w *nodeWork, deadline time.Time) error {
	if c.Volumes == nil || c.o.VolumeDetachTimeout <= 0 {
		return nil
	}
	start := c.Clock.Now()
	until := start.Add(c.o.VolumeDetachTimeout)
	if !deadline.IsZero() {
		if d := deadline.Add(-c.o.DeadlineMargin); d.Before(until) {
			until = d
		}
	}
	waited := false
	for {
		now := c.Clock.Now()
		if !c.Volumes.Synced() {
			if now.Sub(start) >= volumeSyncGrace || !now.Before(until) {
				c.reportOnce(w, "VolumeAttachmentsUnknown", corev1.EventTypeWarning, "volume-detach",
					"VolumeAttachments cannot be read (storage.k8s.io volumeattachments list/watch not granted?): completing without waiting for volumes to detach")
				return nil
			}
		} else {
			attached := c.Volumes.OnNode(w.name)
			if len(attached) == 0 {
				if waited {
					c.report(w, corev1.EventTypeNormal, "VolumesDetached", "volume-detach",
						fmt.Sprintf("volumes detached after %s", now.Sub(start).Round(time.Millisecond)))
				}
				return nil
			}
			if !now.Before(until) {
				c.report(w, corev1.EventTypeWarning, "VolumesStillAttached", "volume-detach",
					fmt.Sprintf("%d VolumeAttachments still there after %s (%s): completing anyway", len(attached), now.Sub(start).Round(time.Millisecond), strings.Join(attached, ", ")))
				return nil
			}
			if !waited {
				c.report(w, corev1.EventTypeNormal, "WaitingForVolumes", "volume-detach",
					fmt.Sprintf("waiting up to %s for %d VolumeAttachments to go: %s", until.Sub(now).Round(time.Second), len(attached), strings.Join(attached, ", ")))
				waited = true
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.Clock.After(volumePoll):
		}
	}
}
