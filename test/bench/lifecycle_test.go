package bench

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

// BenchmarkLifecycleScale opens LIFEBOAT_BENCH_ACTIONS (default 50)
// terminate lifecycle actions at once, on nodes whose pods never finish
// terminating (no kubelet), so every drain is long. The hook's heartbeat
// timeout is LIFEBOAT_BENCH_HOOK_TIMEOUT seconds (default 30, AWS's minimum)
// and the drains are held for LIFEBOAT_BENCH_HOLD (default 90 s): an action
// whose heartbeat comes late times out. It reports the actions lost to a timeout (must be 0)
// and the heartbeats per action, then releases the drains and reports
// release -> all actions completed.
func BenchmarkLifecycleScale(b *testing.B) {
	n := envInt(b, "LIFEBOAT_BENCH_ACTIONS", 50)
	hold := time.Duration(envInt(b, "LIFEBOAT_BENCH_HOLD", 90)) * time.Second
	hookTimeout := int32(envInt(b, "LIFEBOAT_BENCH_HOOK_TIMEOUT", 30))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	env, moto, bin, _ := testbed(b, testenv.Options{NoScheduler: true, NoKwok: true})
	ns := env.Namespace(b)
	stack, err := testenv.CreateQueueStack(ctx, moto.Endpoint, "lifecycle")
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	nodes := map[string]string{}
	sim, err := awssim.New(awssim.Options{
		MotoEndpoint: moto.Endpoint, MinHeartbeatTimeout: time.Second,
		OnInstanceRunning: func(ctx context.Context, in awssim.Instance) {
			name := in.PrivateDNSName
			_, err := env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: corev1.NodeSpec{ProviderID: testenv.ProviderID(in.AvailabilityZone, in.ID)}}, metav1.CreateOptions{})
			if err != nil {
				b.Errorf("creating node: %v", err)
				return
			}
			// A pod that no kubelet will ever finish: its drain lasts until released.
			_, err = env.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + in.ID},
				Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}, metav1.CreateOptions{})
			if err != nil {
				b.Errorf("creating pod: %v", err)
				return
			}
			mu.Lock()
			nodes[in.ID] = name
			mu.Unlock()
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := sim.Start(ctx, "127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	defer sim.Close()
	as := autoscaling.NewFromConfig(testenv.MotoAWSConfig(), func(o *autoscaling.Options) { o.BaseEndpoint = aws.String(sim.Endpoint()) })
	group := "scale"
	if _, err := as.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String(group), MinSize: aws.Int32(0), MaxSize: aws.Int32(int32(n)), DesiredCapacity: aws.Int32(int32(n)),
		LaunchConfigurationName: aws.String("lc"),
	}); err != nil {
		b.Fatal(err)
	}
	setup := time.Now()
	for {
		mu.Lock()
		have := len(nodes)
		mu.Unlock()
		if have == n {
			break
		}
		if time.Since(setup) > 20*time.Minute {
			b.Fatalf("only %d of %d instances became nodes", have, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The launches' state-change events must not queue ahead of the burst.
	if !sim.Flush(5 * time.Minute) {
		b.Fatal("the simulator's launch announcements did not reach moto within 5 minutes")
	}
	b.Logf("%d instances and nodes ready in %v", n, time.Since(setup).Round(time.Second))
	if _, err := as.PutLifecycleHook(ctx, &autoscaling.PutLifecycleHookInput{AutoScalingGroupName: aws.String(group), LifecycleHookName: aws.String("drain"),
		LifecycleTransition: aws.String("autoscaling:EC2_INSTANCE_TERMINATING"), HeartbeatTimeout: aws.Int32(hookTimeout), DefaultResult: aws.String("ABANDON")}); err != nil {
		b.Fatal(err)
	}
	logDir, err := os.MkdirTemp("", "lifeboat-bench-lifecycle-")
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("lifeboat log: %s", logDir)
	proc, err := testenv.StartProcess("lifeboat-lifecycle", bin, []string{"run",
		"--queue-url", stack.QueueURL, "--aws-endpoint", moto.Endpoint + ",autoscaling=" + sim.Endpoint(), "--region", "us-east-1",
		"--kubeconfig", env.Kubeconfig, "--leader-elect=false", "--listen", "", "--log-level", "debug",
	}, testenv.AWSEnv(), logDir)
	if err != nil {
		b.Fatal(err)
	}
	defer proc.Stop()
	b.Cleanup(func() {
		if b.Failed() {
			b.Logf("---- lifeboat log ----\n%s", proc.Tail(40))
		}
	})
	b.ResetTimer()
	if _, err := as.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(0)}); err != nil {
		b.Fatal(err)
	}
	opened := time.Now()
	time.Sleep(hold)
	var active, timedOut, beats, minBeats int
	var lag, pickup []float64
	minBeats = 1 << 30
	for _, a := range sim.Actions() {
		if a.Transition != "autoscaling:EC2_INSTANCE_TERMINATING" {
			continue
		}
		if !a.Announced.IsZero() {
			lag = append(lag, a.Announced.Sub(a.Started).Seconds())
			if !a.FirstHeartbeat.IsZero() {
				pickup = append(pickup, a.FirstHeartbeat.Sub(a.Announced).Seconds())
			}
		}
		if a.Active() {
			active++
		}
		if a.CompletedBy == awssim.CompletedByHeartbeatTimeout || a.CompletedBy == awssim.CompletedByGlobalTimeout {
			timedOut++
		}
		beats += a.Heartbeats
		minBeats = min(minBeats, a.Heartbeats)
	}
	p := percentiles(lag)
	b.Logf("simulator and moto: %d of %d actions announced; started -> announced p50 %.2f s, p99 %.2f s, max %.2f s", len(lag), n, p.P50, p.P99, p.Max)
	first := percentiles(pickup)
	b.Logf("lifeboat: announced -> first heartbeat p50 %.2f s, p99 %.2f s, max %.2f s (%d actions)", first.P50, first.P99, first.Max, len(pickup))
	b.ReportMetric(first.P99, "first_heartbeat_p99_s")
	b.ReportMetric(first.Max, "first_heartbeat_max_s")
	b.Logf("after %v: %d actions active, %d timed out, %d heartbeats (min %d per action)", time.Since(opened).Round(time.Second), active, timedOut, beats, minBeats)
	if timedOut > 0 || active != n {
		b.Fatalf("%d of %d actions timed out (%d active): heartbeats came late", timedOut, n, active)
	}
	// Release the drains: delete the stuck pods as a kubelet would.
	released := time.Now()
	zero := int64(0)
	for id := range nodes {
		if err := env.Client.CoreV1().Pods(ns).Delete(ctx, "p-"+id, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			b.Fatal(err)
		}
	}
	for {
		done := 0
		for _, a := range sim.Actions() {
			if a.Transition == "autoscaling:EC2_INSTANCE_TERMINATING" && a.CompletedBy == awssim.CompletedByAPI && a.Result == "CONTINUE" {
				done++
			}
		}
		if done == n {
			break
		}
		if time.Since(released) > 5*time.Minute {
			b.Fatalf("only %d of %d actions completed 5 minutes after the drains were released", done, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(n), "actions")
	b.ReportMetric(float64(timedOut), "timed_out")
	b.ReportMetric(float64(minBeats), "min_heartbeats")
	b.ReportMetric(float64(beats)/hold.Seconds(), "heartbeats/s")
	b.ReportMetric(time.Since(released).Seconds(), "release_to_all_completed_s")
}
