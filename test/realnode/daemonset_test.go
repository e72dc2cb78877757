package realnode

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/dsstop"
	"lifeboat.dev/lifeboat/test/testenv"
)

// Issue 25 item 4 on a real node: a log shipper runs as a DaemonSet pod
// whose SIGTERM handler flushes for 4 s (grace 30 s), next to an ordinary
// pod. The group scales in; its terminate hook (3 s heartbeat timeout,
// CONTINUE) is heartbeated while lifeboat drains.
//
//   - not opted in (lifeboat before the feature, and its default): the
//     drain skips DaemonSet pods, completes the action with CONTINUE once
//     the ordinary pod is gone, and the power-off kills the shipper: its
//     record shows no SIGTERM.
//   - opted in (lifeboat.io/stop-before-termination: "true" in the
//     DaemonSet's pod template): after the ordinary pod is gone, the
//     shipper is evicted and its handler finishes; the action is
//     completed and the instance powered off only after its exit.
func TestDaemonSetPodStoppedBeforeScaleIn(t *testing.T) {
	for _, tc := range []struct {
		name  string
		optIn bool
		// tolerateAll: the DaemonSet tolerates every taint, lifeboat's
		// too, so it puts a new pod on the node at once.
		tolerateAll bool
	}{
		{name: "not opted in: killed by the power-off (the harm)"},
		{name: "opted in: stopped before CONTINUE", optIn: true},
		{name: "opted in, tolerating every taint: stopped once, its new pod reported", optIn: true, tolerateAll: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, worldOptions{lifeboat: true})
			group := testenv.UniqueName("ds")
			id := w.CreateGroup(group, 1)[0]
			w.PutHook(group, "drain", terminating, 3, "CONTINUE")
			web := w.workload("web", id, 0, time.Second, 30*time.Second)
			shipper := w.workload("shipper", id, 0, 4*time.Second, 30*time.Second)
			startWorkloads(w.Ctx, t, web)
			w.startDaemonSet(shipper, tc.optIn, tc.tolerateAll)

			start := time.Now()
			w.setDesired(group, 0)
			w.Eventually(60*time.Second, "the instance powered off", func() bool {
				_, ok := w.machines.PoweredOff(id)
				return ok
			})
			off, _ := w.machines.PoweredOff(id)
			a, _ := w.ActionFor(id, terminating)
			webRec, rec := readRecord(t, web), readRecord(t, shipper)
			t.Logf("web: %s", webRec)
			t.Logf("shipper: %s", rec)
			t.Logf("action %s by %s after %.2fs; powered off %.2fs after the scale-in", a.Result, a.CompletedBy, a.Completed.Sub(start).Seconds(), off.Sub(start).Seconds())
			assertGracefulShutdown(t, webRec, web)
			if a.Result != "CONTINUE" || a.Completions != 1 {
				t.Fatalf("terminate action %+v, want completed once with CONTINUE by lifeboat", a)
			}
			if !tc.optIn {
				if rec.Count(testenv.WorkloadSIGTERM) != 0 || rec.Finished() {
					t.Errorf("the shipper got its shutdown without opting in; the harm is that it does not (record: %s)", rec)
				}
				return
			}
			if tc.tolerateAll {
				// The record holds the stopped pod's life and then its
				// successor's, cut off by the power-off (the same name).
				if n := w.Lifeboat.CountLogs(`"msg":"`+dsstop.ReasonRecreated+`"`, "shipper"); n != 1 {
					t.Errorf("lifeboat logged %d %s naming the shipper, want 1", n, dsstop.ReasonRecreated)
				}
				if n := rec.Count(testenv.WorkloadSIGTERM); n != 1 {
					t.Errorf("SIGTERM recorded %d times, want once: the new pod is not stopped again (record: %s)", n, rec)
				}
			}
			assertGracefulShutdown(t, rec, shipper)
			term, _ := rec.At(testenv.WorkloadSIGTERM)
			exit, ok := rec.At(testenv.WorkloadExit)
			if !ok || !exit.Before(a.Completed) || !exit.Before(off) {
				t.Errorf("the shipper exited at %v (recorded %v), want before CONTINUE at %v and the power-off at %v", exit, ok, a.Completed, off)
			}
			if webExit, _ := webRec.At(testenv.WorkloadExit); !term.After(webExit) {
				t.Errorf("the shipper got SIGTERM at %v, before the ordinary pod exited at %v: DaemonSet pods go last", term, webExit)
			}
			t.Logf("the shipper's shutdown took %.2fs (SIGTERM to exit); it exited %.2fs before CONTINUE", exit.Sub(term).Seconds(), a.Completed.Sub(exit).Seconds())
			if n := w.Lifeboat.CountLogs(`"msg":"`+dsstop.ReasonStopped+`"`, "shipper"); n != 1 {
				t.Errorf("lifeboat logged %d %s naming the shipper, want 1", n, dsstop.ReasonStopped)
			}
		})
	}
}

// startDaemonSet runs s as the pod of a DaemonSet on s.Node alone (the
// pod name in its record stays s.Name) and waits until it has recorded
// that it is ready.
func (w *world) startDaemonSet(s testenv.WorkloadSpec, optIn, tolerateAll bool) {
	w.T.Helper()
	pod := testenv.WorkloadPod(s)
	pod.Spec.NodeName = ""
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{s.Node}}}}}}}}
	if optIn {
		pod.Annotations = map[string]string{dsstop.AnnotationStop: "true"}
	}
	if tolerateAll {
		pod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	}
	labels := map[string]string{"app": s.Name}
	pod.Labels = labels
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: pod.ObjectMeta, Spec: pod.Spec}}}
	ds.Spec.Template.Namespace, ds.Spec.Template.Name = "", ""
	if _, err := suite.Kube.Client.AppsV1().DaemonSets(s.Namespace).Create(w.Ctx, ds, metav1.CreateOptions{}); err != nil {
		w.T.Fatalf("creating DaemonSet %s: %v", s.Name, err)
	}
	eventually(w.Ctx, w.T, 60*time.Second, "DaemonSet "+s.Name+" running and recorded ready", func() bool {
		r, err := testenv.ReadWorkloadRecord(s.RecordDir, s.Namespace, s.Name)
		return err == nil && r.Count(testenv.WorkloadReady) > 0
	})
}
