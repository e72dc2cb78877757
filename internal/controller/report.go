package controller

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/drainreport"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/notify"
	"lifeboat.dev/lifeboat/internal/plan"
)

// notifyOnce sends one notification per phase per node work; pods, if
// any, are the pods concerned.
func (c *Controller) notifyOnce(w *nodeWork, phase notify.Phase, p plan.Plan, detail string, pods ...string) {
	c.mu.Lock()
	seen := w.notified[phase]
	w.notified[phase] = true
	action := ""
	for _, e := range w.events {
		if e.Kind == p.Reason && e.Action != "" {
			action = e.Action
			break
		}
	}
	c.mu.Unlock()
	if seen || c.Notifier == nil {
		return
	}
	if len(pods) == 0 {
		pods = evictedPods(c, w, phase)
	}
	n := notify.Notification{Phase: phase, Node: w.name, InstanceID: w.instanceID, Kind: p.Reason, Action: action, Deadline: p.Deadline, Detail: detail, Pods: pods, Time: c.Clock.Now()}
	if phase == notify.PhaseFinished {
		n.CutOff = drainreport.Compose(drainreport.Finished, w.drains.Result()).CutOff
	}
	c.Notifier.Notify(n)
}

// reportOnce reports a reason only the first time for this work.
func (c *Controller) reportOnce(w *nodeWork, reason, typ, action, msg string, attrs ...any) {
	c.mu.Lock()
	seen := w.reported[reason]
	w.reported[reason] = true
	c.mu.Unlock()
	if !seen {
		c.report(w, typ, reason, action, msg, attrs...)
	}
}

// report is the one place outcomes go: a structured log line (with attrs,
// if any), a Kubernetes Event on the Node (the recorder deduplicates
// repeats).
func (c *Controller) report(w *nodeWork, typ, reason, action, msg string, attrs ...any) {
	c.mu.Lock()
	w.reported[reason] = true
	c.mu.Unlock()
	log := c.Log.Info
	if typ == corev1.EventTypeWarning {
		log = c.Log.Warn
	}
	log(reason, append([]any{"node", w.name, "instanceID", w.instanceID, "action", action, "detail", msg}, attrs...)...)
	if c.Recorder != nil {
		ref := &corev1.ObjectReference{Kind: "Node", Name: w.name, UID: types.UID(w.name)}
		c.Recorder.Event(ref, typ, reason, msg)
	}
}

// received describes what arrived for a node and what lifeboat will do.
func received(evs []event.Event, p plan.Plan) string {
	what := string(p.Reason)
	for _, e := range evs {
		if e.Kind == p.Reason && e.Action != "" {
			what += " (" + e.Action + ")"
			break
		}
	}
	do := "cordoning"
	if p.Drain {
		do = "cordoning and draining"
	}
	return fmt.Sprintf("%s received; AWS deadline %s; %s", what, fmtDeadline(p.Deadline), do)
}

func fmtDeadline(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return t.UTC().Format(time.RFC3339)
}

// doneList returns the done-events annotation of a node with annotations
// ann, with evs added (oldest dropped beyond maxDoneEvents).
func doneList(ann map[string]string, evs []event.Event) string {
	ids := doneIDs(ann)
	for _, e := range evs {
		if !slices.Contains(ids, e.ID) {
			ids = append(ids, e.ID)
		}
	}
	if len(ids) > maxDoneEvents {
		ids = ids[len(ids)-maxDoneEvents:]
	}
	b, err := json.Marshal(ids)
	if err != nil {
		return ""
	}
	return string(b)
}

// doneOnNode returns the IDs of the events recorded as done on a node.
func (c *Controller) doneOnNode(node string) []string {
	n, ok := c.Nodes.ByName(node)
	if !ok {
		return nil
	}
	return doneIDs(n.Annotations)
}

// doneIDs reads a done-events annotation.
func doneIDs(ann map[string]string) []string {
	var ids []string
	if raw := ann[AnnotationDoneEvents]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &ids); err != nil {
			return nil
		}
	}
	return ids
}

// maxDoneEvents bounds the event IDs kept in AnnotationDoneEvents.
const maxDoneEvents = 32

// reportPod reports a pod the drain could not move: a Warning Event on the
// node, naming the pod. (Not on the pod itself: that needs Events in every
// namespace, which the chart does not grant.)
func (c *Controller) reportPod(w *nodeWork, pp drain.PodProblem, reason, msg string) {
	c.report(w, corev1.EventTypeWarning, reason, "drain", pp.Namespace+"/"+pp.Name+": "+msg)
}
