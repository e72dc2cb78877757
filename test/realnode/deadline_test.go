package realnode

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/test/testenv"
)

// Issue 25 item 3 on a real node: a workload reads its own annotations
// from a downward-API volume while it runs. On a Spot notice, lifeboat
// annotates it with lifeboat.io/deadline before evicting it, and the
// workload's own record shows it saw that deadline (the notice's) before
// its SIGTERM. With --annotate-pods-with-deadline=false (lifeboat before
// the feature) it learns nothing until SIGTERM; that run also sets
// --terminating-condition (off by default), and the Node carries the
// condition lifeboat.io/Terminating.
func TestWorkloadSeesTheDeadlineBeforeSIGTERM(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		on    bool
	}{
		{name: "default: the deadline before SIGTERM", on: true},
		{name: "off: nothing before SIGTERM (the harm)", flags: []string{"--annotate-pods-with-deadline=false", "--terminating-condition"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, worldOptions{lifeboat: true, flags: tc.flags})
			id := w.CreateGroup(testenv.UniqueName("deadline"), 1)[0]
			pod := w.workload("checkpointer", id, 0, 2*time.Second, 30*time.Second)
			pod.WatchAnnotations = true
			startWorkloads(w.Ctx, t, pod)
			if rec := readRecord(t, pod); rec.Count(testenv.WorkloadAnnotationsWatched) != 1 {
				t.Fatalf("the workload does not watch its annotations; record: %s", rec)
			}

			// A notice's time is whole seconds; its deadline is two minutes on.
			notice := time.Now().Truncate(time.Second)
			deadline := notice.Add(2 * time.Minute).UTC().Format(time.RFC3339)
			w.PutEvent("aws.ec2", "EC2 Spot Instance Interruption Warning", notice, map[string]string{"instance-id": id, "instance-action": "terminate"})
			eventually(w.Ctx, t, 60*time.Second, "the workload's SIGTERM handler finished", func() bool {
				r, err := testenv.ReadWorkloadRecord(pod.RecordDir, pod.Namespace, pod.Name)
				return err == nil && r.Finished()
			})
			rec := readRecord(t, pod)
			t.Logf("record: %s", rec)
			term, _ := rec.At(testenv.WorkloadSIGTERM)
			seen, ok := rec.Entry(testenv.WorkloadDeadlineSeen)
			if !tc.on {
				if ok && seen.Time.Before(term) {
					t.Errorf("the workload saw a deadline %q before SIGTERM with the option off", seen.Value)
				}
				t.Logf("off: deadline seen before SIGTERM: %v", ok && seen.Time.Before(term))
				cond := terminatingCondition(w, id)
				if cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != "SpotInterruption" {
					t.Fatalf("with --terminating-condition: node condition lifeboat.io/Terminating = %+v, want True, reason SpotInterruption", cond)
				}
				t.Logf("node condition: %s %s %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message)
				return
			}
			if !ok || !seen.Time.Before(term) {
				t.Fatalf("the workload did not see lifeboat.io/deadline before its SIGTERM (seen %v at %v, SIGTERM at %v); record: %s", ok, seen.Time, term, rec)
			}
			t.Logf("deadline %s seen %v before SIGTERM", seen.Value, term.Sub(seen.Time).Round(time.Millisecond))
			if seen.Value != deadline {
				t.Errorf("the workload saw deadline %q, want the notice's %q", seen.Value, deadline)
			}
			if cond := terminatingCondition(w, id); cond != nil {
				t.Errorf("node condition %+v by default, want none (--terminating-condition is off)", cond)
			}
		})
	}
}

// terminatingCondition returns the node's lifeboat.io/Terminating
// condition, nil when it has none.
func terminatingCondition(w *world, id string) *corev1.NodeCondition {
	node, err := suite.Kube.Client.CoreV1().Nodes().Get(w.Ctx, w.NodeName(id), metav1.GetOptions{})
	if err != nil {
		w.T.Fatal(err)
	}
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == "lifeboat.io/Terminating" {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}
