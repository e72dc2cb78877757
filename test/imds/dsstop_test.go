package imds

import (
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"

	"lifeboat.dev/lifeboat/internal/dsstop"
	imdssrc "lifeboat.dev/lifeboat/internal/source/imds"
	"lifeboat.dev/lifeboat/test/testenv"
)

// Issue 25 item 4 in IMDS mode: with --imds-complete-lifecycle, lifeboat
// (itself a DaemonSet pod, never stopped) stops its node's opted-in
// DaemonSet pod after the drain and completes the terminate action with
// CONTINUE only once that pod is gone.
func TestIMDSStopsDaemonSetPodBeforeContinue(t *testing.T) {
	if os.Getenv("LIFEBOAT_IMDS_BUILD") == "imdsonly" {
		t.Skip("lifeboat-imds refuses --imds-complete-lifecycle (TestIMDSCompletesOwnTerminateAction)")
	}
	s := startGroupWithTerminateHook(t)
	w := newWorld(t, worldOptions{
		instanceID: s.instance,
		imds:       testenv.IMDSOptions{Scenario: testenv.IMDSASGLifecycle},
		hide:       []string{imdssrc.PathTargetState},
		flags:      []string{"--aws-endpoint", "autoscaling=" + s.sim.Endpoint(), "--imds-complete-lifecycle"},
	})
	w.pod(time.Second)
	shipper, err := kube.CreatePod(w.ctx, testenv.PodSpec{Namespace: w.ns, Node: w.node, Grace: 30 * time.Second, ShutdownAfter: 2 * time.Second,
		OwnerKind: testenv.OwnerDaemonSet, Annotations: map[string]string{dsstop.AnnotationStop: "true"}})
	if err != nil {
		t.Fatal(err)
	}
	var goneAt time.Time
	w.eventually(30*time.Second, "lifeboat ready", func() bool { return w.readyz() == 200 })
	if _, err := s.as.TerminateInstanceInAutoScalingGroup(w.ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: aws.String(s.instance), ShouldDecrementDesiredCapacity: aws.Bool(true),
	}); err != nil {
		t.Fatalf("scaling in %s: %v", s.instance, err)
	}
	w.proxy.show(imdssrc.PathTargetState)
	w.eventually(lifecyclePodShutdown+20*time.Second, "the DaemonSet pod gone", func() bool {
		a, _ := s.action() // read before the pod: an action ended then ended before the pod went
		if !w.podExists(shipper.Name) {
			goneAt = time.Now()
			return true
		}
		if !a.Active() {
			t.Fatalf("the action ended (%s by %s) with the DaemonSet pod still there", a.Result, a.CompletedBy)
		}
		return false
	})
	a := s.ended(w)
	if a.Result != "CONTINUE" || a.Completions != 1 {
		t.Fatalf("action ended %s by %s after %d completions, want CONTINUE once", a.Result, a.CompletedBy, a.Completions)
	}
	t.Logf("DaemonSet pod seen gone at %v, action completed at %v", goneAt.Format(time.StampMilli), a.Completed.Format(time.StampMilli))
	w.eventually(10*time.Second, "a DaemonSetPodStopped Event on the node", func() bool { return w.nodeEvents(dsstop.ReasonStopped) == 1 })
}
