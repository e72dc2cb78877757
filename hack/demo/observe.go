package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

// The observers turn what the cluster, the simulator and lifeboat's log
// show into facts. Facts come from three places on purpose: the cluster
// (nodes, pods, lifeboat's Events) and the simulator (instances, lifecycle
// actions) say what really happened; lifeboat's log adds only what no
// object shows (an eviction refused by a PodDisruptionBudget, warnings).

const taintPrefix = "lifeboat.io/"

// watchCluster starts informers on nodes, pods and Events and waits until
// they are synced. They stop when ctx ends (and factory.Shutdown).
func (d *demo) watchCluster(ctx context.Context) error {
	d.factory = informers.NewSharedInformerFactory(d.env.Client, 0)
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{d.factory.Core().V1().Nodes().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { d.nodeAdded(obj.(*corev1.Node)) },
			UpdateFunc: func(old, cur any) { d.nodeUpdated(old.(*corev1.Node), cur.(*corev1.Node)) },
			DeleteFunc: func(obj any) {
				if n, ok := unwrap(obj).(*corev1.Node); ok {
					d.nodeDeleted(n)
				}
			},
		}},
		{d.factory.Core().V1().Pods().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { d.podAdded(obj.(*corev1.Pod)) },
			UpdateFunc: func(old, cur any) { d.podUpdated(old.(*corev1.Pod), cur.(*corev1.Pod)) },
			DeleteFunc: func(obj any) {
				if p, ok := unwrap(obj).(*corev1.Pod); ok {
					d.podDeleted(p)
				}
			},
		}},
		{d.factory.Core().V1().Events().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) { d.eventSeen(nil, obj.(*corev1.Event)) },
			UpdateFunc: func(old, cur any) {
				d.eventSeen(old.(*corev1.Event), cur.(*corev1.Event))
			},
		}},
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return fmt.Errorf("adding an informer handler: %w", err)
		}
	}
	d.factory.Start(ctx.Done())
	for typ, ok := range d.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("syncing the %v informer: %w", typ, context.Cause(ctx))
		}
	}
	return nil
}

func unwrap(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

func shortNode(name string) string { return strings.TrimSuffix(name, ".ec2.internal") }

func nodeLane(name string) string { return "node " + shortNode(name) }

func (d *demo) nodeAdded(n *corev1.Node) {
	text := shortNode(n.Name) + " registered (instance " + instanceOf(n) + ")"
	if testenv.NodeReady(n) {
		text += ", Ready"
	}
	d.tl.add(Fact{Scene: d.tl.sceneOfNode(n.Name), Source: srcNode, Step: stepNodeJoined, Lane: nodeLane(n.Name), Text: text})
}

func (d *demo) nodeUpdated(old, cur *corev1.Node) {
	scene := d.tl.sceneOfNode(cur.Name)
	if scene == "" {
		return
	}
	f := Fact{Scene: scene, Source: srcNode, Lane: nodeLane(cur.Name)}
	added := newTaints(old, cur)
	switch {
	case !old.Spec.Unschedulable && cur.Spec.Unschedulable:
		f.Step, f.Text = stepCordoned, shortNode(cur.Name)+" cordoned"
		if len(added) > 0 {
			f.Text += ", tainted " + strings.Join(added, ", ")
		}
		d.tl.add(f)
	case len(added) > 0:
		f.Step, f.Text = stepTainted, shortNode(cur.Name)+" tainted "+strings.Join(added, ", ")
		d.tl.add(f)
	case old.Spec.Unschedulable && !cur.Spec.Unschedulable:
		f.Step, f.Text = stepUncordoned, shortNode(cur.Name)+" uncordoned"
		d.tl.add(f)
	}
	if !testenv.NodeReady(old) && testenv.NodeReady(cur) {
		d.tl.add(Fact{Scene: scene, Source: srcNode, Step: stepNodeReady, Lane: nodeLane(cur.Name), Text: shortNode(cur.Name) + " Ready"})
	}
}

// newTaints returns lifeboat's taints on cur that old did not have.
func newTaints(old, cur *corev1.Node) []string {
	var out []string
	for _, t := range cur.Spec.Taints {
		if !strings.HasPrefix(t.Key, taintPrefix) {
			continue
		}
		if !slices.ContainsFunc(old.Spec.Taints, func(o corev1.Taint) bool { return o.Key == t.Key && o.Effect == t.Effect }) {
			out = append(out, t.Key+":"+string(t.Effect))
		}
	}
	return out
}

func (d *demo) nodeDeleted(n *corev1.Node) {
	d.tl.add(Fact{Scene: d.tl.sceneOfNode(n.Name), Source: srcNode, Step: stepNodeDeleted, Lane: nodeLane(n.Name),
		Text: shortNode(n.Name) + " deleted (its instance is gone)"})
}

func instanceOf(n *corev1.Node) string {
	return n.Spec.ProviderID[strings.LastIndexByte(n.Spec.ProviderID, '/')+1:]
}

func podLane(p *corev1.Pod) string { return "pod " + p.Name }

func (d *demo) podAdded(p *corev1.Pod) {
	scene := d.tl.sceneOfNamespace(p.Namespace)
	if scene == "" {
		return
	}
	text := p.Name + " created"
	if ref := metav1.GetControllerOf(p); ref != nil {
		text += " by " + ref.Kind + " " + ref.Name
	}
	if p.Spec.NodeName == "" {
		text += ", Pending"
	}
	d.tl.add(Fact{Scene: scene, Source: srcPod, Step: stepPodCreated, Lane: podLane(p), Text: text})
}

func (d *demo) podUpdated(old, cur *corev1.Pod) {
	scene := d.tl.sceneOfNamespace(cur.Namespace)
	if scene == "" {
		return
	}
	f := Fact{Scene: scene, Source: srcPod, Lane: podLane(cur)}
	if old.Spec.NodeName == "" && cur.Spec.NodeName != "" {
		f.Step, f.Text = stepPodScheduled, cur.Name+" scheduled on "+shortNode(cur.Spec.NodeName)
		d.tl.add(f)
	}
	if !testenv.PodReady(old) && testenv.PodReady(cur) && cur.DeletionTimestamp == nil {
		f.Step, f.Text = stepPodReady, cur.Name+" Running and Ready on "+shortNode(cur.Spec.NodeName)
		d.tl.add(f)
	}
	if old.DeletionTimestamp == nil && cur.DeletionTimestamp != nil {
		f.Step, f.Text = stepEvicting, cur.Name+" evicted: terminating"
		if g := cur.DeletionGracePeriodSeconds; g != nil {
			f.Text += fmt.Sprintf(" with a grace period of %ds", *g)
			if spec := cur.Spec.TerminationGracePeriodSeconds; spec != nil && *spec != *g {
				f.Text += fmt.Sprintf(" (its own is %ds: capped to AWS's deadline)", *spec)
			}
			d.tl.setGrace(scene, cur.Name, *g)
		}
		d.tl.add(f)
	}
}

func (d *demo) podDeleted(p *corev1.Pod) {
	scene := d.tl.sceneOfNamespace(p.Namespace)
	if scene == "" {
		return
	}
	d.tl.add(Fact{Scene: scene, Source: srcPod, Step: stepEvicted, Lane: podLane(p), Text: p.Name + " gone"})
}

// eventSeen records lifeboat's Events on nodes, again when one repeats.
func (d *demo) eventSeen(old, ev *corev1.Event) {
	// Cordoned is left out: the node's own change says it, to the millisecond.
	if ev.Source.Component != "lifeboat" || ev.InvolvedObject.Kind != "Node" || ev.Reason == "Cordoned" {
		return
	}
	if old != nil && old.Count >= ev.Count {
		return
	}
	step, ok := eventSteps[ev.Reason]
	if !ok {
		step = stepEvent
	}
	text := ev.Reason + ": " + ev.Message
	if ev.Count > 1 {
		text += fmt.Sprintf(" (×%d)", ev.Count)
	}
	d.tl.add(Fact{Scene: d.tl.sceneOfNode(ev.InvolvedObject.Name), Source: srcLifeboat, Step: step, Lane: "lifeboat", Text: text, Label: ev.Reason})
}

var eventSteps = map[string]string{
	"InterruptionReceived": stepReceived,
	"Draining":             stepDraining,
	"Drained":              stepDrained,
	"ReplacementStarted":   stepReplacing,
	"ReplacementReady":     stepReplaced,
	// The Deployment's last pods evicted without a replacement first.
	"ReplacementTimedOut": stepFailed,
	"ReplacementSkipped":  stepFailed,
	"LifecycleCompleted":  stepLifecycleReport,
	"DeadlinePassed":      stepDeadline,
	"DrainForecastMiss":   stepForecast,
	"Failed":              stepFailed,
}

// pollSimulator turns changes of the simulator's instances and lifecycle
// actions into facts, ten times a second, until ctx ends.
func (d *demo) pollSimulator(ctx context.Context) error {
	states := map[string]types.LifecycleState{}
	actions := map[string]awssim.Action{}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		now := time.Now()
		for _, a := range d.sim.Actions() {
			d.actionFacts(actions[a.Token], a, now)
			actions[a.Token] = a
		}
		for _, in := range d.sim.Instances() {
			scene := d.tl.sceneOfGroup(in.GroupName)
			d.tl.mapInstance(in.ID, scene)
			if prev, ok := states[in.ID]; !ok || prev != in.LifecycleState {
				states[in.ID] = in.LifecycleState
				text := fmt.Sprintf("%s %s: %s", in.GroupName, in.ID, in.LifecycleState)
				if prev != "" {
					text = fmt.Sprintf("%s %s: %s → %s", in.GroupName, in.ID, prev, in.LifecycleState)
				}
				d.tl.add(Fact{At: now, Scene: scene, Source: srcASG, Step: stepInstance, Lane: in.GroupName + " " + shortID(in.ID),
					Text: text, Label: string(in.LifecycleState)})
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// actionFacts reports what changed between two snapshots of a lifecycle
// action (prev is zero for a new one).
func (d *demo) actionFacts(prev, a awssim.Action, now time.Time) {
	scene := d.tl.sceneOfGroup(a.GroupName)
	kind := "terminate"
	if strings.HasSuffix(a.Transition, "LAUNCHING") {
		kind = "launch"
	}
	lane := fmt.Sprintf("%s hook %s %s→%s", kind, shortID(a.InstanceID), shortPlace(a.Origin), shortPlace(a.Destination))
	if kind == "terminate" {
		lane = fmt.Sprintf("%s hook %s", kind, shortID(a.InstanceID))
	}
	if prev.Token == "" {
		d.tl.add(Fact{At: a.Started, Scene: scene, Source: srcASG, Step: stepAction, Lane: lane, Until: timeout(a, a.Started),
			Text: fmt.Sprintf("%s lifecycle action for %s (%s → %s), hook %s: waits up to %s for a heartbeat or completion",
				kind, a.InstanceID, a.Origin, a.Destination, a.HookName, a.HeartbeatTimeout)})
	}
	for n := prev.Heartbeats + 1; n <= a.Heartbeats; n++ {
		at := now
		if n == a.Heartbeats && a.Deadline.Before(a.GlobalDeadline) {
			at = a.Deadline.Add(-a.HeartbeatTimeout) // the heartbeat restarted the timer
		}
		d.tl.add(Fact{At: at, Scene: scene, Source: srcASG, Step: stepHeartbeat, Lane: lane, Until: timeout(a, at),
			Text: fmt.Sprintf("heartbeat #%d for %s: timeout reset to %s", n, a.InstanceID, a.HeartbeatTimeout)})
	}
	if prev.Active() && !a.Active() {
		f := Fact{At: a.Completed, Scene: scene, Source: srcASG, Step: stepCompleted, Lane: lane, Label: "completed " + a.Result}
		took := a.Completed.Sub(a.Started).Round(10 * time.Millisecond)
		if a.CompletedBy == awssim.CompletedByAPI {
			f.Text = fmt.Sprintf("%s action of %s completed: %s, after %s and %d heartbeats", kind, a.InstanceID, a.Result, took, a.Heartbeats)
		} else {
			f.Step, f.Label = stepTimedOut, "timed out: "+a.Result
			f.Text = fmt.Sprintf("%s action of %s ended by %s: %s, after %s", kind, a.InstanceID, a.CompletedBy, a.Result, took)
		}
		d.tl.add(f)
	}
}

// timeout is when action a times out if nothing happens after at: the
// heartbeat timeout, bounded by the hook's global timeout.
func timeout(a awssim.Action, at time.Time) time.Time {
	t := at.Add(a.HeartbeatTimeout)
	if !a.GlobalDeadline.IsZero() && a.GlobalDeadline.Before(t) {
		return a.GlobalDeadline
	}
	return t
}

func shortID(id string) string {
	if len(id) > 10 {
		return id[:10] + "…"
	}
	return id
}

func shortPlace(p string) string {
	if p == "AutoScalingGroup" {
		return "ASG"
	}
	return p
}

// tailLog follows lifeboat's JSON log for what no object shows: evictions
// refused by a PodDisruptionBudget, launch completions, warnings, errors.
func (d *demo) tailLog(ctx context.Context) error {
	f, err := os.Open(d.lifeboat.LogPath)
	if err != nil {
		return fmt.Errorf("following lifeboat's log: %w", err)
	}
	defer f.Close()
	refused := map[string]bool{}
	var partial []byte
	buf := make([]byte, 64<<10)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		for {
			n, err := f.Read(buf)
			partial = append(partial, buf[:n]...)
			if err == io.EOF || n == 0 {
				break
			}
			if err != nil {
				return fmt.Errorf("reading lifeboat's log: %w", err)
			}
		}
		for {
			i := bytes.IndexByte(partial, '\n')
			if i < 0 {
				break
			}
			d.logLine(partial[:i], refused)
			partial = partial[i+1:]
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (d *demo) logLine(line []byte, refused map[string]bool) {
	var l struct {
		Time       time.Time     `json:"time"`
		Level      string        `json:"level"`
		Msg        string        `json:"msg"`
		Node       string        `json:"node"`
		Pod        string        `json:"pod"`
		InstanceID string        `json:"instanceID"`
		Reason     string        `json:"reason"`
		Backoff    time.Duration `json:"backoff"`
		Result     string        `json:"result"`
		Why        string        `json:"why"`
		Error      string        `json:"error"`
		Detail     string        `json:"detail"`
		CutOff     []string      `json:"cutOff"`
	}
	if err := json.Unmarshal(line, &l); err != nil {
		return // client-go's or the runtime's own lines
	}
	scene := d.tl.sceneOfNode(l.Node)
	if scene == "" {
		scene = d.tl.sceneOfInstance(l.InstanceID)
	}
	if scene == "" {
		scene = d.tl.current()
	}
	switch {
	case l.Msg == "eviction refused, backing off":
		ns, name, _ := strings.Cut(l.Pod, "/")
		d.tl.refused(d.tl.sceneOfNamespace(ns), name)
		if refused[l.Pod] {
			return
		}
		refused[l.Pod] = true
		d.tl.add(Fact{At: l.Time, Scene: d.tl.sceneOfNamespace(ns), Source: srcLifeboat, Step: stepRefused, Lane: "pod " + name,
			Text: fmt.Sprintf("%s: eviction refused (%s); retrying every %s", name, strings.TrimSuffix(l.Reason, "."), l.Backoff)})
	case l.Msg == "launch lifecycle action completed":
		d.tl.add(Fact{At: l.Time, Scene: scene, Source: srcLifeboat, Step: stepLifecycleReport, Lane: "lifeboat", Label: "launch completed",
			Text: fmt.Sprintf("completed the launch action of %s with %s: %s", l.InstanceID, l.Result, l.Why)})
	case l.Msg == "DrainForecastMiss":
		return // a warning about what is coming, shown by its Event (stepForecast), not a failure
	case len(l.CutOff) > 0: // the Event (DeadlinePassed, NodeGone) shows the rest
		d.cutOffFacts(l.Time, l.Msg, l.CutOff)
	case l.Level == "WARN" || l.Level == "ERROR":
		text := l.Level + " " + l.Msg
		for _, s := range []string{l.Detail, l.Error, l.Reason} {
			if s != "" {
				text += ": " + s
			}
		}
		d.tl.add(Fact{At: l.Time, Scene: scene, Source: srcLifeboat, Step: stepFailed, Lane: "lifeboat", Text: text})
	}
}
