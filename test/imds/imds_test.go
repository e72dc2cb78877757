package imds

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/drain"
	imdssrc "lifeboat.dev/lifeboat/internal/source/imds"
	"lifeboat.dev/lifeboat/test/testenv"
)

const (
	taintSpot      = "lifeboat.io/spot-interruption"
	taintRebalance = "lifeboat.io/rebalance-recommendation"
	taintScheduled = "lifeboat.io/scheduled-change"
	taintTerminate = "lifeboat.io/lifecycle-terminate"
)

// 1. A Spot notice (terminate, stop, hibernate) cordons, taints and drains
// the node well within the two minutes, leaves lifeboat's own pod alone,
// and is one event however often it is read (the mock recomputes the
// notice's time at every read).
func TestSpotInterruption(t *testing.T) {
	for _, action := range []string{"terminate", "stop", "hibernate"} {
		t.Run(action, func(t *testing.T) {
			w := newWorld(t, worldOptions{imds: testenv.IMDSOptions{Scenario: testenv.IMDSSpot, SpotAction: action, After: time.Second}})
			pods := []string{w.pod(time.Second), w.pod(2 * time.Second)}
			w.eventually(20*time.Second, "the node cordoned and tainted", func() bool {
				n := w.nodeNow()
				v, ok := taintValue(n, taintSpot)
				return n.Spec.Unschedulable && ok && v == "spot-interruption" && n.Annotations[drain.AnnotationCordoned] == "true"
			})
			notice := time.Now().Add(2 * time.Minute) // the mock's notice time is about this
			w.eventually(30*time.Second, "the pods evicted", func() bool {
				for _, p := range pods {
					if w.podExists(p) {
						return false
					}
				}
				return true
			})
			if time.Now().After(notice) {
				t.Errorf("drain finished after the notice's time")
			}
			w.eventually(10*time.Second, "the Drained event", func() bool { return w.nodeEvents("Drained") == 1 })
			// Keep polling a while: still one event, one drain.
			time.Sleep(2 * time.Second)
			if !w.podExists(w.ownPod) {
				t.Error("lifeboat evicted its own pod")
			}
			if got := w.metric("lifeboat_events_received_total", "source", "imds", "kind", "spot-interruption"); got != 1 {
				t.Errorf("spot events received = %v, want 1 (edge-triggered)", got)
			}
			if got := w.metric("lifeboat_actions_total", "action", "drain", "result", "ok"); got != 1 {
				t.Errorf("drains = %v, want 1", got)
			}
			if got := w.nodeEvents("Drained"); got != 1 {
				t.Errorf("Drained events = %d, want 1", got)
			}
			if got := w.metric("lifeboat_evictions_total", "result", "evicted"); got != 2 {
				t.Errorf("evictions = %v, want 2 (lifeboat's own pod skipped)", got)
			}
		})
	}
}

// 2. F2: target-lifecycle-state Terminated, read at every poll for a long
// (scaled) time, is one event, one cordon, one drain and one Drained Event,
// with a bounded number of API requests and none while it is held.
func TestTargetLifecycleTerminatedHeld(t *testing.T) {
	w := newWorld(t, worldOptions{imds: testenv.IMDSOptions{Scenario: testenv.IMDSASGLifecycle, After: time.Second}})
	pods := []string{w.pod(500 * time.Millisecond), w.pod(500 * time.Millisecond), w.pod(time.Second)}
	w.eventually(30*time.Second, "the drain", func() bool { return w.nodeEvents("Drained") == 1 })
	for _, p := range pods {
		if w.podExists(p) {
			t.Fatalf("pod %s still exists after Drained", p)
		}
	}
	// The work ends with the node's record (lifeboat.io/drained, written
	// just after the Drained Event): the hold starts once it is written, or
	// that write would count as one made while the state was held.
	w.eventually(10*time.Second, "the node's drained record", func() bool { return w.nodeNow().Annotations["lifeboat.io/drained"] != "" })
	if _, ok := taintValue(w.nodeNow(), taintTerminate); !ok {
		t.Errorf("node taints %v, want %s", lifeboatTaints(w.nodeNow()), taintTerminate)
	}

	// Hold the state: 300 polls at 100 ms (five minutes at the 1 s default;
	// the seed saw 151 drains), target-lifecycle-state read at every 5th
	// (imdssrc.Periods): 60 reads of Terminated.
	const hold = 30 * time.Second
	lb0, srv0, imds0 := w.kubeRequests(), w.serverCounts(), w.proxy.count("GET /latest/meta-data/"+imdssrc.PathTargetState)
	time.Sleep(hold) // no reads of our own meanwhile: the server counts every client
	lb1, srv1, imds1 := w.kubeRequests(), w.serverCounts(), w.proxy.count("GET /latest/meta-data/"+imdssrc.PathTargetState)
	if !w.nodeNow().Spec.Unschedulable {
		t.Error("the node is no longer cordoned")
	}

	reads := imds1 - imds0
	want := int(hold/pollInterval) / every(imdssrc.PathTargetState)
	t.Logf("while held for %v: %d reads of target-lifecycle-state; lifeboat's API requests over the whole test: %v", hold, reads, lb1)
	if reads < int(0.7*float64(want)) {
		t.Errorf("target-lifecycle-state read %d times in %v, want about %d: the test does not show edge triggering", reads, hold, want)
	}
	for _, c := range []struct {
		what string
		got  float64
	}{
		{"events received", w.metric("lifeboat_events_received_total", "source", "imds", "kind", "lifecycle-terminate")},
		{"drains", w.metric("lifeboat_actions_total", "action", "drain", "result", "ok")},
		{"Drained Events", float64(w.nodeEvents("Drained"))},
		{"Cordoned Events", float64(w.nodeEvents("Cordoned"))},
		{"InterruptionReceived Events", float64(w.nodeEvents("InterruptionReceived"))},
	} {
		if c.got != 1 {
			t.Errorf("%s = %v, want exactly 1", c.what, c.got)
		}
	}
	// While held, lifeboat made no request at all besides its watch.
	if d := nonWatchDelta(lb0, lb1); len(d) > 0 {
		t.Errorf("lifeboat's API requests while the state was held (want none): %v", d)
	}
	// The server agrees: no eviction, node write or node list from anyone
	// meanwhile. (Pod lists and node gets are not checked here: earlier
	// tests' namespaces being deleted make the namespace controller list
	// pods, and kwok and the controllers read nodes now and then.)
	serverDelta := map[string]float64{}
	for k, v := range srv1 {
		if v != srv0[k] {
			serverDelta[k] = v - srv0[k]
		}
	}
	t.Logf("API server requests from every client while held: %v", serverDelta)
	for _, k := range []string{"POST pods/eviction", "PUT nodes", "PATCH nodes", "LIST nodes"} {
		if d := serverDelta[k]; d != 0 {
			t.Errorf("API server: %v %q requests while the state was held, want 0", d, k)
		}
	}
	// Over the whole test: one list of the node's pods to evict, one to
	// wait on, one eviction per pod, a few node writes.
	if got := lb1["POST pods/eviction"]; got != 3 {
		t.Errorf("evictions posted = %v, want 3", got)
	}
	if got := lb1["GET pods"]; got > 3 {
		t.Errorf("pod lists = %v, want ≤ 3", got)
	}
	var total float64
	for k, v := range lb1 {
		if !strings.HasPrefix(k, "WATCH ") {
			total += v
		}
	}
	if total > 20 {
		t.Errorf("lifeboat made %v API requests (watches aside) for one termination, want ≤ 20: %v", total, lb1)
	}
}

// every returns the period of path in polls (imdssrc.Periods).
func every(path string) int {
	for _, p := range imdssrc.Periods {
		if p.Path == path {
			return p.Every
		}
	}
	panic("no period for " + path)
}

// nonWatchDelta returns the request counts that changed between a and b,
// watches aside.
func nonWatchDelta(a, b map[string]float64) map[string]float64 {
	d := map[string]float64{}
	for k, v := range b {
		if !strings.HasPrefix(k, "WATCH ") && v != a[k] {
			d[k] = v - a[k]
		}
	}
	return d
}

// serverCounts reads the API server's request counters by "VERB resource".
func (w *world) serverCounts() map[string]float64 {
	w.t.Helper()
	c, err := kube.APIRequestCountsByResource(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

// inLead returns a maintenance start that is due now with the default
// --scheduled-change-lead (10m), yet far enough away that grace periods are
// not cut (the plan's deadline is NotBefore).
func inLead() time.Time { return time.Now().UTC().Truncate(time.Second).Add(5 * time.Minute) }

// 3. Scheduled system-reboot: active → cordon and drain; canceled →
// uncordon; a second one → cordon; lifeboat restarting without a reboot
// keeps the node cordoned; after the reboot (the kubelet reports a new
// boot ID) lifeboat uncordons it even though the metadata still lists the
// maintenance as active for a while.
func TestScheduledReboot(t *testing.T) {
	notBefore := inLead()
	active := testenv.IMDSOptions{Scenario: testenv.IMDSEvents, EventCode: imdssrc.CodeSystemReboot, EventState: imdssrc.StateActive,
		EventID: "instance-event-0aaaaaaaaaaaaaaaa", EventNotBefore: notBefore, EventNotAfter: notBefore.Add(2 * time.Hour)}
	w := newWorld(t, worldOptions{imds: active, bootID: "boot-1"})
	pod := w.pod(time.Second)
	cordoned := func() bool {
		n := w.nodeNow()
		_, tainted := taintValue(n, taintScheduled)
		return n.Spec.Unschedulable && tainted && n.Annotations[drain.AnnotationCordoned] == "true"
	}
	uncordoned := func() bool {
		n := w.nodeNow()
		return !n.Spec.Unschedulable && len(lifeboatTaints(n)) == 0 && n.Annotations[drain.AnnotationCordoned] == ""
	}
	w.eventually(20*time.Second, "the node cordoned for the maintenance", cordoned)
	w.eventually(20*time.Second, "the pod evicted", func() bool { return !w.podExists(pod) })
	first, ok := w.marker()
	if !ok || first.Code != imdssrc.CodeSystemReboot || first.BootID != "boot-1" || first.Rebooted {
		t.Fatalf("reboot marker = %+v (present %v), want system-reboot with boot ID boot-1", first, ok)
	}

	// AWS cancels it: lifeboat undoes its cordon.
	canceled := active
	canceled.EventState = imdssrc.StateCanceled
	w.restartIMDS(canceled)
	w.eventually(20*time.Second, "the node uncordoned after the cancellation", uncordoned)
	// Events are recorded asynchronously, a moment after the uncordon.
	w.eventually(10*time.Second, "the Uncordoned Event", func() bool { return w.nodeEvents("Uncordoned") >= 1 })
	if got := w.nodeEvents("Uncordoned"); got != 1 {
		t.Errorf("Uncordoned events = %d, want 1", got)
	}

	// A new reboot maintenance.
	second := active
	second.EventID = "instance-event-0bbbbbbbbbbbbbbbb"
	w.restartIMDS(second)
	w.eventually(20*time.Second, "the node cordoned for the second maintenance", cordoned)
	m, ok := w.marker()
	if !ok || m.EventID == first.EventID || m.BootID != "boot-1" {
		t.Fatalf("reboot marker = %+v, want the second maintenance on boot-1", m)
	}

	// lifeboat restarts (an upgrade, a crash) without a reboot: the node stays cordoned.
	if err := w.lb.Restart(w.ctx); err != nil {
		t.Fatal(err)
	}
	w.eventually(20*time.Second, "lifeboat ready again", func() bool { return w.readyz() == 200 })
	w.holds(3*time.Second, "the node cordoned after a restart without reboot", cordoned)

	// The reboot: the kubelet reports a new boot ID, lifeboat starts again,
	// and the metadata still lists the maintenance as active.
	w.lb.Stop()
	w.setBootID("boot-2")
	if err := w.lb.Restart(w.ctx); err != nil {
		t.Fatal(err)
	}
	w.eventually(20*time.Second, "the node uncordoned after the reboot", uncordoned)
	// lifeboat uncordons first and then marks the maintenance rebooted (a
	// crash between the two uncordons again on the next start; the other
	// order would leave the node cordoned), so the marker may lag the
	// uncordon by a write.
	w.eventually(5*time.Second, "the maintenance marked rebooted", func() bool {
		after, _ := w.marker()
		return after.Rebooted && after.EventID == m.EventID
	})
	w.holds(3*time.Second, "the node uncordoned while the maintenance is still listed", uncordoned)
	if got := w.metric("lifeboat_events_received_total", "kind", "scheduled-change"); got != 0 {
		t.Errorf("scheduled changes received after the reboot = %v, want 0 (already handled)", got)
	}
	if w.lb.CountLogs(`"msg":"Uncordoned"`, "rebooted for maintenance system-reboot") != 1 {
		t.Errorf("no log line for the uncordon after the reboot")
	}
}

// A maintenance canceled while lifeboat drains for it is undone at once.
func TestScheduledCanceledWhileDraining(t *testing.T) {
	notBefore := inLead()
	active := testenv.IMDSOptions{Scenario: testenv.IMDSEvents, EventCode: "instance-retirement", EventState: imdssrc.StateActive,
		EventID: "instance-event-0cccccccccccccccc", EventNotBefore: notBefore, EventNotAfter: notBefore.Add(time.Hour)}
	w := newWorld(t, worldOptions{imds: active})
	slow := w.pod(25 * time.Second)
	w.eventually(20*time.Second, "the drain to start", func() bool { return w.nodeEvents("Draining") == 1 })
	canceled := active
	canceled.EventState = imdssrc.StateCompleted
	w.restartIMDS(canceled)
	w.eventually(15*time.Second, "the node uncordoned while the pod still shuts down", func() bool {
		n := w.nodeNow()
		return !n.Spec.Unschedulable && len(lifeboatTaints(n)) == 0
	})
	if !w.podExists(slow) {
		t.Error("the slow pod is gone already: the test did not cancel mid-drain")
	}
	if got := w.nodeEvents("Drained"); got != 0 {
		t.Errorf("Drained events = %d, want 0 (canceled mid-drain)", got)
	}
}

// lifeboat undoes only what it did: a node an administrator cordoned stays
// cordoned after the maintenance is canceled; lifeboat's taint goes.
func TestScheduledCanceledOnAdminCordonedNode(t *testing.T) {
	notBefore := inLead()
	active := testenv.IMDSOptions{Scenario: testenv.IMDSEvents, EventCode: imdssrc.CodeInstanceReboot, EventState: imdssrc.StateActive,
		EventID: "instance-event-0dddddddddddddddd", EventNotBefore: notBefore, EventNotAfter: notBefore.Add(time.Hour)}
	w := newWorld(t, worldOptions{imds: active, cordoned: true})
	w.eventually(20*time.Second, "lifeboat's taint", func() bool { _, ok := taintValue(w.nodeNow(), taintScheduled); return ok })
	if w.nodeNow().Annotations[drain.AnnotationCordoned] != "" {
		t.Fatal("lifeboat claims the cordon of an already cordoned node")
	}
	canceled := active
	canceled.EventState = imdssrc.StateCanceled
	w.restartIMDS(canceled)
	w.eventually(20*time.Second, "lifeboat's taint removed", func() bool { return len(lifeboatTaints(w.nodeNow())) == 0 })
	w.holds(2*time.Second, "the administrator's cordon", func() bool { return w.nodeNow().Spec.Unschedulable })
}

// 4. A rebalance recommendation cordons and taints only (by default).
func TestRebalanceCordonsOnly(t *testing.T) {
	w := newWorld(t, worldOptions{imds: testenv.IMDSOptions{Scenario: testenv.IMDSRebalance, After: time.Second}})
	pod := w.pod(time.Second)
	w.eventually(20*time.Second, "the node cordoned and tainted", func() bool {
		n := w.nodeNow()
		_, ok := taintValue(n, taintRebalance)
		return n.Spec.Unschedulable && ok
	})
	w.holds(3*time.Second, "the pod running", func() bool { return w.podExists(pod) })
	if got := w.kubeRequests()["POST pods/eviction"]; got != 0 {
		t.Errorf("evictions posted = %v, want 0", got)
	}
	if got := w.metric("lifeboat_events_received_total", "kind", "rebalance-recommendation"); got != 1 {
		t.Errorf("rebalance events = %v, want 1 (the mock's noticeTime changes at every read)", got)
	}
	if got := w.nodeEvents("Drained"); got != 0 {
		t.Errorf("Drained events = %d, want 0", got)
	}
}

// 5. An IMDSv2-only metadata service works; when it goes down lifeboat
// keeps retrying (no crash), /readyz and lifeboat_source_healthy say so, and
// both recover, and a notice is acted on, when it returns.
func TestIMDSv2OnlyOutage(t *testing.T) {
	w := newWorld(t, worldOptions{imds: testenv.IMDSOptions{Scenario: testenv.IMDSQuiet, IMDSv2Only: true}, direct: true})
	healthy := func() bool { return w.readyz() == 200 && w.metric("lifeboat_source_healthy", "source", "imds") == 1 }
	w.eventually(20*time.Second, "ready with a healthy IMDSv2-only source", healthy)

	w.mock.Close()
	down := time.Now()
	w.eventually(15*time.Second, "not ready while IMDS is down", func() bool {
		return w.readyz() == 503 && w.metric("lifeboat_source_healthy", "source", "imds") == 0
	})
	t.Logf("not ready %v after IMDS went down", time.Since(down).Round(time.Millisecond))
	w.holds(12*time.Second, "lifeboat running and not ready", func() bool {
		exited, _ := w.lb.Exited()
		return !exited && w.readyz() == 503
	})
	if got := w.lb.CountLogs("instance metadata unavailable; retrying with backoff"); got != 1 {
		t.Errorf("outage logged %d times, want once", got)
	}

	back := w.imdsOpts
	back.Scenario, back.IMDSv2Only = testenv.IMDSSpot, true
	w.restartIMDS(back)
	up := time.Now()
	// The backoff is at most 10 s.
	w.eventually(15*time.Second, "ready again", healthy)
	t.Logf("ready %v after IMDS came back", time.Since(up).Round(time.Millisecond))
	w.eventually(10*time.Second, "the Spot notice acted on", func() bool { return w.nodeNow().Spec.Unschedulable })
	if got := w.lb.CountLogs("instance metadata available again"); got != 1 {
		t.Errorf("recovery logged %d times, want once", got)
	}
}

// Options that need a lifecycle action token are refused in IMDS mode at
// start, naming the option and the mode.
func TestTokenOptionsRefused(t *testing.T) {
	for _, flag := range []string{"--heartbeat-interval=30s", "--complete-lifecycle=true", "--lifecycle-timeout-result=ABANDON"} {
		t.Run(flag, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, lifeboatBin, "run", "--mode", "imds", "--node-name", "n", flag).CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("exit = %v, want status 2; output:\n%s", err, out)
			}
			name, _, _ := strings.Cut(flag, "=")
			for _, want := range []string{name + " is not supported in imds mode", "lifecycle action token"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("output does not say %q:\n%s", want, out)
				}
			}
		})
	}
}
