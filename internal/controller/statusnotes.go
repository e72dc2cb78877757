package controller

import (
	"encoding/json"
	"strconv"
	"time"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/lifecycle"
)

// Node annotations kept so that an operator can see the work in flight
// (lifeboat status); lifeboat decides nothing from them but whether an
// action it finds gone was completed by itself (completions.go).
const (
	// AnnotationHeartbeats counts the lifecycle heartbeats that got through
	// for the node's current work.
	AnnotationHeartbeats = "lifeboat.io/heartbeats"
	// AnnotationLifecycle holds the JSON of the last lifecycle action
	// lifeboat completed for the node (LifecycleNote).
	AnnotationLifecycle = "lifeboat.io/lifecycle-completed"
)

// LifecycleNote is the value of AnnotationLifecycle.
type LifecycleNote struct {
	Token  string    `json:"token"`
	Group  string    `json:"group"`
	Hook   string    `json:"hook"`
	Result string    `json:"result"`
	At     time.Time `json:"at"`
}

// lifecycleNote encodes the completion of action a.
func lifecycleNote(a event.LifecycleAction, result lifecycle.Result, at time.Time) string {
	b, _ := json.Marshal(LifecycleNote{Token: a.Token, Group: a.GroupName, Hook: a.HookName, Result: string(result), At: at.UTC()})
	return string(b)
}

// heartbeatsOnNode is the heartbeat count recorded on the node, so that a
// restarted lifeboat counts on from it while the node's work resumes.
func (c *Controller) heartbeatsOnNode(node string) int {
	if c.Nodes == nil {
		return 0
	}
	n, ok := c.Nodes.ByName(node)
	if !ok || n.Annotations[drain.AnnotationEvents] == "" {
		return 0
	}
	v, _ := strconv.Atoi(n.Annotations[AnnotationHeartbeats])
	return v
}

// recordHeartbeat counts a heartbeat that got through and writes the count
// on the node, off the heartbeat's path (a failed write only loses a count).
func (c *Controller) recordHeartbeat(w *nodeWork) {
	if w == nil {
		return
	}
	c.mu.Lock()
	w.heartbeats++
	ctx := c.ctx
	c.mu.Unlock()
	c.spawn(func() {
		// One write at a time, each of the latest count: a slow write
		// never overwrites a newer one.
		w.noteMu.Lock()
		defer w.noteMu.Unlock()
		c.mu.Lock()
		n := w.heartbeats
		c.mu.Unlock()
		if err := c.Drainer.SetAnnotations(ctx, w.name, map[string]string{AnnotationHeartbeats: strconv.Itoa(n)}); err != nil {
			c.Log.Debug("recording heartbeat count failed", "node", w.name, "error", err.Error())
		}
	})
}
