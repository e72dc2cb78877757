package controller

import (
	"context"
	"encoding/json"
	"time"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/lifecycle"
)

// AnnotationLaunchCompleted holds the LifecycleNote of the last launch
// action lifeboat completed for the node's instance, so that a lifeboat
// restarted before the action's message was deleted knows it completed it.
const AnnotationLaunchCompleted = "lifeboat.io/launch-completed"

// completions remembers the lifecycle actions this process completed (by
// event.LifecycleAction Key), so that completing one again (a re-plan, a
// copy of its message) is not counted as lost.
type completions struct {
	at map[string]time.Time
}

func (s *completions) add(key string, now time.Time) {
	if key == "" {
		return
	}
	if s.at == nil {
		s.at = map[string]time.Time{}
	}
	if len(s.at) >= 10000 {
		for k, t := range s.at {
			if now.Sub(t) > 48*time.Hour { // AWS's longest global timeout
				delete(s.at, k)
			}
		}
	}
	s.at[key] = now
}

// completed records that lifeboat completed a: in this process, and, for a
// launch whose instance is a node, on the node (terminate actions are
// noted on it by completeAll).
func (c *Controller) completed(ctx context.Context, a event.LifecycleAction, result lifecycle.Result, launchNode string) {
	now := c.Clock.Now()
	c.mu.Lock()
	c.completions.add(a.Key(), now)
	c.mu.Unlock()
	if launchNode == "" {
		return
	}
	if err := c.Drainer.SetAnnotations(ctx, launchNode, map[string]string{AnnotationLaunchCompleted: lifecycleNote(a, result, now)}); err != nil {
		c.Log.Debug("recording launch completion failed", "node", launchNode, "error", err.Error())
	}
}

// completedByLifeboat reports whether lifeboat completed a: this process,
// or an earlier one that noted it on node ("": none). An action it
// completed is not lost when completing it again finds it gone.
func (c *Controller) completedByLifeboat(a event.LifecycleAction, node string) bool {
	key := a.Key()
	if key == "" {
		return false
	}
	c.mu.Lock()
	_, ok := c.completions.at[key]
	c.mu.Unlock()
	if ok || node == "" {
		return ok
	}
	n, found := c.Nodes.ByName(node)
	if !found {
		return false
	}
	for _, ann := range []string{AnnotationLifecycle, AnnotationLaunchCompleted} {
		var note LifecycleNote
		if raw := n.Annotations[ann]; raw != "" && json.Unmarshal([]byte(raw), &note) == nil &&
			(event.LifecycleAction{Token: note.Token, GroupName: note.Group, HookName: note.Hook}).Key() == key {
			return true
		}
	}
	return false
}
