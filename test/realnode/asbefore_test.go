package realnode

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/test/testenv"
)

// TestStatefulSetAndBarePodAsBefore is issue 25's "no regression" proof on
// a real node: with --replacement-first, a one-replica StatefulSet's pod
// and a bare pod are evicted at a Spot notice as without it. Replacement
// first is for Deployments (docs/replacement-first.md): a StatefulSet's
// new pod takes the old one's name and volume, so it cannot run before the
// old one is gone, and a bare pod has nothing to replace it. Each pod's own
// record shows its preStop and SIGTERM handler run to their end before the
// power-off; each was seen deleting within seconds of the notice (a
// Deployment's pod would wait for its replacement); no Replacement Event
// names either, and lifeboat_replacements_total stays 0.
func TestStatefulSetAndBarePodAsBefore(t *testing.T) {
	w := newWorld(t, worldOptions{lifeboat: true, flags: []string{"--replacement-first"}})
	ctx := w.Ctx
	id := w.CreateGroup("spot", 1)[0]
	node := w.NodeName(id)
	bare := w.workload("bare", id, time.Second, time.Second, 10*time.Second)
	// The StatefulSet's pod is placed by the scheduler on the group's only
	// node: once that is cordoned, the pod the StatefulSet makes again
	// stays Pending instead of running (and recording) there a second time.
	db := testenv.WorkloadSpec{Namespace: w.ns, Name: "db", RecordDir: w.records,
		PreStop: time.Second, Shutdown: time.Second, Grace: 10 * time.Second,
		NodeSelector: map[string]string{groupLabel: "spot"}}
	tmpl := testenv.WorkloadDeployment(db, 1).Spec.Template
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: db.Name},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(1)), ServiceName: db.Name,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": db.Name}}, Template: tmpl}}
	if _, err := suite.Kube.Client.AppsV1().StatefulSets(w.ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startWorkloads(ctx, t, bare)
	dbPod := db
	dbPod.Name = db.Name + "-0"
	eventually(ctx, t, 60*time.Second, "pod db-0 running on "+node+" and recorded ready", func() bool {
		p, err := suite.Kube.Client.CoreV1().Pods(w.ns).Get(ctx, dbPod.Name, metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodRunning || p.Spec.NodeName != node {
			return false
		}
		r, err := testenv.ReadWorkloadRecord(w.records, w.ns, dbPod.Name)
		return err == nil && r.Count(testenv.WorkloadReady) > 0
	})

	deleting := watchDeletions(ctx, t, w.ns)
	sent := time.Now()
	w.PutEvent("aws.ec2", "EC2 Spot Instance Interruption Warning", sent, map[string]string{"instance-id": id, "instance-action": "terminate"})
	time.Sleep(time.Until(sent.Add(spotDeadline)))
	w.terminate(id)
	off, _ := w.machines.PoweredOff(id)

	for _, s := range []testenv.WorkloadSpec{bare, dbPod} {
		rec := readRecord(t, s)
		evictedAt, ok := deleting(s.Name)
		if !ok {
			t.Errorf("pod %s was never seen deleting (record: %s)", s.Name, rec)
			continue
		}
		t.Logf("%s: evicted +%.2fs after the notice; record: %s; powered off +%.2fs",
			s.Name, evictedAt.Sub(sent).Seconds(), rec, off.Sub(sent).Seconds())
		if d := evictedAt.Sub(sent); d > 5*time.Second {
			t.Errorf("pod %s was evicted %v after the notice: it waited, as only a Deployment's pod should", s.Name, d)
		}
		assertGracefulShutdown(t, rec, s)
		if exit, ok := rec.At(testenv.WorkloadExit); ok && !exit.Before(off) {
			t.Errorf("pod %s exited at %v, not before the power-off at %v", s.Name, exit, off)
		}
	}
	if n := w.Metric("lifeboat_replacements_total", nil); n != 0 {
		t.Errorf("lifeboat_replacements_total = %v (all results), want 0", n)
	}
	events, err := suite.Kube.Client.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if strings.HasPrefix(e.Reason, "Replacement") && (e.InvolvedObject.Namespace == w.ns || e.InvolvedObject.Name == node) {
			t.Errorf("Event %s on %s %s: %s; want no replacement for a StatefulSet's or a bare pod", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
		}
	}
}
