package e2e

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"lifeboat.dev/lifeboat/internal/rebootmark"
	"lifeboat.dev/lifeboat/internal/route"
	"lifeboat.dev/lifeboat/test/testenv"
)

// A scheduled reboot maintenance in queue mode (docs/operations.md,
// "Reboot maintenance"): the AWS Health scheduled change cordons and
// drains the node and records the maintenance with the node's boot ID;
// the instance reboots (the kubelet reports a new boot ID, the Node goes
// NotReady and Ready again: kwok's initialize stage keeps the boot ID the
// test set) and lifeboat uncordons it, once; the same Health event, still
// listed, delivered again does not cordon it again.
func TestScheduledRebootUncordonedAfterTheReboot(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	id := h.CreateGroup("reboot-"+testenv.UniqueName("g"), 1)[0]
	node := h.NodeName(id)
	setStatus := func(bootID string, ready corev1.ConditionStatus) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error { // kwok writes the status too
			n := h.Node(node)
			n.Status.NodeInfo.BootID = bootID
			for i, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					n.Status.Conditions[i].Status = ready
				}
			}
			_, err := kube.Client.CoreV1().Nodes().UpdateStatus(h.Ctx, n, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("setting the node's status: %v", err)
		}
	}
	setStatus("boot-1", corev1.ConditionTrue) // as the kubelet reports at its start
	ns := kube.Namespace(t)
	pod, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: node, ShutdownAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now().Add(5 * time.Minute).UTC() // inside the default 10 m lead: acted on at once
	detail := map[string]any{
		"eventArn":          "arn:aws:health:us-east-1::event/EC2/" + rebootmark.HealthSystemReboot + "/" + testenv.UniqueName("e"),
		"service":           "EC2",
		"eventTypeCode":     rebootmark.HealthSystemReboot,
		"eventTypeCategory": "scheduledChange",
		"startTime":         start.Format(time.RFC1123),
		"statusCode":        "upcoming",
		"affectedEntities":  []map[string]string{{"entityValue": id, "status": "PENDING"}},
	}
	sent := time.Now().UTC().Truncate(time.Second)
	h.PutEvent(route.SourceHealth, route.Health, sent, detail)
	cordoned := func() bool {
		n := h.Node(node)
		return n.Spec.Unschedulable && testenv.HasTaint(n, "lifeboat.io/scheduled-change")
	}
	h.Eventually(20*time.Second, "the node cordoned and drained for the maintenance", func() bool {
		return cordoned() && !h.podExists(ns, pod.Name) && h.Node(node).Annotations["lifeboat.io/drained"] != ""
	})
	m, ok, err := rebootmark.DecodeMarker(h.Node(node).Annotations[rebootmark.Annotation])
	if err != nil || !ok || m.Code != rebootmark.HealthSystemReboot || m.BootID != "boot-1" || m.Rebooted {
		t.Fatalf("reboot marker = %+v (present %v, %v), want %s on boot-1", m, ok, err, rebootmark.HealthSystemReboot)
	}
	t.Logf("marker: %s", h.Node(node).Annotations[rebootmark.Annotation])
	h.Eventually(30*time.Second, "the message handled", func() bool { return h.QueueEmpty() })
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if !cordoned() {
			t.Fatal("uncordoned before the reboot")
		}
	}

	// The reboot: the kubelet starts again with a new boot ID, NotReady
	// until kwok's initialize stage makes it Ready.
	setStatus("boot-2", corev1.ConditionFalse)
	rebooted := time.Now()
	uncordoned := func() bool {
		n := h.Node(node)
		_, ours := n.Annotations["lifeboat.io/cordoned"]
		return !n.Spec.Unschedulable && !testenv.HasTaint(n, "lifeboat.io/scheduled-change") && !ours
	}
	h.Eventually(20*time.Second, "the node uncordoned after the reboot", uncordoned)
	n := h.Node(node)
	t.Logf("uncordoned %v after the reboot; boot ID now %q, Ready %v", time.Since(rebooted).Round(10*time.Millisecond), n.Status.NodeInfo.BootID, ready(n))
	if n.Status.NodeInfo.BootID != "boot-2" {
		t.Errorf("boot ID %q after the reboot: kwok overwrote it, the test shows nothing", n.Status.NodeInfo.BootID)
	}
	after, _, _ := rebootmark.DecodeMarker(n.Annotations[rebootmark.Annotation])
	if !after.Rebooted || after.EventID != m.EventID {
		t.Errorf("marker after the reboot = %+v, want %s rebooted", after, m.EventID)
	}
	h.Eventually(10*time.Second, "the Uncordoned Event", func() bool { return h.NodeEvents(node, "Uncordoned") >= 1 })

	// The maintenance is still listed: its event comes again.
	h.PutEvent(route.SourceHealth, route.Health, sent, detail)
	h.Eventually(30*time.Second, "the repeated message handled", func() bool { return h.QueueEmpty() })
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if !uncordoned() {
			t.Fatal("cordoned again by the maintenance's repeated event after the reboot")
		}
	}
	if got := h.NodeEvents(node, "Uncordoned"); got != 1 {
		t.Errorf("Uncordoned Events = %d, want 1", got)
	}
	if got := h.NodeEvents(node, "Cordoned"); got != 1 {
		t.Errorf("Cordoned Events = %d, want 1", got)
	}
	if b, err := json.Marshal(h.Node(node).Annotations); err == nil {
		t.Logf("annotations at the end: %s", b)
	}
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
