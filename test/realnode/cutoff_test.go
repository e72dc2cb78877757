package realnode

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"lifeboat.dev/lifeboat/test/testenv"
)

// TestInstanceDiesMidShutdown is issue 23 items 4 and 5 on a real pod: a
// Spot notice, lifeboat evicts the pod (preStop 2 s, then a SIGTERM
// handler that needs 60 s), and the instance is terminated while the
// handler works: powered off, its Node deleted. The process is cut off
// mid-shutdown (its own record: SIGTERM, never finished), and lifeboat
// says so at once: a Warning NodeGone naming the pod, "mid-shutdown",
// counted lifeboat_evictions_total{result="cut-off"}. (On 69db33e no
// NodeGone came within 15 s: the drain waited on for the pod object.)
func TestInstanceDiesMidShutdown(t *testing.T) {
	w := newWorld(t, worldOptions{lifeboat: true})
	id := w.CreateGroup("dies", 1)[0]
	node := w.NodeName(id)
	pod := w.workload("long-job", id, 2*time.Second, 60*time.Second, 90*time.Second)
	startWorkloads(w.Ctx, t, pod)

	w.PutEvent("aws.ec2", "EC2 Spot Instance Interruption Warning", time.Now(), map[string]string{"instance-id": id, "instance-action": "terminate"})
	eventually(w.Ctx, t, 30*time.Second, "the pod's SIGTERM handler at work", func() bool {
		r, err := testenv.ReadWorkloadRecord(pod.RecordDir, pod.Namespace, pod.Name)
		return err == nil && r.Count(testenv.WorkloadSIGTERM) > 0
	})
	w.terminate(id)
	off, _ := w.machines.PoweredOff(id)

	// The instance's state-change notification (its deadline: now) and the
	// Node's deletion race: whichever lifeboat sees first ends the drain,
	// with a Warning DeadlinePassed or NodeGone naming the pod cut off (CI
	// saw DeadlinePassed first once).
	var msg, reason string
	eventually(w.Ctx, t, 15*time.Second, "a Warning NodeGone or DeadlinePassed Event", func() bool {
		for _, r := range []string{"NodeGone", "DeadlinePassed"} {
			list, err := suite.Kube.Client.CoreV1().Events(metav1.NamespaceDefault).List(w.Ctx, metav1.ListOptions{
				FieldSelector: fields.Set{"involvedObject.name": node, "reason": r}.String()})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range list.Items {
				if e.Type == "Warning" {
					msg, reason = e.Message, r
					return true
				}
			}
		}
		return false
	})
	t.Logf("%s %.2fs after the power-off: %s", reason, time.Since(off).Seconds(), msg)
	if want := pod.Namespace + "/" + pod.Name + ": mid-shutdown"; !strings.Contains(msg, want) {
		t.Errorf("%s does not say %q", reason, want)
	}
	rec := readRecord(t, pod)
	t.Logf("record: %s", rec)
	if _, ok := rec.At(testenv.WorkloadPreStopEnd); !ok || rec.Count(testenv.WorkloadSIGTERM) != 1 || rec.Finished() {
		t.Errorf("the process was not cut off mid-shutdown (preStop ended, SIGTERM, work unfinished); record: %s", rec)
	}
	if n := w.Metric("lifeboat_evictions_total", map[string]string{"result": "cut-off"}); n != 1 {
		t.Errorf(`lifeboat_evictions_total{result="cut-off"} = %v, want 1`, n)
	}
	if n := w.Metric("lifeboat_evictions_total", map[string]string{"result": "evicted"}); n != 0 {
		t.Errorf(`lifeboat_evictions_total{result="evicted"} = %v, want 0`, n)
	}
}
