package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Fact is one step of the timeline: something the cluster, the Auto
// Scaling simulator or lifeboat showed, or something the demo did on the
// simulated AWS side.
type Fact struct {
	At time.Time `json:"at"`
	// Scene is the scene the fact belongs to (spot, scale-in, warm-pool).
	Scene string `json:"scene"`
	// Source is where it was seen: aws (the demo's own calls to AWS), asg
	// (the Auto Scaling simulator's instances and lifecycle actions),
	// lifeboat (its Kubernetes Events and log), node, pod (the cluster).
	Source string `json:"source"`
	// Step says what happened (one of the step constants).
	Step string `json:"step"`
	// Lane is the row of the HTML timeline: one object.
	Lane string `json:"lane"`
	Text string `json:"text"`
	// Label is the short text next to the fact's marker in the HTML
	// timeline; empty means the step's default.
	Label string `json:"label,omitempty"`
	// Progress is the drain's progress after this fact ("evicted 2/3").
	Progress string `json:"progress,omitempty"`
	// Until is when a lifecycle action times out unless heartbeated or
	// completed, as of this fact (its start or a heartbeat).
	Until time.Time `json:"until,omitzero"`
}

// deadline is when AWS acts on an instance whatever happens (a Spot
// interruption's two minutes), drawn across a scene.
type deadline struct {
	At    time.Time `json:"at"`
	Label string    `json:"label"`
}

// Sources.
const (
	srcAWS      = "aws"
	srcASG      = "asg"
	srcLifeboat = "lifeboat"
	srcNode     = "node"
	srcPod      = "pod"
)

// Steps.
const (
	stepSignal          = "signal"             // the demo acted on AWS: an event, a capacity change
	stepInstance        = "instance-state"     // an Auto Scaling lifecycle state
	stepAction          = "lifecycle-action"   // a lifecycle action started
	stepHeartbeat       = "heartbeat"          // RecordLifecycleActionHeartbeat accepted
	stepCompleted       = "completed"          // CompleteLifecycleAction accepted
	stepTimedOut        = "timed-out"          // a lifecycle action ended without lifeboat
	stepReceived        = "received"           // Event InterruptionReceived
	stepDraining        = "draining"           // Event Draining
	stepDrained         = "drained"            // Event Drained
	stepReplacing       = "replacement-start"  // Event ReplacementStarted: a Deployment's rollout restarted before its eviction
	stepReplaced        = "replacement-ready"  // Event ReplacementReady: its new pods Ready on other nodes
	stepLifecycleReport = "lifecycle-reported" // Event LifecycleCompleted or lifeboat's launch log line
	stepDeadline        = "deadline-passed"    // Event DeadlinePassed
	stepForecast        = "forecast-miss"      // Event DrainForecastMiss: pods that will not make the deadline
	stepFailed          = "failed"             // Event Failed, a warning or error logged
	stepEvent           = "event"              // another lifeboat Event
	stepRefused         = "eviction-refused"   // lifeboat logged a 429 from a PodDisruptionBudget
	stepCordoned        = "cordoned"           // node.spec.unschedulable became true
	stepTainted         = "tainted"            // a lifeboat.io/ taint appeared
	stepUncordoned      = "uncordoned"         // node.spec.unschedulable became false
	stepNodeJoined      = "node-joined"        // a Node was created
	stepNodeReady       = "node-ready"         // its Ready condition became True
	stepNodeDeleted     = "node-deleted"       // the Node was deleted
	stepPodCreated      = "pod-created"        // a replacement pod was created
	stepPodScheduled    = "pod-scheduled"      // a pod was bound to a node
	stepPodReady        = "pod-ready"          // a pod became Ready
	stepEvicting        = "evicting"           // a pod's deletion started (eviction)
	stepEvicted         = "evicted"            // the pod is gone
)

// defaultLabels are the marker labels of the steps that do not set one.
var defaultLabels = map[string]string{
	stepSignal: "signal", stepAction: "action started", stepCompleted: "completed", stepTimedOut: "timed out",
	stepReceived: "InterruptionReceived", stepDraining: "Draining", stepDrained: "Drained", stepDeadline: "DeadlinePassed",
	stepReplacing: "ReplacementStarted", stepReplaced: "ReplacementReady",
	stepForecast: "forecast: will miss", stepFailed: "warning", stepRefused: "refused by PDB", stepCordoned: "cordoned + tainted", stepTainted: "tainted",
	stepUncordoned: "uncordoned", stepNodeJoined: "joined", stepNodeReady: "Ready", stepNodeDeleted: "deleted",
	stepPodCreated: "created", stepPodScheduled: "scheduled", stepPodReady: "Ready",
}

// sceneState is a scene as the timeline knows it.
type sceneState struct {
	Name    string    `json:"name"`
	Title   string    `json:"title"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Summary []string  `json:"summary"`
	// Deadlines are AWS's deadlines in the scene.
	Deadlines []deadline `json:"deadlines,omitempty"`

	// pods are the pods to evict ("namespace/name"), counted for progress.
	pods              map[string]bool
	evicting, evicted int
	steps             map[string]int
	// grace is the grace period of each pod's deletion, in seconds.
	grace map[string]int64
	// firstAt is when each step was first seen, by step and lane.
	firstAt map[string]time.Time
	// refused counts refused evictions by pod name.
	refused map[string]int
}

// timeline records facts, prints them as they come, and maps objects to
// scenes. It is safe for concurrent use.
type timeline struct {
	out   io.Writer
	color bool
	start time.Time

	mu         sync.Mutex
	facts      []Fact
	scenes     []*sceneState
	byName     map[string]*sceneState
	nodes      map[string]string // node name -> scene
	namespaces map[string]string
	groups     map[string]string
	instances  map[string]string
}

func newTimeline(out io.Writer, color bool, start time.Time) *timeline {
	return &timeline{
		out: out, color: color, start: start, byName: map[string]*sceneState{},
		nodes: map[string]string{}, namespaces: map[string]string{}, groups: map[string]string{}, instances: map[string]string{},
	}
}

func (t *timeline) clock(at time.Time) string {
	d := at.Sub(t.start)
	if d < 0 {
		d = 0
	}
	return fmt.Sprintf("%02d:%04.1f", int(d.Minutes()), d.Seconds()-60*float64(int(d.Minutes())))
}

// say prints a line about the demo itself.
func (t *timeline) say(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.out, "%s  %s\n", t.paint(dim, t.clock(time.Now())), fmt.Sprintf(format, args...))
}

// begin starts a scene; facts of a scene are recorded from its start on.
// pods are the pods the scene's drain should evict ("namespace/name").
func (t *timeline) begin(name, title string, pods []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &sceneState{
		Name: name, Title: title, Start: time.Now(), pods: map[string]bool{}, steps: map[string]int{},
		grace: map[string]int64{}, firstAt: map[string]time.Time{}, refused: map[string]int{},
	}
	for _, p := range pods {
		s.pods[p] = true
	}
	t.scenes = append(t.scenes, s)
	t.byName[name] = s
	fmt.Fprintf(t.out, "\n%s\n", t.paint(bold, fmt.Sprintf("── %d/3  %s", len(t.scenes), title)))
}

// deadline records one of AWS's deadlines in a scene that has begun.
func (t *timeline) deadline(scene string, at time.Time, label string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.byName[scene]; ok {
		s.Deadlines = append(s.Deadlines, deadline{At: at, Label: label})
	}
}

// end closes a scene with its summary lines.
func (t *timeline) end(name string, summary ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.byName[name]
	s.End = time.Now()
	s.Summary = summary
	for _, line := range summary {
		fmt.Fprintf(t.out, "%s  %s %s\n", t.paint(dim, t.clock(s.End)), t.paint(green, "  ✓"), line)
	}
}

// add records a fact of a scene that has begun, and prints it. Facts of
// scenes not begun (the set-up) are dropped.
func (t *timeline) add(f Fact) {
	if f.At.IsZero() {
		f.At = time.Now()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.byName[f.Scene]
	if !ok || f.At.Before(s.Start.Add(-time.Second)) {
		return
	}
	switch key := podKey(f); {
	case f.Step == stepEvicting && s.pods[key]:
		s.evicting++
		f.Progress = fmt.Sprintf("evicting %d/%d", s.evicting, len(s.pods))
	case f.Step == stepEvicted && s.pods[key]:
		s.evicted++
		f.Progress = fmt.Sprintf("gone %d/%d", s.evicted, len(s.pods))
	}
	if f.Progress != "" {
		f.Label = f.Progress
	}
	if f.Label == "" {
		f.Label = defaultLabels[f.Step]
	}
	s.steps[f.Step]++
	if _, seen := s.firstAt[f.Step+"\x00"+f.Lane]; !seen {
		s.firstAt[f.Step+"\x00"+f.Lane] = f.At
	}
	t.facts = append(t.facts, f)
	t.print(s, f)
}

// podKey returns "namespace/name" for pod facts, whose Text starts with the
// pod's name and whose Lane is "pod <name>"; the namespace is the scene's.
func podKey(f Fact) string {
	if f.Source != srcPod && f.Step != stepRefused {
		return ""
	}
	return namespaceOfScene[f.Scene] + "/" + strings.TrimPrefix(f.Lane, "pod ")
}

func (t *timeline) print(s *sceneState, f Fact) {
	rel := f.At.Sub(s.Start).Seconds()
	src := fmt.Sprintf("%-8s", f.Source)
	text := f.Text
	switch f.Step {
	case stepCompleted, stepDrained, stepNodeReady, stepPodReady, stepLifecycleReport, stepReplaced:
		text = t.paint(green, text)
	case stepRefused, stepFailed, stepDeadline, stepTimedOut, stepForecast, stepPodCutOff:
		text = t.paint(red, text)
	case stepSignal:
		text = t.paint(yellow, text)
	}
	progress := ""
	if f.Progress != "" {
		progress = "  " + t.paint(bold, "["+f.Progress+"]")
	}
	fmt.Fprintf(t.out, "%s  %+7.2fs  %s  %s%s\n", t.paint(dim, t.clock(f.At)), rel, t.paint(sourceColor[f.Source], src), text, progress)
}

// count returns how many facts of a step a scene has.
func (t *timeline) count(scene, step string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.byName[scene]; ok {
		return s.steps[step]
	}
	return 0
}

// first returns when a step was first seen in a lane of a scene.
func (t *timeline) first(scene, step, lane string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.byName[scene]
	if !ok {
		return time.Time{}, false
	}
	at, ok := s.firstAt[step+"\x00"+lane]
	return at, ok
}

// evicted returns how many of a scene's pods are gone, of how many.
func (t *timeline) evicted(scene string) (int, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.byName[scene]
	return s.evicted, len(s.pods)
}

// refused counts a refused eviction of a pod.
func (t *timeline) refused(scene, pod string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.byName[scene]; ok {
		s.refused[pod]++
	}
}

// refusals returns how many evictions of a pod were refused.
func (t *timeline) refusals(scene, pod string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.byName[scene]; ok {
		return s.refused[pod]
	}
	return 0
}

// setGrace records the grace period a pod's deletion got.
func (t *timeline) setGrace(scene, pod string, seconds int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.byName[scene]; ok {
		s.grace[pod] = seconds
	}
}

func (t *timeline) graceOf(scene, pod string) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.byName[scene]
	if !ok {
		return 0, false
	}
	g, ok := s.grace[pod]
	return g, ok
}

// current returns the scene begun last, "" before the first.
func (t *timeline) current() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.scenes) == 0 {
		return ""
	}
	return t.scenes[len(t.scenes)-1].Name
}

// waitFor polls cond until it holds; it fails after timeout with what.
func (t *timeline) waitFor(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond(ctx)
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			if parent := context.Cause(ctx); parent != nil && parent != context.DeadlineExceeded {
				return parent
			}
			return fmt.Errorf("waiting for %s: nothing after %v", what, timeout)
		case <-tick.C:
		}
	}
}

func (t *timeline) mapNode(node, scene string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if scene != "" {
		t.nodes[node] = scene
	}
}

func (t *timeline) mapNamespace(ns, scene string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.namespaces[ns] = scene
}

func (t *timeline) mapGroup(group, scene string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.groups[group] = scene
}

func (t *timeline) mapInstance(id, scene string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if scene != "" {
		t.instances[id] = scene
	}
}

func (t *timeline) sceneOfNode(node string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nodes[node]
}

func (t *timeline) sceneOfNamespace(ns string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.namespaces[ns]
}

func (t *timeline) sceneOfGroup(group string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.groups[group]
}

func (t *timeline) sceneOfInstance(id string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.instances[id]
}

// snapshot returns the facts so far.
func (t *timeline) snapshot() []Fact {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Fact(nil), t.facts...)
}

// Terminal colors.
const (
	dim     = "2"
	bold    = "1"
	red     = "31"
	green   = "32"
	yellow  = "33"
	blue    = "34"
	magenta = "35"
	cyan    = "36"
)

var sourceColor = map[string]string{srcAWS: yellow, srcASG: yellow, srcLifeboat: magenta, srcNode: blue, srcPod: cyan, srcWorkload: green}

func (t *timeline) paint(color, s string) string {
	if !t.color || color == "" {
		return s
	}
	return "\x1b[" + color + "m" + s + "\x1b[0m"
}
