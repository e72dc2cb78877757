package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/drainreport"
	"lifeboat.dev/lifeboat/internal/nodes"
)

// How a drain ends is composed by package drainreport; here it is
// counted, recorded on the node's work and reported.

// drainEnded adds a drain that ended to the node's work, counts it and
// reports its pods that could not leave; it returns the report of the
// work's draining so far.
func (c *Controller) drainEnded(w *nodeWork, res drain.Result, end drainreport.Ending) drainreport.Report {
	c.countEvictions(w.drains.Add(res, end))
	c.recordPods(w, res.Pods)
	for _, pp := range res.NotEvicted {
		c.reportPod(w, pp, "EvictionRefused", "eviction refused for good (not retried): "+pp.Reason)
	}
	for _, pp := range res.Stuck {
		c.reportPod(w, pp, "PodStuck", "pod did not leave within its bound (the grace it got plus a minute): "+pp.Reason)
	}
	return drainreport.Compose(end, w.drains.Result())
}

// cutShort ends a drain that new events, or the Node's deletion, stopped:
// what it did is counted and reported, what it left is reported (and
// counted cut off when the Node is gone: it died with its instance).
func (c *Controller) cutShort(w *nodeWork, res drain.Result) error {
	r := c.drainEnded(w, res, drainreport.CutShort)
	if !c.nodeExists(w) {
		return fmt.Errorf("node %s deleted mid-drain: %w", w.name, drain.ErrNodeGone)
	}
	c.report(w, r.Type, r.Reason, "drain", r.Message)
	return errRestart
}

// countEvictions adds to lifeboat_evictions_total.
func (c *Controller) countEvictions(counts map[string]int) {
	for _, label := range drainreport.Labels {
		if n := counts[label]; n > 0 {
			c.Metrics.Evictions.WithLabelValues(label).Add(float64(n))
		}
	}
}

// nodeExists reports whether the node's informer still holds the node of
// the work's instance.
func (c *Controller) nodeExists(w *nodeWork) bool {
	n, ok := c.Nodes.ByName(w.name)
	if !ok {
		return false
	}
	id := nodes.InstanceID(n.Spec.ProviderID)
	return w.instanceID == "" || id == "" || id == w.instanceID
}

// watchNodeDeletions wakes the work of a node whose Node is deleted, so
// that a drain in flight stops and reports the pods still on it; it
// returns the function that stops watching.
func (c *Controller) watchNodeDeletions() (func(), error) {
	return c.Nodes.AddHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		n, ok := obj.(*corev1.Node)
		if !ok {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if w := c.work[n.Name]; w != nil {
			wake(w)
		}
	}})
}
