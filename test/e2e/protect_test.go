package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/protect"
	"lifeboat.dev/lifeboat/test/testenv"
)

// --scale-in-protection on a group of two: the instance whose node runs a
// do-not-disrupt pod is protected, so a scale-in by one terminates the
// other; the protection is lifted when the pod is gone, also when it went
// while lifeboat was down (the restarted lifeboat lifts it); Karpenter's
// annotation works the same.
func TestScaleInProtection(t *testing.T) {
	h := newHarness(t, harnessOptions{flags: []string{"--scale-in-protection", "--scale-in-protection-interval", "1s"}})
	group := "protect-" + testenv.UniqueName("g")
	ids := h.CreateGroup(group, 2)
	keep, other := ids[0], ids[1]
	ns := kube.Namespace(t)
	protected := func(id string) bool { in, _ := h.Sim.Instance(id); return in.ProtectedFromScaleIn }
	recorded := func(id string) string {
		n, ok := h.LookupNode(h.NodeName(id))
		if !ok {
			return ""
		}
		return n.Annotations[protect.AnnotationProtected]
	}
	newPod := func(annotation string) string {
		t.Helper()
		p, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: h.NodeName(keep), Grace: -1, Annotations: map[string]string{annotation: "true"}})
		if err != nil {
			t.Fatal(err)
		}
		return p.Name
	}
	deletePod := func(name string) {
		t.Helper()
		if err := kube.Client.CoreV1().Pods(ns).Delete(h.Ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := kube.WaitPodGone(h.Ctx, ns, name); err != nil {
			t.Fatal(err)
		}
	}

	pod := newPod(protect.AnnotationDoNotDisrupt)
	h.Eventually(15*time.Second, "the do-not-disrupt pod's instance to be protected and the protection recorded", func() bool {
		return protected(keep) && recorded(keep) == group
	})
	if protected(other) {
		t.Fatal("the instance without a do-not-disrupt pod is protected too")
	}
	if _, err := h.AS.SetDesiredCapacity(h.Ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	h.Eventually(30*time.Second, "the unprotected instance to be terminated", func() bool {
		in, _ := h.Sim.Instance(other)
		return in.EC2State == "terminated"
	})
	if in, _ := h.Sim.Instance(keep); in.LifecycleState != astypes.LifecycleStateInService {
		t.Fatalf("the protected instance is %s, want InService", in.LifecycleState)
	}

	// The pod ends while lifeboat is down: the next lifeboat lifts what the
	// last one set.
	h.Lifeboat.Stop()
	deletePod(pod)
	if !protected(keep) {
		t.Fatal("protection lifted while lifeboat was down: the restart proves nothing")
	}
	if err := h.Lifeboat.Restart(h.Ctx); err != nil {
		t.Fatal(err)
	}
	h.Eventually(20*time.Second, "the restarted lifeboat to lift the protection and its record", func() bool {
		return !protected(keep) && recorded(keep) == ""
	})

	// Karpenter's annotation, and a pod that ends while lifeboat runs.
	pod = newPod(protect.AnnotationKarpenter)
	h.Eventually(15*time.Second, "karpenter.sh/do-not-disrupt to protect the instance", func() bool {
		return protected(keep) && recorded(keep) == group
	})
	deletePod(pod)
	h.Eventually(15*time.Second, "the protection to be lifted once the pod is gone", func() bool {
		return !protected(keep) && recorded(keep) == ""
	})
	for _, l := range h.Lifeboat.Logs() {
		if strings.Contains(l, "ScaleInProtect") {
			t.Log(l)
		}
	}
	if n := h.NodeEvents(h.NodeName(keep), "ScaleInProtectionLifted"); n < 1 {
		t.Errorf("%d ScaleInProtectionLifted Events on the node, want ≥ 1", n)
	}
}
