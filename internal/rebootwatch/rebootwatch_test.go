package rebootwatch

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/internal/clocktest"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/kube/clientset"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/plan"
	"lifeboat.dev/lifeboat/internal/rebootmark"
)

const rebootTaint = "lifeboat.io/scheduled-change"

var marker = rebootmark.Marker{EventID: "scheduled-change-1", Code: rebootmark.HealthSystemReboot, BootID: "boot-1", At: clocktest.Epoch.Add(-time.Hour)}

// node is a node lifeboat cordoned for the reboot maintenance marker,
// whose kubelet now reports bootID.
func node(name, bootID string, ready bool, edit ...func(*corev1.Node)) *corev1.Node {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			drain.AnnotationCordoned: "true", rebootmark.Annotation: marker.Encode()}},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: rebootTaint, Value: "scheduled-change", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: bootID},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}},
	}
	for _, e := range edit {
		e(n)
	}
	return n
}

// recorded sets the events lifeboat recorded on the node.
func recorded(evs ...event.Event) func(*corev1.Node) {
	return func(n *corev1.Node) {
		b, _ := json.Marshal(evs)
		n.Annotations[drain.AnnotationEvents] = string(b)
	}
}

func withMarker(m rebootmark.Marker) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Annotations[rebootmark.Annotation] = m.Encode() }
}

func TestDecide(t *testing.T) {
	now := clocktest.Epoch
	policy := plan.Policy{DrainKinds: []event.Kind{event.ScheduledChange, event.SpotInterruption}, ScheduledChangeLead: 10 * time.Minute}
	rebootEvent := event.Event{ID: marker.EventID, Kind: event.ScheduledChange, Source: event.SourceSQS, Action: marker.Code, Deadline: now.Add(-time.Minute)}
	later := event.Event{ID: "scheduled-change-2", Kind: event.ScheduledChange, Source: event.SourceSQS, Action: "AWS_EC2_INSTANCE_STOP_SCHEDULED", Deadline: now.Add(14 * 24 * time.Hour)}
	spot := event.Event{ID: "spot-1", Kind: event.SpotInterruption, Source: event.SourceSQS, Deadline: now.Add(time.Minute)}
	rebooted := marker
	rebooted.Rebooted = true
	noBootID := marker
	noBootID.BootID = ""
	tests := []struct {
		name string
		node *corev1.Node
		want Action
	}{
		{"no marker", node("n", "boot-2", true, func(n *corev1.Node) { delete(n.Annotations, rebootmark.Annotation) }), Keep},
		{"same boot ID: not rebooted yet", node("n", "boot-1", true), Keep},
		{"new boot ID, not Ready yet", node("n", "boot-2", false), WaitReady},
		{"new boot ID, Ready", node("n", "boot-2", true), Undo},
		{"the kubelet reports no boot ID", node("n", "", true), Keep},
		{"no boot ID recorded at the cordon: queue mode cannot tell", node("n", "boot-2", true, withMarker(noBootID)), Keep},
		{"already rebooted", node("n", "boot-3", true, withMarker(rebooted)), Keep},
		{"unreadable marker", node("n", "boot-2", true, func(n *corev1.Node) { n.Annotations[rebootmark.Annotation] = "{" }), Keep},
		{"not cordoned by lifeboat: the rule still applies (the node stays cordoned)", node("n", "boot-2", true, func(n *corev1.Node) { delete(n.Annotations, drain.AnnotationCordoned) }), Undo},
		{"the maintenance's own drain still recorded", node("n", "boot-2", true, recorded(rebootEvent)), WaitWork},
		{"another interruption due", node("n", "boot-2", true, recorded(spot)), WaitWork},
		{"only a change weeks ahead recorded", node("n", "boot-2", true, recorded(later)), Undo},
		{"unreadable events record", node("n", "boot-2", true, func(n *corev1.Node) { n.Annotations[drain.AnnotationEvents] = "[" }), WaitWork},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, got := Decide(tt.node, policy, now); got != tt.want {
				t.Errorf("Decide = %v, want %v", got, tt.want)
			}
		})
	}
}

// world is a Watcher running on a fake API server's nodes, writing through
// the real drainer.
type world struct {
	t      *testing.T
	client *fake.Clientset
	rec    *record.FakeRecorder
}

func newWorld(t *testing.T, dryRun bool, ns ...*corev1.Node) *world {
	objs := make([]runtime.Object, 0, len(ns))
	for _, n := range ns {
		objs = append(objs, n)
	}
	client := fake.NewClientset(objs...)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	index := nodes.New(clientset.New(client), nodes.Options{})
	go index.Run(ctx)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	clk := clocktesting.NewFakeClock(clocktest.Epoch)
	d := drain.New(clientset.New(client), clk, log, drain.Options{NodeCache: index.ByName, DryRun: dryRun})
	rec := record.NewFakeRecorder(100)
	w := New(Deps{Nodes: index, Writer: d, Recorder: rec, Metrics: metrics.New(), Clock: clk, Log: log}, Options{DryRun: dryRun})
	go func() { _ = w.Run(ctx) }()
	if err := index.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	// The fake clientset loses a change made between the informer's list
	// and its watch: let the watch start before the test changes a node.
	time.Sleep(100 * time.Millisecond)
	return &world{t: t, client: client, rec: rec}
}

func (x *world) get(name string) *corev1.Node {
	x.t.Helper()
	n, err := x.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		x.t.Fatal(err)
	}
	return n
}

// reboot sets the boot ID the kubelet reports after a reboot.
func (x *world) reboot(name, bootID string) {
	x.t.Helper()
	n := x.get(name)
	n.Status.NodeInfo.BootID = bootID
	if _, err := x.client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		x.t.Fatal(err)
	}
}

func (x *world) eventually(what string, cond func() bool) {
	x.t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	x.t.Fatalf("timed out waiting for %s", what)
}

func (x *world) events() []string {
	var got []string
	for {
		select {
		case e := <-x.rec.Events:
			got = append(got, e)
		default:
			return got
		}
	}
}

func lifeboatTaints(n *corev1.Node) int {
	c := 0
	for _, t := range n.Spec.Taints {
		if strings.HasPrefix(t.Key, plan.TaintPrefix) {
			c++
		}
	}
	return c
}

func TestWatcherUncordonsAfterTheReboot(t *testing.T) {
	x := newWorld(t, false, node("ours", "boot-1", true), node("theirs", "boot-1", true, func(n *corev1.Node) { delete(n.Annotations, drain.AnnotationCordoned) }))
	time.Sleep(200 * time.Millisecond)
	if n := x.get("ours"); !n.Spec.Unschedulable || lifeboatTaints(n) != 1 {
		t.Fatal("uncordoned before any reboot")
	}
	if got := x.events(); len(got) != 0 {
		t.Fatalf("events before any reboot: %v", got)
	}

	x.reboot("ours", "boot-2")
	x.eventually("ours uncordoned", func() bool { n := x.get("ours"); return !n.Spec.Unschedulable && lifeboatTaints(n) == 0 })
	n := x.get("ours")
	if m, ok, err := rebootmark.DecodeMarker(n.Annotations[rebootmark.Annotation]); err != nil || !ok || !m.Rebooted || m.EventID != marker.EventID {
		t.Errorf("marker after the reboot = %+v (%v, %v), want %s rebooted", m, ok, err, marker.EventID)
	}
	if _, ok := n.Annotations[drain.AnnotationCordoned]; ok {
		t.Error("lifeboat.io/cordoned kept")
	}

	x.reboot("theirs", "boot-2")
	x.eventually("theirs' lifeboat taint removed", func() bool { return lifeboatTaints(x.get("theirs")) == 0 })
	if !x.get("theirs").Spec.Unschedulable {
		t.Error("a node cordoned before lifeboat was uncordoned")
	}

	// Another update (a heartbeat, a second reboot): nothing more.
	x.reboot("ours", "boot-3")
	time.Sleep(200 * time.Millisecond)
	got := x.events()
	want := []string{
		"Normal Uncordoned rebooted for maintenance AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED: lifeboat's taints removed, uncordoned",
		"Normal Uncordoned rebooted for maintenance AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED: lifeboat's taints removed (the node was cordoned before lifeboat: left cordoned)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestWatcherDryRunWritesNothingAndReportsOnce(t *testing.T) {
	x := newWorld(t, true, node("n", "boot-1", true))
	x.reboot("n", "boot-2")
	x.eventually("the dry-run Event", func() bool { return len(x.rec.Events) > 0 })
	x.reboot("n", "boot-3")
	time.Sleep(200 * time.Millisecond)
	if n := x.get("n"); !n.Spec.Unschedulable || lifeboatTaints(n) != 1 {
		t.Error("dry run wrote")
	}
	if got := x.events(); len(got) != 1 || !strings.Contains(got[0], "dry run: would have: rebooted for maintenance") {
		t.Errorf("events = %v, want one dry-run Uncordoned", got)
	}
}

// Work due on the rebooted node keeps the cordon; the update that records
// the work done brings the node back, and then it is uncordoned.
func TestWatcherWaitsForTheWorkDue(t *testing.T) {
	spot := event.Event{ID: "spot-1", Kind: event.SpotInterruption, Source: event.SourceSQS, Deadline: clocktest.Epoch.Add(time.Minute)}
	x := newWorld(t, false, node("n", "boot-2", true, recorded(spot)))
	time.Sleep(200 * time.Millisecond)
	if n := x.get("n"); !n.Spec.Unschedulable || lifeboatTaints(n) != 1 {
		t.Fatal("uncordoned while lifeboat's work on the node is due")
	}
	n := x.get("n")
	delete(n.Annotations, drain.AnnotationEvents) // the controller finished
	if _, err := x.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	x.eventually("uncordoned once the work is done", func() bool { n := x.get("n"); return !n.Spec.Unschedulable && lifeboatTaints(n) == 0 })
}
