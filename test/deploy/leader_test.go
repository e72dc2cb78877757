package deploy

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

// Leader election with the chart's settings: two replicas of the real
// binary, only the Lease holder acting. The leader is taken away in the
// middle of a drain for a terminate lifecycle action (a pod that needs 16 s
// to stop, a hook with a 14 s heartbeat timeout, heartbeats at lifeboat's
// default interval of half that), just before its next heartbeat is due:
// the worst moment. The standby takes over within the lease time, resumes the drain
// from what the leader recorded on the node, heartbeats before the hook
// times out, and completes the action once; the queue message is deleted
// once.
//
// Killed (SIGKILL) is the easy case. Paused (SIGSTOP) is the hard one: the
// old leader does not know it lost the lease; when it runs again (SIGCONT)
// it must exit without acting. What each replica did is read from proxies
// in front of the API server, SQS and Auto Scaling (one set per replica).
func TestLeaderElection(t *testing.T) {
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
	}{
		{"leader killed mid-drain", syscall.SIGKILL},
		{"leader paused mid-drain then resumed", syscall.SIGSTOP},
	} {
		t.Run(tc.name, func(t *testing.T) { leaderScenario(t, tc.sig) })
	}
}

// replica is one lifeboat process with its recording proxies.
type replica struct {
	name          string
	p             *proc
	kube, sqs, as *proxy
}

const (
	leaseDuration = 3 * time.Second
	hookTimeout   = 14 // seconds
	// retryPeriod is lifeboat's leader-election retry period (lease/6);
	// client-go waits up to 1.2 times it between tries.
	retryPeriod = leaseDuration / 6
)

func leaderScenario(t *testing.T, sig syscall.Signal) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w, err := newWorld(t, ctx, map[string]any{
		"leaderElection":    map[string]any{"enabled": true, "leaseDuration": leaseDuration.String()},
		"visibilityTimeout": "10s",
		"evictionBackoff":   "500ms",
	})
	if err != nil {
		t.Fatal(err)
	}
	applyForTest(t, w.rbacObjects())
	group, ids, err := w.createGroup(1)
	if err != nil {
		t.Fatal(err)
	}
	node := nodeOf(ids[0])
	if err := w.putHook(group, hookTimeout); err != nil {
		t.Fatal(err)
	}
	pod, err := kube.CreatePod(ctx, testenv.PodSpec{Namespace: w.ns, Node: node, Grace: 60 * time.Second, ShutdownAfter: 16 * time.Second})
	if err != nil {
		t.Fatal(err)
	}

	leaseName := settings(w.container())["LEASE_NAME"]
	holder := func() string {
		l, err := kube.Client.CoordinationV1().Leases(w.ns).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	start := func(name string) *replica {
		r := &replica{name: name,
			kube: startProxy(t, kube.URL, kubeTransport(), true),
			sqs:  startProxy(t, moto.Endpoint, nil, false),
			as:   startProxy(t, sim.Endpoint(), nil, false),
		}
		kc, err := w.kubeconfig(r.kube.URL, r.kube.CA)
		if err != nil {
			t.Fatal(err)
		}
		r.p, err = w.startLifeboat(lifeboatOptions{name: name, kubeconfig: kc, endpoints: endpoints(r.sqs.URL, r.as.URL)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	a := start(w.release + "-a")
	must(eventually(ctx, 10*time.Second, "replica a to lead", func() (bool, error) { return holder() == a.name, a.p.healthy() }))
	b := start(w.release + "-b")
	time.Sleep(time.Second)
	if h := holder(); h != a.name {
		t.Fatalf("lease holder %q after the standby started, want %q", h, a.name)
	}

	must(w.scaleTo(group, 0))
	// a drains: the pod is shutting down, and a has sent a heartbeat.
	var firstBeat time.Time
	must(eventually(ctx, 20*time.Second, "a draining with a heartbeat sent", func() (bool, error) {
		beats := okCalls(a.as, "RecordLifecycleActionHeartbeat")
		p, err := kube.Client.CoreV1().Pods(w.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if len(beats) == 0 || p.DeletionTimestamp == nil {
			return false, nil
		}
		firstBeat = beats[0].at
		return true, nil
	}))
	// Take a away just before its next heartbeat is due (half the hook's
	// timeout after the last one, lifeboat's default).
	interval := hookTimeout * time.Second / 2
	time.Sleep(time.Until(firstBeat.Add(interval - 500*time.Millisecond)))
	if n := len(okCalls(a.as, "RecordLifecycleActionHeartbeat")); n != 1 {
		t.Fatalf("a sent %d heartbeats before it was taken away; the scenario wants the moment just before its second", n)
	}
	lastBeatOfA := firstBeat
	takenAway := time.Now()
	if sig == syscall.SIGKILL {
		a.p.kill()
	} else {
		must(a.p.signal(syscall.SIGSTOP))
	}
	t.Logf("a taken away (%v) %v after its last heartbeat", sig, takenAway.Sub(lastBeatOfA).Round(time.Millisecond))

	// b takes over within the lease time.
	must(eventually(ctx, leaseDuration+5*time.Second, "b to lead", func() (bool, error) { return holder() == b.name, b.p.healthy() }))
	takeover := time.Since(takenAway)
	t.Logf("b leads %v after a was taken away (lease %v)", takeover.Round(time.Millisecond), leaseDuration)
	// The standby sees the last renewal up to one (jittered) retry period
	// late, and tries again up to one retry period after the lease ran out.
	if limit := leaseDuration + 2*retryPeriod*12/10 + 500*time.Millisecond; takeover > limit {
		t.Errorf("takeover took %v; want within the lease duration %v plus two retry periods (%v)", takeover, leaseDuration, limit)
	}
	// b heartbeats: the action is kept alive.
	must(eventually(ctx, 10*time.Second, "b to heartbeat", func() (bool, error) {
		return len(okCalls(b.as, "RecordLifecycleActionHeartbeat")) > 0, b.p.healthy()
	}))
	firstBeatOfB := okCalls(b.as, "RecordLifecycleActionHeartbeat")[0].at
	t.Logf("heartbeats: a's last %v before it was taken away, b's first %v after (hook timeout %ds)",
		takenAway.Sub(lastBeatOfA).Round(time.Millisecond), firstBeatOfB.Sub(takenAway).Round(time.Millisecond), hookTimeout)

	resumed := time.Time{}
	if sig == syscall.SIGSTOP {
		// a runs again while b drains: it must exit, not act.
		resumed = time.Now()
		must(a.p.signal(syscall.SIGCONT))
		// Its exit takes noticing the lost Lease, then its long polls in
		// flight (up to 5 s: the SQS source lets them finish so that SQS
		// cannot give a handed-back message to an abandoned poll), then
		// handing back what it holds.
		must(eventually(ctx, 20*time.Second, "the resumed old leader to exit", func() (bool, error) {
			done, _ := a.p.exited()
			return done, nil
		}))
		_, exitErr := a.p.exited()
		t.Logf("old leader exited %v after SIGCONT: %v", time.Since(resumed).Round(time.Millisecond), exitErr)
		if exitErr == nil {
			t.Errorf("the old leader exited with status 0 after losing its lease; want a failure (its pod restarts and stands by)")
		}
	}

	var act awssim.Action
	must(eventually(ctx, 30*time.Second, "the terminate lifecycle action to end", func() (bool, error) {
		var ok bool
		act, ok = action(ids[0], terminating)
		return ok && !act.Active(), b.p.healthy()
	}))
	if act.CompletedBy != awssim.CompletedByAPI || act.Result != "CONTINUE" || act.Completions != 1 || act.Rejected != 0 {
		t.Errorf("action ended by %s with %q: %d completions, %d rejected calls; want one CompleteLifecycleAction CONTINUE and no call after it",
			act.CompletedBy, act.Result, act.Completions, act.Rejected)
	}
	// The simulator records the completion before its answer is back
	// through b's proxy.
	if err := eventually(ctx, 3*time.Second, "b's completion call answered", func() (bool, error) {
		return len(okCalls(b.as, "CompleteLifecycleAction")) == 1, nil
	}); err != nil {
		t.Errorf("b did not complete the action exactly once: %v (%d calls)", err, len(okCalls(b.as, "CompleteLifecycleAction")))
	}
	if n := len(okCalls(a.as, "CompleteLifecycleAction")); n != 0 {
		t.Errorf("a completed the action %d times, want 0", n)
	}
	if _, err := kube.Client.CoreV1().Pods(w.ns).Get(ctx, pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod still there after the action completed (%v)", err)
	}
	if took := act.Completed.Sub(act.Started); took < 15*time.Second {
		t.Errorf("the action completed %v after it started; the pod needs 16 s to stop", took)
	}
	must(eventually(ctx, 25*time.Second, "the queue to be empty", w.queueEmpty))
	deleted := deletedMessages(a.sqs, b.sqs)
	id := lifecycleMessage(act.Token, a.sqs, b.sqs)
	if id == "" {
		t.Fatal("the lifecycle action's message was never received")
	}
	if deleted[id] != 1 {
		t.Errorf("the lifecycle message was deleted %d times, want once (deletions: %v)", deleted[id], deleted)
	}

	// Who acted when: a before it was taken away and never after; b only
	// once it led.
	for _, c := range actions(a) {
		if c.at.After(takenAway) {
			t.Errorf("a acted after it was taken away (resumed at %v): %s %s %s at %v", resumed.Format(time.StampMilli), c.method, c.path, c.action, c.at.Format(time.StampMilli))
		}
	}
	for _, c := range actions(b) {
		if c.at.Before(takenAway) {
			t.Errorf("b acted while it stood by: %s %s %s at %v", c.method, c.path, c.action, c.at.Format(time.StampMilli))
		}
	}
	if sig == syscall.SIGSTOP && !strings.Contains(a.p.log(), "lost the leader lease") {
		t.Errorf("the old leader's log does not say it lost the lease:\n%s", a.p.tail(15))
	}
}

// actions are a replica's calls that act: writes to the Kubernetes API other
// than its own leader election, and AWS calls that change something or take
// messages.
func actions(r *replica) []call {
	var out []call
	for _, c := range r.kube.writes() {
		if !strings.Contains(c.path, "/apis/coordination.k8s.io/") {
			out = append(out, c)
		}
	}
	out = append(out, r.as.writes("RecordLifecycleActionHeartbeat", "CompleteLifecycleAction")...)
	out = append(out, r.sqs.writes("ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch")...)
	slices.SortFunc(out, func(x, y call) int { return x.at.Compare(y.at) })
	return out
}

// okCalls are the successful calls of an AWS action through p, in order.
func okCalls(p *proxy, action string) []call {
	var out []call
	for _, c := range p.snapshot() {
		if c.action == action && c.status == http.StatusOK {
			out = append(out, c)
		}
	}
	return out
}

// lifecycleMessage returns the ID of the SQS message that carried the
// lifecycle action token, as received through the proxies.
func lifecycleMessage(token string, ps ...*proxy) string {
	for _, p := range ps {
		for _, c := range p.snapshot() {
			if c.action != "ReceiveMessage" || !strings.Contains(string(c.respBody), token) {
				continue
			}
			var out struct {
				Messages []struct{ MessageId, Body string }
			}
			if err := json.Unmarshal(c.respBody, &out); err != nil {
				continue
			}
			for _, m := range out.Messages {
				if strings.Contains(m.Body, token) {
					return m.MessageId
				}
			}
		}
	}
	return ""
}
