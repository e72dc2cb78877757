package fault

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

// killPoint is where in a scenario lifeboat is killed with SIGKILL.
type killPoint string

const (
	// killAfterReceive: SQS answered a receive with the scenario's
	// messages; lifeboat has not acted on them yet (the answer is lost).
	killAfterReceive killPoint = "after-receive"
	// killAfterCordon: a node of the scenario was seen cordoned.
	killAfterCordon killPoint = "after-cordon"
	// killMidEviction: a pod of the scenario was seen terminating.
	killMidEviction killPoint = "mid-eviction"
	// killBetweenHeartbeats: one lifecycle heartbeat went through; the
	// next one is about to be sent (the longest time without heartbeat).
	killBetweenHeartbeats killPoint = "between-heartbeats"
	// killBeforeCompletion: CompleteLifecycleAction is on its way and
	// never reaches Auto Scaling.
	killBeforeCompletion killPoint = "before-completion"
	// killAfterCompletion: CompleteLifecycleAction reached Auto Scaling,
	// its answer is lost.
	killAfterCompletion killPoint = "after-completion"
	// killBeforeDelete: the work is done and DeleteMessage is on its way;
	// it never reaches SQS.
	killBeforeDelete killPoint = "before-delete"
	// killRandom: after a random delay of 0-6 s into the scenario.
	killRandom killPoint = "random"
)

var killPoints = []killPoint{killAfterReceive, killAfterCordon, killMidEviction, killBetweenHeartbeats,
	killBeforeCompletion, killAfterCompletion, killBeforeDelete, killRandom}

// deadPollBound is how long after a kill a long poll of the killed process
// may still be open at SQS: lifeboat's long poll (5 s, internal/source/sqs)
// and a second for moto to answer it.
const deadPollBound = 6 * time.Second

// TestCrashMidWork kills lifeboat (SIGKILL) at each named point of a
// scenario, and at random points, and restarts it. Each iteration scales in
// one node of a group with a terminate lifecycle hook (drain, heartbeats,
// completion), interrupts a second node with a Spot notice, and leaves a
// third alone. Whatever the kill point, in the end: every pod of the two
// nodes is gone, the lifecycle action was completed by the API exactly once
// (a repeat answers "No active Lifecycle Action", which is fine), never by
// a timeout; the Spot node is cordoned, tainted and marked drained; the
// bystander carries no mark of lifeboat; the queue is empty. One iteration
// per named point runs in CI (in an order drawn from the seed), plus
// LIFEBOAT_FAULT_ITERATIONS random ones; LIFEBOAT_FAULT_POINTS (comma-separated)
// runs only the named points.
func TestCrashMidWork(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 0))
	points := slices.Clone(killPoints)
	rng.Shuffle(len(points), func(i, j int) { points[i], points[j] = points[j], points[i] })
	for range envInt(t, "LIFEBOAT_FAULT_ITERATIONS", 0) {
		points = append(points, killPoints[rng.IntN(len(killPoints))])
	}
	if v := os.Getenv("LIFEBOAT_FAULT_POINTS"); v != "" {
		points = nil
		for _, p := range strings.Split(v, ",") {
			if !slices.Contains(killPoints, killPoint(p)) {
				t.Fatalf("LIFEBOAT_FAULT_POINTS: unknown kill point %q; known: %v", p, killPoints)
			}
			points = append(points, killPoint(p))
		}
	}
	w := newWorld(t, worldOptions{
		// Messages about instances that are no longer nodes (the scaled-in
		// one, once terminated) are deleted: the queue must end empty.
		flags:   []string{"--unknown-instance", "delete"},
		timeout: time.Duration(len(points))*time.Minute + time.Minute,
	})
	ns := kube.Namespace(t)
	kills := 0
	start := time.Now()
	for i, point := range points {
		kills += w.crashIteration(ns, rng, i, point)
	}
	t.Logf("%d iterations, %d kills and restarts (%d runs of lifeboat) in %v", len(points), kills, w.lb.Runs(), time.Since(start).Round(time.Second))
}

// crashIteration runs one scenario with a kill at point (and, one time in
// four, a second kill at a random time after the restart), checks the
// outcome and returns the number of kills.
func (w *world) crashIteration(ns string, rng *rand.Rand, i int, point killPoint) int {
	t := w.t
	iterStart := time.Now()
	group := fmt.Sprintf("crash%02d-%s", i, testenv.UniqueName("g"))
	ids := w.CreateGroup(group, 3)
	scaled, spot, bystander := ids[0], ids[1], ids[2]
	// The hook's timeout outlasts a message's redelivery after a kill: a
	// long poll of the killed process still open at SQS (up to 20 s) may
	// take the message, which then stays invisible for the 10 s visibility
	// timeout. The heartbeat point uses 10 s: heartbeats every 5 s, and a
	// kill just before the second one leaves a restarted lifeboat 5 s to
	// resume them from the node's annotations (its messages were received
	// long before and may still be invisible).
	timeout := int32(45)
	if point == killBetweenHeartbeats {
		timeout = 10
	}
	w.PutHook(group, "drain", terminating, timeout, "ABANDON")

	// Pods: short shutdowns, except that the heartbeat point needs a drain
	// that outlasts two heartbeat intervals.
	var mu sync.Mutex
	var pods []string
	g, gctx := errgroup.WithContext(w.ctx)
	for _, id := range ids {
		for k := range 3 {
			shutdown := 500*time.Millisecond + time.Duration(rng.IntN(1500))*time.Millisecond
			if point == killBetweenHeartbeats && id == scaled && k == 0 {
				shutdown = 16 * time.Second
			}
			node := w.NodeName(id)
			g.Go(func() error {
				p, err := kube.CreatePod(gctx, testenv.PodSpec{Namespace: ns, Node: node, Grace: 60 * time.Second, ShutdownAfter: shutdown})
				if err != nil {
					return err
				}
				if node != w.NodeName(bystander) {
					mu.Lock()
					pods = append(pods, p.Name)
					mu.Unlock()
				}
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}

	killed := make(chan time.Time, 1)
	var once sync.Once
	kill := func() {
		once.Do(func() {
			w.lb.Kill()
			w.lastKill = time.Now() // read after <-killed, which orders it
			killed <- w.lastKill
		})
	}
	ours := func(b []byte) bool {
		return bytes.Contains(b, []byte(scaled)) || bytes.Contains(b, []byte(spot))
	}
	completed := func() bool { a, ok := w.ActionFor(scaled, terminating); return ok && !a.Active() }
	heartbeats := 0
	stop := make(chan struct{})
	defer close(stop)
	poll := func(cond func() bool) {
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-killed:
					return
				case <-time.After(10 * time.Millisecond):
				}
				if cond() {
					kill()
					return
				}
			}
		}()
	}
	switch point {
	case killAfterReceive:
		w.sqsProxy.SetIntercept(func(x testenv.Exchange) bool {
			if x.Stage == testenv.AfterResponse && x.Action == "ReceiveMessage" && ours(x.Response) {
				kill()
				return false
			}
			return true
		})
	case killBetweenHeartbeats:
		w.asProxy.SetIntercept(func(x testenv.Exchange) bool {
			if x.Action == "RecordLifecycleActionHeartbeat" && x.Stage == testenv.BeforeForward {
				heartbeats++ // one goroutine sends heartbeats for the action
				if heartbeats == 2 {
					kill()
					return false
				}
			}
			return true
		})
	case killBeforeCompletion, killAfterCompletion:
		stage := map[killPoint]testenv.Stage{killBeforeCompletion: testenv.BeforeForward, killAfterCompletion: testenv.AfterResponse}[point]
		w.asProxy.SetIntercept(func(x testenv.Exchange) bool {
			if x.Action == "CompleteLifecycleAction" && x.Stage == stage {
				kill()
				return false
			}
			return true
		})
	case killBeforeDelete:
		w.sqsProxy.SetIntercept(func(x testenv.Exchange) bool {
			if x.Action == "DeleteMessage" && x.Stage == testenv.BeforeForward && completed() {
				kill()
				return false
			}
			return true
		})
	case killAfterCordon:
		poll(func() bool {
			for _, id := range []string{scaled, spot} {
				if n, ok := w.LookupNode(w.NodeName(id)); ok && n.Spec.Unschedulable {
					return true
				}
			}
			return false
		})
	case killMidEviction:
		poll(func() bool {
			for _, id := range []string{scaled, spot} {
				for _, p := range w.pods(w.NodeName(id)) {
					if p.DeletionTimestamp != nil {
						return true
					}
				}
			}
			return false
		})
	case killRandom:
		at := time.Now().Add(time.Duration(rng.IntN(6000)) * time.Millisecond)
		poll(func() bool { return time.Now().After(at) })
	}

	// A long poll the killed process left open at SQS (lifeboat's are
	// 5 s) takes a message sent meanwhile and hides it for the 10 s
	// visibility timeout: the heartbeat point's 10 s hook would time out
	// before lifeboat saw its action (CI: the previous iteration's kill
	// 1 s before, the message received 10 s late, "kill point
	// between-heartbeats never reached"). Its events wait for that poll to
	// end; the other points' 45 s hooks outlast it.
	if point == killBetweenHeartbeats && !w.lastKill.IsZero() {
		if wait := time.Until(w.lastKill.Add(deadPollBound)); wait > 0 {
			select {
			case <-time.After(wait):
			case <-w.ctx.Done():
				t.Fatal(w.ctx.Err())
			}
		}
	}
	scenarioStart := time.Now()
	w.terminate(scaled)
	w.spot(spot, time.Now())
	kills := 0
	select {
	case at := <-killed:
		kills++
		t.Logf("iteration %d (%s): killed lifeboat %v after the scale-in and the Spot notice were sent", i, point, at.Sub(scenarioStart).Round(time.Millisecond))
	case <-time.After(45 * time.Second):
		t.Fatalf("iteration %d: kill point %s never reached", i, point)
	}
	w.sqsProxy.SetIntercept(nil)
	w.asProxy.SetIntercept(nil)
	w.restart()
	// One time in four, a second kill at a random time after the restart.
	// Not at the heartbeat point: there the restarted process has only half
	// of the (test-sized) 10 s timeout left to resume heartbeats, which a
	// second kill and restart would eat. (AWS's minimum timeout is 30 s.)
	if second := rng.IntN(4) == 0; second && point != killBetweenHeartbeats {
		d := time.Duration(rng.IntN(3000)) * time.Millisecond
		select {
		case <-time.After(d):
		case <-w.ctx.Done():
			t.Fatal(w.ctx.Err())
		}
		w.lb.Kill()
		w.lastKill = time.Now()
		kills++
		t.Logf("iteration %d: killed lifeboat again %v after the restart", i, d)
		w.restart()
	}

	// The outcome.
	w.Eventually(60*time.Second, "the terminate action to end", completed)
	a, _ := w.ActionFor(scaled, terminating)
	if a.CompletedBy != awssim.CompletedByAPI || a.Result != "CONTINUE" || a.Completions != 1 {
		t.Fatalf("iteration %d (%s): terminate action %+v; want completed once with CONTINUE by the API", i, point, a)
	}
	w.Eventually(60*time.Second, "every pod of the two interrupted nodes gone", func() bool {
		for _, p := range pods {
			if _, err := kube.Client.CoreV1().Pods(ns).Get(w.ctx, p, metav1.GetOptions{}); err == nil {
				return false
			}
		}
		return true
	})
	spotNode := w.NodeName(spot)
	w.Eventually(60*time.Second, "the Spot node marked drained", func() bool {
		n, ok := w.LookupNode(spotNode)
		return ok && n.Annotations["lifeboat.io/drained"] != "" && n.Annotations["lifeboat.io/events"] == ""
	})
	n, _ := w.LookupNode(spotNode)
	if !n.Spec.Unschedulable || !testenv.HasTaint(n, "lifeboat.io/spot-interruption") {
		t.Fatalf("iteration %d (%s): Spot node %s: unschedulable=%v taints=%v", i, point, spotNode, n.Spec.Unschedulable, n.Spec.Taints)
	}
	if n, ok := w.LookupNode(w.NodeName(bystander)); !ok || len(lifeboatMarks(n)) > 0 {
		t.Fatalf("iteration %d (%s): bystander node: present=%v marks=%v", i, point, ok, lifeboatMarks(n))
	}
	w.Eventually(60*time.Second, "the queue to be empty", w.QueueEmpty)
	if exited, err := w.lb.Exited(); exited {
		t.Fatalf("iteration %d: lifeboat exited: %v", i, err)
	}
	if a.Rejected > 0 {
		t.Logf("iteration %d: %d repeated lifecycle calls answered \"No active Lifecycle Action\"", i, a.Rejected)
	}
	// Leave no node behind for the next iteration.
	for _, id := range []string{spot, bystander} {
		_ = kube.DeleteNode(w.ctx, w.NodeName(id))
	}
	t.Logf("iteration %d (%s) held in %v (heartbeats %d)", i, point, time.Since(iterStart).Round(time.Millisecond), a.Heartbeats)
	return kills
}
