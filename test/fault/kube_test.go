package fault

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

// kubeScenario scales in one node (terminate lifecycle action) and
// interrupts another (Spot), each with pods, and returns a function that
// waits for and checks the outcome.
type kubeScenario struct {
	w              *world
	ns             string
	scaled, spot   string // instance IDs
	pods           []string
	scaledNodeName string
	spotNodeName   string
}

func newKubeScenario(w *world, podsPerNode int, shutdown func(i int) time.Duration) *kubeScenario {
	t := w.t
	group := "kube-" + testenv.UniqueName("g")
	ids := w.CreateGroup(group, 2)
	w.PutHook(group, "drain", terminating, 20, "ABANDON")
	s := &kubeScenario{w: w, ns: kube.Namespace(t), scaled: ids[0], spot: ids[1], scaledNodeName: w.NodeName(ids[0]), spotNodeName: w.NodeName(ids[1])}
	g, gctx := errgroup.WithContext(w.ctx)
	g.SetLimit(8)
	for n, node := range []string{s.scaledNodeName, s.spotNodeName} {
		for i := range podsPerNode {
			// By position, not by node name: two random node names may share
			// any prefix (a clean CI run hit "already exists").
			name := fmt.Sprintf("p-%d-%d", n, i)
			s.pods = append(s.pods, name)
			g.Go(func() error {
				_, err := kube.CreatePod(gctx, testenv.PodSpec{Namespace: s.ns, Name: name, Node: node, ShutdownAfter: shutdown(i)})
				return err
			})
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *kubeScenario) start() {
	s.w.terminate(s.scaled)
	s.w.spot(s.spot, time.Now())
}

// check waits for the outcome: the action completed by the API exactly
// once, every pod gone, the Spot node cordoned, tainted and drained, the
// queue empty, lifeboat running.
func (s *kubeScenario) check(d time.Duration) {
	w, t := s.w, s.w.t
	w.Eventually(d, "the terminate action to end", func() bool { a, ok := w.ActionFor(s.scaled, terminating); return ok && !a.Active() })
	a, _ := w.ActionFor(s.scaled, terminating)
	if a.CompletedBy != awssim.CompletedByAPI || a.Result != "CONTINUE" || a.Completions != 1 {
		t.Errorf("terminate action ended by %s with %q after %d completions; want one completion with CONTINUE by the API", a.CompletedBy, a.Result, a.Completions)
	}
	w.Eventually(d, "every pod gone", func() bool {
		for _, p := range s.pods {
			if _, err := kube.Client.CoreV1().Pods(s.ns).Get(w.ctx, p, metav1.GetOptions{}); err == nil {
				return false
			}
		}
		return true
	})
	w.Eventually(d, "the Spot node drained", func() bool {
		n, ok := w.LookupNode(s.spotNodeName)
		return ok && n.Annotations["lifeboat.io/drained"] != "" && n.Annotations["lifeboat.io/events"] == ""
	})
	n, _ := w.LookupNode(s.spotNodeName)
	if !n.Spec.Unschedulable || !testenv.HasTaint(n, "lifeboat.io/spot-interruption") {
		t.Errorf("Spot node: unschedulable=%v taints=%v", n.Spec.Unschedulable, n.Spec.Taints)
	}
	w.Eventually(d, "the queue to be empty", w.QueueEmpty)
	if exited, err := w.lb.Exited(); exited {
		t.Fatalf("lifeboat exited: %v", err)
	}
}

// TestKubeAPIServerRestartMidDrain kills kube-apiserver while pods are
// being evicted and keeps it down for 3 s: lifeboat's requests fail, its
// watches break; when the API server is back every drain and the lifecycle
// completion finish.
func TestKubeAPIServerRestartMidDrain(t *testing.T) {
	w := newWorld(t, worldOptions{flags: []string{"--unknown-instance", "delete"}})
	s := newKubeScenario(w, 3, func(i int) time.Duration { return time.Duration(3+i) * time.Second })
	s.start()
	w.Eventually(30*time.Second, "a pod terminating", func() bool {
		for _, node := range []string{s.scaledNodeName, s.spotNodeName} {
			for _, p := range w.pods(node) {
				if p.DeletionTimestamp != nil {
					return true
				}
			}
		}
		return false
	})
	restart := time.Now()
	if err := kube.RestartAPIServer(w.ctx, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver down and back in %v", time.Since(restart).Round(time.Millisecond))
	s.check(90 * time.Second)
}

// TestKubeNodeConflicts runs a concurrent writer that updates the same
// nodes as lifeboat in a tight loop (read-modify-write of a label, each
// write conflicting with lifeboat's): lifeboat's cordon, taints and
// annotations and the writer's label and taint all survive.
func TestKubeNodeConflicts(t *testing.T) {
	w := newWorld(t, worldOptions{flags: []string{"--unknown-instance", "delete"}})
	s := newKubeScenario(w, 2, func(i int) time.Duration { return time.Duration(2+i) * time.Second })
	ctx, stop := context.WithCancel(w.ctx)
	var wg sync.WaitGroup
	type counts struct{ writes, conflicts int }
	results := map[string]*counts{}
	for _, node := range []string{s.scaledNodeName, s.spotNodeName} {
		c := &counts{}
		results[node] = c
		wg.Go(func() {
			for ctx.Err() == nil {
				n, err := kube.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
				if err != nil {
					return // stopped, or the scaled-in node is gone
				}
				n.Labels["fault.lifeboat.io/writer"] = strconv.Itoa(c.writes + 1)
				if !testenv.HasTaint(n, "example.com/other-controller") {
					n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "example.com/other-controller", Value: "x", Effect: corev1.TaintEffectPreferNoSchedule})
				}
				_, err = kube.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
				switch {
				case err == nil:
					c.writes++
				case apierrors.IsConflict(err):
					c.conflicts++
				}
			}
		})
	}
	conflicts := func() float64 {
		raw, err := kube.Client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(w.ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The writer's updates (PUT) and lifeboat's patches (PATCH, with a
		// resourceVersion precondition) both conflict.
		var sum float64
		for _, verb := range []string{"PUT", "PATCH"} {
			v, err := testenv.SumMetric(raw, "apiserver_request_total", map[string]string{"resource": "nodes", "verb": verb, "code": "409"})
			if err != nil {
				t.Fatal(err)
			}
			sum += v
		}
		return sum
	}
	before := conflicts()
	s.start()
	w.Eventually(90*time.Second, "the Spot node drained", func() bool {
		n, ok := w.LookupNode(s.spotNodeName)
		return ok && n.Annotations["lifeboat.io/drained"] != ""
	})
	w.Eventually(90*time.Second, "the terminate action to end", func() bool { a, ok := w.ActionFor(s.scaled, terminating); return ok && !a.Active() })
	stop()
	wg.Wait()
	s.check(60 * time.Second)
	n, _ := w.LookupNode(s.spotNodeName)
	c := results[s.spotNodeName]
	all := conflicts() - before
	t.Logf("writer on the Spot node: %d writes, %d conflicts; node writes answered 409 Conflict: %v", c.writes, c.conflicts, all)
	if all == 0 {
		t.Error("no node update conflicted: no contention was tested")
	}
	// A lost write would leave an older value; the value may be one ahead
	// when the writer's last update was cut off by stop after the server
	// applied it.
	if got, _ := strconv.Atoi(n.Labels["fault.lifeboat.io/writer"]); got < c.writes {
		t.Errorf("writer's label = %d, want at least %d: a write was lost", got, c.writes)
	}
	if !testenv.HasTaint(n, "example.com/other-controller") {
		t.Error("the other controller's taint was lost")
	}
	if c.writes < 10 {
		t.Errorf("the writer made only %d writes: no contention was tested", c.writes)
	}
}

// TestKubePriorityAndFairness429 runs lifeboat as a ServiceAccount whose
// requests a FlowSchema puts into a priority level of the smallest
// concurrency that rejects what it cannot run at once (HTTP 429): drains of
// 30 pods on each node make lifeboat exceed it. Work completes, and the API
// server counts the rejections.
func TestKubePriorityAndFairness429(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := kube.Namespace(t)
	sa := "lifeboat"
	if _, err := kube.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := testenv.UniqueName("fault-lifeboat")
	if _, err := kube.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: binding},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	level := testenv.UniqueName("lifeboat-tiny")
	if _, err := kube.Client.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: level},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To[int32](1),
				LendablePercent:          ptr.To[int32](0),
				BorrowingLimitPercent:    ptr.To[int32](0),
				LimitResponse:            flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	all := []string{"*"}
	if _, err := kube.Client.FlowcontrolV1().FlowSchemas().Create(ctx, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: level},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: level},
			MatchingPrecedence:         100,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindServiceAccount,
					ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: ns, Name: sa}}},
				ResourceRules:    []flowcontrolv1.ResourcePolicyRule{{Verbs: all, APIGroups: all, Resources: all, ClusterScope: true, Namespaces: all}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: all, NonResourceURLs: all}},
			}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = kube.Client.FlowcontrolV1().FlowSchemas().Delete(ctx, level, metav1.DeleteOptions{})
		_ = kube.Client.FlowcontrolV1().PriorityLevelConfigurations().Delete(ctx, level, metav1.DeleteOptions{})
		_ = kube.Client.RbacV1().ClusterRoleBindings().Delete(ctx, binding, metav1.DeleteOptions{})
	})
	kubeconfig, err := kube.KubeconfigFor(ctx, ns, sa)
	if err != nil {
		t.Fatal(err)
	}
	rejected := func() float64 {
		raw, err := kube.Client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		v, err := testenv.SumMetric(raw, "apiserver_flowcontrol_rejected_requests_total", map[string]string{"priority_level": level})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	w := newWorld(t, worldOptions{kubeconfig: kubeconfig, flags: []string{"--unknown-instance", "delete"}})
	s := newKubeScenario(w, 30, func(i int) time.Duration { return time.Second + time.Duration(i%5)*200*time.Millisecond })
	s.start()
	s.check(2 * time.Minute)
	got := rejected()
	t.Logf("API server rejected %v of lifeboat's requests with 429 (priority level %s)", got, level)
	if got == 0 {
		t.Error("no request of lifeboat was rejected: the test exercised no 429")
	}
}
