package fault

import (
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

// Issue 14 item 12, made deterministic: a launch action must be heartbeated
// from the moment lifeboat knows the group is its own until the action is
// settled, while lifeboat's other Auto Scaling calls are slow. A degraded
// Auto Scaling API is played by the proxy holding each DescribeLifecycleHooks
// and CompleteLifecycleAction for 8 s (longer than nothing, shorter than the
// SDK's per-attempt limit): with a 10 s heartbeat timeout, reading the hook
// before the first heartbeat, or completing after the last one, lets the
// action time out (ABANDON: AWS would terminate the healthy new instance).
func TestLaunchActionHeartbeatedWhileAutoScalingIsSlow(t *testing.T) {
	const hold = 8 * time.Second
	w := newWorld(t, worldOptions{flags: []string{"--heartbeat-interval", "2s"}})
	var mu sync.Mutex
	held := map[string]int{}
	w.asProxy.SetIntercept(func(x testenv.Exchange) bool {
		if x.Stage == testenv.BeforeForward && (x.Action == "DescribeLifecycleHooks" || x.Action == "CompleteLifecycleAction") {
			mu.Lock()
			held[x.Action]++
			mu.Unlock()
			time.Sleep(hold)
		}
		return true
	})
	group := "slow-" + testenv.UniqueName("g")
	w.CreateGroup(group, 0)
	w.PutHook(group, "launch", launching, 10, "ABANDON")
	if _, err := w.AS.SetDesiredCapacity(w.ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	var launch awssim.Action
	w.Eventually(90*time.Second, "the launch action to end", func() bool {
		for _, a := range w.Sim.Actions() {
			if a.GroupName == group && a.Transition == launching {
				launch = a
				return !a.Active()
			}
		}
		return false
	})
	mu.Lock()
	t.Logf("requests held %v each: %v", hold, held)
	mu.Unlock()
	if launch.CompletedBy != awssim.CompletedByAPI || launch.Result != "CONTINUE" || launch.Completions != 1 {
		t.Errorf("launch action of %s ended by %s with %q after %d completions and %d heartbeats; want CONTINUE by the API, heartbeated while Auto Scaling was slow",
			launch.InstanceID, launch.CompletedBy, launch.Result, launch.Completions, launch.Heartbeats)
	}
	if launch.Heartbeats < 2 {
		t.Errorf("launch action heartbeated %d times during 16 s of slow calls; want at least 2", launch.Heartbeats)
	}
	n := 0
	for _, a := range w.Sim.Actions() {
		if a.GroupName == group && a.Transition == launching {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d launch actions in the group; want 1 (a timed-out ABANDON launches a replacement)", n)
	}
}
