package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"

	"lifeboat.dev/lifeboat/internal/status"
	"lifeboat.dev/lifeboat/test/testenv"
)

// lifeboat status during a scale-in drain: the real binary, run as the
// kubectl plugin (kubectl-lifeboat) with the test cluster's kubeconfig in
// KUBECONFIG, names the node, the reason, the pod left, the heartbeats and
// the lifecycle action pending while the pod shuts down (as a table, -o
// wide for the node by name, -o json and -o name); nothing once the
// instance and its node are gone.
func TestStatusDuringDrain(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	plugin := filepath.Join(t.TempDir(), "kubectl-lifeboat")
	if err := os.Symlink(lifeboatBin, plugin); err != nil {
		t.Fatal(err)
	}
	statusOf := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(h.Ctx, plugin, append([]string{"status"}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kube.Kubeconfig)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kubectl-lifeboat status %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	group := "status-" + testenv.UniqueName("g")
	id := h.CreateGroup(group, 1)[0]
	node := h.NodeName(id)
	h.PutHook(group, "drain", terminating, 2, "ABANDON")
	ns := kube.Namespace(t)
	pod, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: node, Grace: 120 * time.Second, ShutdownAfter: 8 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if out := statusOf(); !strings.Contains(out, "no nodes") {
		t.Fatalf("before the scale-in, status shows:\n%s", out)
	}
	if _, err := h.AS.SetDesiredCapacity(h.Ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(0)}); err != nil {
		t.Fatal(err)
	}
	var seen status.Node
	h.Eventually(20*time.Second, "status to show the node draining, its pod left and a heartbeat", func() bool {
		var doc status.List
		out := statusOf("-o", "json")
		if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.APIVersion != status.APIVersion || doc.Kind != status.ListKind {
			t.Fatalf("status -o json is not a %s %s: %v\n%s", status.APIVersion, status.ListKind, err, out)
		}
		for _, n := range doc.Items {
			if n.Name == node && n.Heartbeats >= 1 && len(n.Pods) > 0 {
				seen = n
				return true
			}
		}
		return false
	})
	if seen.State != status.Handling || seen.Reason != "lifecycle-terminate" || seen.InstanceID != id ||
		seen.Pods[0].Name != pod.Name || seen.Lifecycle == nil || seen.Lifecycle.State != "pending" || seen.Lifecycle.Group != group {
		t.Errorf("status mid-drain: %+v (lifecycle %+v)", seen, seen.Lifecycle)
	}
	t.Logf("kubectl lifeboat status -o json mid-drain:\n%s", statusOf("-o", "json"))
	table := statusOf()
	t.Logf("kubectl lifeboat status mid-drain:\n%s", table)
	for _, want := range []string{node, "lifecycle-terminate", "pending", pod.Name} {
		if !strings.Contains(table, want) {
			t.Errorf("table mid-drain lacks %q:\n%s", want, table)
		}
	}
	wide := statusOf(node, "-o", "wide")
	t.Logf("kubectl lifeboat status %s -o wide mid-drain:\n%s", node, wide)
	for _, want := range []string{node, id, "lifecycle-terminate", group + "/drain", pod.Name} {
		if !strings.Contains(wide, want) {
			t.Errorf("-o wide mid-drain lacks %q:\n%s", want, wide)
		}
	}
	if names := statusOf("-o", "name"); !strings.Contains(names, "node/"+node+"\n") {
		t.Errorf("-o name mid-drain: %q, want node/%s among them", names, node)
	}
	h.Eventually(30*time.Second, "the lifecycle action to complete", func() bool {
		a, ok := h.ActionFor(id, terminating)
		return ok && !a.Active()
	})
	// The instance terminates and its node goes with it: nothing is left to
	// show (the completed state of a node that stays is unit-tested).
	h.Eventually(20*time.Second, "status to show no node once the instance is gone", func() bool {
		return strings.Contains(statusOf(), "no nodes")
	})
}
