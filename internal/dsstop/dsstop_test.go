package dsstop

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// pod returns a pod on node-a; owner "DaemonSet", "ReplicaSet" or "" (none).
func pod(name, owner string, annotations map[string]string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Annotations: annotations},
		Spec: corev1.PodSpec{NodeName: "node-a"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if owner != "" {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: owner, Name: owner + "-x", UID: types.UID("owner-" + name), Controller: ptr.To(true)}}
	}
	return p
}

func TestDecide(t *testing.T) {
	optIn := map[string]string{AnnotationStop: "true"}
	optOut := map[string]string{AnnotationStop: "false"}
	finished := pod("done", "DaemonSet", optIn)
	finished.Status.Phase = corev1.PodSucceeded
	mirror := pod("static", "DaemonSet", map[string]string{corev1.MirrorPodAnnotationKey: "x", AnnotationStop: "true"})
	notController := pod("adopted", "", optIn)
	notController.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", UID: "u"}} // not its controller
	own := func(p *corev1.Pod) bool { return p.Name == "lifeboat" }
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		all  bool
		want map[string]Why // pod name -> decision; pods not listed: none
	}{
		{name: "default: only pods that opt in",
			pods: []corev1.Pod{pod("shipper", "DaemonSet", optIn), pod("agent", "DaemonSet", nil), pod("web", "ReplicaSet", optIn)},
			want: map[string]Why{"shipper": StopAnnotated, "agent": SkipNotOptedIn}},
		{name: "all: every DaemonSet pod but the opted out", all: true,
			pods: []corev1.Pod{pod("shipper", "DaemonSet", optIn), pod("agent", "DaemonSet", nil), pod("csi", "DaemonSet", optOut)},
			want: map[string]Why{"shipper": StopAnnotated, "agent": StopAll, "csi": SkipOptedOut}},
		{name: "never lifeboat's own pod, even opted in and with all", all: true,
			pods: []corev1.Pod{pod("lifeboat", "DaemonSet", optIn)},
			want: map[string]Why{"lifeboat": SkipOwn}},
		{name: "never a mirror pod nor a finished one", all: true,
			pods: []corev1.Pod{mirror, finished},
			want: map[string]Why{"static": SkipMirror, "done": SkipFinished}},
		{name: "the drain's pods: bare, ReplicaSet, not controlled by a DaemonSet", all: true,
			pods: []corev1.Pod{pod("bare", "", optIn), pod("web", "ReplicaSet", nil), notController},
			want: map[string]Why{}},
		{name: "an annotation value other than true or false is no opt-in",
			pods: []corev1.Pod{pod("shipper", "DaemonSet", map[string]string{AnnotationStop: "yes"})},
			want: map[string]Why{"shipper": SkipNotOptedIn}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]Why{}
			for _, d := range Decide(tc.pods, tc.all, own) {
				got[d.Pod.Name] = d.Why
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGrace(t *testing.T) {
	withGrace := func(s int64) *corev1.Pod {
		p := pod("p", "DaemonSet", nil)
		p.Spec.TerminationGracePeriodSeconds = &s
		return &p
	}
	for _, tc := range []struct {
		name       string
		pod        *corev1.Pod
		podGrace   time.Duration
		left       time.Duration
		noDeadline bool
		want       int64
		wantCapped bool
	}{
		{name: "its own when time allows", pod: withGrace(10), left: time.Minute, want: 10},
		{name: "unset: 30 s", pod: func() *corev1.Pod { p := pod("p", "DaemonSet", nil); return &p }(), left: time.Hour, want: 30},
		{name: "cut to the time left", pod: withGrace(60), left: 12500 * time.Millisecond, want: 12, wantCapped: true},
		{name: "--pod-grace-period replaces its own", pod: withGrace(60), podGrace: 20 * time.Second, left: time.Hour, want: 20},
		{name: "--pod-grace-period cut too", pod: withGrace(60), podGrace: 20 * time.Second, left: 5 * time.Second, want: 5, wantCapped: true},
		{name: "never below a second", pod: withGrace(0), left: time.Hour, want: 1},
		{name: "cut, never below a second", pod: withGrace(60), left: 500 * time.Millisecond, want: 1, wantCapped: true},
		{name: "--pod-grace-period below a second: a second", pod: withGrace(60), podGrace: 500 * time.Millisecond, left: time.Hour, want: 1},
		{name: "no deadline: no cap", pod: withGrace(600), noDeadline: true, want: 600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, capped := Grace(tc.pod, tc.podGrace, tc.left, tc.noDeadline)
			if got != tc.want || capped != tc.wantCapped {
				t.Errorf("Grace = %d, capped %v; want %d, capped %v", got, capped, tc.want, tc.wantCapped)
			}
		})
	}
}

func TestEnded(t *testing.T) {
	terminated := corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}
	running := corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	for _, tc := range []struct {
		name       string
		phase      corev1.PodPhase
		containers []corev1.ContainerStatus
		want       bool
	}{
		{name: "succeeded", phase: corev1.PodSucceeded, want: true},
		{name: "failed", phase: corev1.PodFailed, want: true},
		{name: "running, no container statuses", phase: corev1.PodRunning, want: false},
		{name: "running, every container terminated", phase: corev1.PodRunning, containers: []corev1.ContainerStatus{terminated, terminated}, want: true},
		{name: "running, one container still running", phase: corev1.PodRunning, containers: []corev1.ContainerStatus{terminated, running}, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pod("p", "DaemonSet", nil)
			p.Status.Phase, p.Status.ContainerStatuses = tc.phase, tc.containers
			if got := ended(&p); got != tc.want {
				t.Errorf("ended = %v, want %v", got, tc.want)
			}
		})
	}
}
