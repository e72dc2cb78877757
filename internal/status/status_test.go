package status

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/event"
)

var now = time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)

func node(name string, annotations map[string]string, taints ...corev1.Taint) corev1.Node {
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0123456789abcdef0", Taints: taints},
	}
}

func events(t *testing.T, evs ...event.Event) string {
	t.Helper()
	b, err := json.Marshal(evs)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func pod(ns, name, nodeName string, phase corev1.PodPhase, mod ...func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: nodeName}, Status: corev1.PodStatus{Phase: phase}}
	for _, m := range mod {
		m(&p)
	}
	return p
}

func TestBuild(t *testing.T) {
	spot := event.Event{ID: "spot-1", Kind: event.SpotInterruption, Deadline: now.Add(90 * time.Second)}
	hook := event.Event{ID: "lifecycle-terminate-1", Kind: event.LifecycleTerminate,
		Lifecycle: &event.LifecycleAction{GroupName: "workers", HookName: "drain", Token: "tok-1"}, Deadline: now.Add(10 * time.Minute)}
	// IMDS mode: the node's own action, without a token.
	selfHook := event.Event{ID: "lifecycle-terminate-2", Kind: event.LifecycleTerminate,
		Lifecycle: &event.LifecycleAction{GroupName: "workers", HookName: "drain"}}
	later := event.Event{ID: "sched-1", Kind: event.ScheduledChange, Deadline: now.Add(48 * time.Hour)}
	taint := func(kind string) corev1.Taint {
		return corev1.Taint{Key: "lifeboat.io/" + kind, Value: kind, Effect: corev1.TaintEffectNoSchedule}
	}
	deleted := metav1.NewTime(now)
	tests := []struct {
		name  string
		nodes []corev1.Node
		pods  []corev1.Pod
		want  []Node
	}{
		{
			name:  "untouched node is not listed",
			nodes: []corev1.Node{node("a", nil)},
		},
		{
			name:  "spot drain with pods left",
			nodes: []corev1.Node{node("a", map[string]string{drain.AnnotationEvents: events(t, spot)}, taint("spot-interruption"))},
			pods: []corev1.Pod{
				pod("default", "web", "a", corev1.PodRunning),
				pod("default", "db", "a", corev1.PodRunning, func(p *corev1.Pod) { p.DeletionTimestamp = &deleted }),
				pod("kube-system", "agent", "a", corev1.PodRunning, func(p *corev1.Pod) {
					p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent"}}
				}),
				pod("default", "done", "a", corev1.PodSucceeded),
				pod("default", "elsewhere", "b", corev1.PodRunning),
			},
			want: []Node{{Name: "a", InstanceID: "i-0123456789abcdef0", Zone: "us-east-1a", State: Handling, Reason: "spot-interruption", Events: []string{"spot-interruption"}, Deadline: spot.Deadline, SecondsLeft: ptr(90),
				Pods: []Pod{{"default", "db", "Terminating", false}, {"default", "web", "Running", false}, {"kube-system", "agent", "Running", true}}}},
		},
		{
			name: "lifecycle pending with heartbeats, then completed",
			nodes: []corev1.Node{
				node("pending", map[string]string{drain.AnnotationEvents: events(t, hook), controller.AnnotationHeartbeats: "3"}, taint("lifecycle-terminate")),
				node("completed", map[string]string{drain.AnnotationEvents: events(t, hook), controller.AnnotationHeartbeats: "4",
					controller.AnnotationLifecycle: `{"token":"tok-1","group":"workers","hook":"drain","result":"CONTINUE"}`}, taint("lifecycle-terminate")),
			},
			want: []Node{
				{Name: "completed", InstanceID: "i-0123456789abcdef0", Zone: "us-east-1a", State: Handling, Reason: "lifecycle-terminate", Events: []string{"lifecycle-terminate"}, Deadline: hook.Deadline, SecondsLeft: ptr(600), Pods: []Pod{}, Heartbeats: 4,
					Lifecycle: &Lifecycle{Group: "workers", Hook: "drain", State: "completed", Result: "CONTINUE"}},
				{Name: "pending", InstanceID: "i-0123456789abcdef0", Zone: "us-east-1a", State: Handling, Reason: "lifecycle-terminate", Events: []string{"lifecycle-terminate"}, Deadline: hook.Deadline, SecondsLeft: ptr(600), Pods: []Pod{}, Heartbeats: 3,
					Lifecycle: &Lifecycle{Group: "workers", Hook: "drain", State: "pending"}},
			},
		},
		{
			name: "token-less action (IMDS mode) completed",
			nodes: []corev1.Node{
				node("self", map[string]string{drain.AnnotationEvents: events(t, selfHook), controller.AnnotationLifecycle: `{"token":"","group":"workers","hook":"drain","result":"CONTINUE"}`},
					taint("lifecycle-terminate")),
			},
			want: []Node{{Name: "self", InstanceID: "i-0123456789abcdef0", Zone: "us-east-1a", State: Handling, Reason: "lifecycle-terminate", Events: []string{"lifecycle-terminate"}, Pods: []Pod{},
				Lifecycle: &Lifecycle{Group: "workers", Hook: "drain", State: "completed", Result: "CONTINUE"}}},
		},
		{
			name: "scheduled change ahead, drained node, sorted by deadline",
			nodes: []corev1.Node{
				node("z-scheduled", map[string]string{drain.AnnotationEvents: events(t, later)}),
				node("drained", map[string]string{controller.AnnotationDrained: now.Add(-time.Minute).Format(time.RFC3339),
					controller.AnnotationLifecycle: `{"token":"tok-9","group":"workers","hook":"drain","result":"ABANDON"}`}, taint("spot-interruption")),
				node("a-spot", map[string]string{drain.AnnotationEvents: events(t, spot)}, taint("spot-interruption")),
			},
			want: []Node{
				{Name: "a-spot", InstanceID: "i-0123456789abcdef0", Zone: "us-east-1a", State: Handling, Reason: "spot-interruption", Events: []string{"spot-interruption"}, Deadline: spot.Deadline, SecondsLeft: ptr(90), Pods: []Pod{}},
				{Name: "z-scheduled", InstanceID: "i-0123456789abcdef0", Zone: "us-east-1a", State: Scheduled, Reason: "scheduled-change", Events: []string{"scheduled-change"}, Deadline: later.Deadline, SecondsLeft: ptr(48 * 3600), Pods: []Pod{}},
				{Name: "drained", InstanceID: "i-0123456789abcdef0", Zone: "us-east-1a", State: Drained, Reason: "spot-interruption", Pods: []Pod{}, DrainedAt: now.Add(-time.Minute),
					Lifecycle: &Lifecycle{Group: "workers", Hook: "drain", State: "completed", Result: "ABANDON"}},
			},
		},
		{
			name: "zone and instance type labels, every event kind recorded",
			nodes: []corev1.Node{func() corev1.Node {
				n := node("a", map[string]string{drain.AnnotationEvents: events(t,
					event.Event{ID: "r", Kind: event.RebalanceRecommendation}, spot)}, taint("spot-interruption"))
				n.Labels = map[string]string{corev1.LabelTopologyZone: "us-west-2b", corev1.LabelInstanceTypeStable: "m5.large"}
				return n
			}()},
			want: []Node{{Name: "a", InstanceID: "i-0123456789abcdef0", Zone: "us-west-2b", InstanceType: "m5.large", State: Handling, Reason: "spot-interruption",
				Events: []string{"rebalance-recommendation", "spot-interruption"}, Deadline: spot.Deadline, SecondsLeft: ptr(90), Pods: []Pod{}}},
		},
		{
			name:  "deadline passed",
			nodes: []corev1.Node{node("a", map[string]string{drain.AnnotationEvents: events(t, event.Event{ID: "s", Kind: event.SpotInterruption, Deadline: now.Add(-5 * time.Second)})}, taint("spot-interruption"))},
			want:  []Node{{Name: "a", InstanceID: "i-0123456789abcdef0", Zone: "us-east-1a", State: Handling, Reason: "spot-interruption", Events: []string{"spot-interruption"}, Deadline: now.Add(-5 * time.Second), SecondsLeft: ptr(-5), Pods: []Pod{}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Build(tt.nodes, tt.pods, now)
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(tt.want)
			if string(gj) != string(wj) {
				t.Errorf("Build:\n got %s\nwant %s", gj, wj)
			}
		})
	}
}

func ptr(v int64) *int64 { return &v }

// Issue 22, defect 9: lifeboat's taints carry --taint-effect, so a node is
// read by the taint's key whatever its effect. Before the fix only
// NoSchedule taints were counted: with NoExecute or PreferNoSchedule a node
// being drained showed as "scheduled" and a drained node was not listed.
func TestBuildReadsLifeboatTaintOfAnyEffect(t *testing.T) {
	spot := event.Event{ID: "spot-1", Kind: event.SpotInterruption, Deadline: now.Add(90 * time.Second)}
	drainedAt := now.Add(-time.Minute)
	for _, effect := range []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute, corev1.TaintEffectPreferNoSchedule} {
		t.Run(string(effect), func(t *testing.T) {
			taint := corev1.Taint{Key: "lifeboat.io/spot-interruption", Value: "spot-interruption", Effect: effect}
			nodes := []corev1.Node{
				node("draining", map[string]string{drain.AnnotationEvents: events(t, spot)}, taint),
				node("drained", map[string]string{controller.AnnotationDrained: drainedAt.Format(time.RFC3339)}, taint),
			}
			want := []Node{
				{Name: "draining", InstanceID: "i-0123456789abcdef0", Zone: "us-east-1a", State: Handling, Reason: "spot-interruption", Events: []string{"spot-interruption"}, Deadline: spot.Deadline, SecondsLeft: ptr(90), Pods: []Pod{}},
				{Name: "drained", InstanceID: "i-0123456789abcdef0", Zone: "us-east-1a", State: Drained, Reason: "spot-interruption", Pods: []Pod{}, DrainedAt: drainedAt},
			}
			gj, _ := json.Marshal(Build(nodes, nil, now))
			wj, _ := json.Marshal(want)
			if string(gj) != string(wj) {
				t.Errorf("Build with --taint-effect %s:\n got %s\nwant %s", effect, gj, wj)
			}
		})
	}
}
