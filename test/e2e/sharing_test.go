package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/intake"
	"lifeboat.dev/lifeboat/internal/route"
	"lifeboat.dev/lifeboat/test/awssim"
	"lifeboat.dev/lifeboat/test/testenv"
)

// spotNode is a kwok node with a pod, in one of the clusters, and what the
// test saw happen to it.
type spotNode struct {
	cluster  string
	client   kubernetes.Interface
	name, id string
	cordoned time.Duration // after the notice was put; 0: not yet
	drained  time.Duration
}

// poll records when the node was first seen cordoned and marked drained.
func (n *spotNode) poll(ctx context.Context, since time.Time) {
	got, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		return
	}
	if n.cordoned == 0 && got.Spec.Unschedulable {
		n.cordoned = time.Since(since)
	}
	if n.drained == 0 && got.Annotations["lifeboat.io/drained"] != "" {
		n.drained = time.Since(since)
	}
}

// Issue 17 section 4, several clusters on one queue: two clusters (two API
// servers, each with its own kwok nodes) and two lifeboats with their own
// --cluster-name consume ONE queue. A notice for a node of cluster b is put
// while only a's lifeboat consumes: a hands it back until b's lifeboat
// starts and takes it. Then Spot notices for three nodes of each arrive
// together. Which consumer receives a message is a lottery each time it
// becomes visible, so the test holds what lifeboat controls, not the
// lottery's outcome: every node is cordoned and drained by its own
// cluster's lifeboat, each message received by its owner once and last, and
// a foreign one handed back on time: visible again at once after its first
// receive, after 1 s for the next ones (intake.HandBackDelay), never hidden
// for the visibility timeout (30 s) as when an extension landed after the
// hand-back.
func TestTwoClustersOneQueue(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	lbA := h.Lifeboat
	kubeB := testenv.Start(t, testenv.Options{NoScheduler: true})
	nsA, nsB := kube.Namespace(t), kubeB.Namespace(t)
	newNode := func(cluster string) *spotNode {
		env, ns := kube, nsA
		if cluster == "b" {
			env, ns = kubeB, nsB
		}
		id := testenv.RandomInstanceID()
		n := env.Node(t, testenv.NodeSpec{InstanceID: id})
		if _, err := env.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: n.Name, ShutdownAfter: 500 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		return &spotNode{cluster: cluster, client: env.Client, name: n.Name, id: id}
	}
	notice := func(n *spotNode) {
		h.PutEvent(route.SourceEC2, route.SpotInterruption, time.Now(), map[string]string{"instance-id": n.id, "instance-action": "terminate"})
	}
	if err := lbA.WaitLog(h.Ctx, "consuming queue"); err != nil {
		t.Fatal(err)
	}
	early := newNode("b")
	earlyPut := time.Now()
	notice(early)
	h.Eventually(10*time.Second, "lifeboat a to receive the notice of cluster b's node", func() bool {
		n, err := lbA.Metric(h.Ctx, "lifeboat_unknown_instance_events_total", nil)
		return err == nil && n >= 1
	})
	lbB := h.StartLifeboat(testenv.ScenarioLifeboat{Kubeconfig: kubeB.Kubeconfig, Args: []string{"--cluster-name", clusterName + "-b"}})
	h.Lifeboat = lbA
	var together []*spotNode
	for i := range 6 {
		together = append(together, newNode([]string{"a", "b"}[i%2]))
	}
	all := append([]*spotNode{early}, together...)
	// Both lifeboats are consuming before the notices are put.
	if err := lbB.WaitLog(h.Ctx, "consuming queue"); err != nil {
		t.Fatal(err)
	}
	put := time.Now()
	for _, n := range together {
		notice(n)
	}
	h.Eventually(20*time.Second, "every node cordoned and drained by its cluster's lifeboat", func() bool {
		early.poll(h.Ctx, earlyPut)
		done := early.drained > 0
		for _, n := range together {
			n.poll(h.Ctx, put)
			done = done && n.drained > 0
		}
		return done
	})
	t.Logf("cluster b's node noticed while only lifeboat a consumed: cordoned %v after its notice", early.cordoned.Round(time.Millisecond))
	var cordons []time.Duration
	for _, n := range together {
		t.Logf("cluster %s node %s: cordoned %v, drained %v after the notices were put", n.cluster, n.name, n.cordoned.Round(time.Millisecond), n.drained.Round(time.Millisecond))
		cordons = append(cordons, n.cordoned)
	}
	slices.Sort(cordons)
	t.Logf("cordons after the notices put together: median %v, slowest %v (a lottery among eight long polls)", cordons[len(cordons)/2].Round(time.Millisecond), cordons[len(cordons)-1].Round(time.Millisecond))
	h.Eventually(10*time.Second, "every message deleted by its owner", h.QueueEmpty)

	got := receiptsOf(t, map[string]*testenv.Lifeboat{"a": lbA, "b": lbB})
	foreign := 0
	for _, n := range all {
		rs := got[n.id]
		foreign += len(rs) - 1
		if len(rs) == 0 || rs[len(rs)-1].by != n.cluster || !rs[len(rs)-1].own {
			t.Errorf("instance %s of cluster %s: receipts %v; want its own lifeboat's last", n.id, n.cluster, rs)
			continue
		}
		for i, r := range rs[:len(rs)-1] {
			if r.own || r.by == n.cluster {
				t.Errorf("instance %s of cluster %s: receipt %d %v before the last; want only the other lifeboat's", n.id, n.cluster, i+1, r)
			}
			// The i+1-th receive hands it back for HandBackDelay(i+1); a
			// waiting long poll sees it within moto's 150 ms recheck.
			gap, want := rs[i+1].at.Sub(r.at), intake.HandBackDelay(i+1)+handBackSlack
			if gap > want {
				t.Errorf("instance %s of cluster %s: receive %d came %v after receive %d; want ≤ %v (handed back after %v)", n.id, n.cluster, i+2, gap.Round(time.Millisecond), i+1, want, intake.HandBackDelay(i+1))
			}
		}
	}
	if len(got[early.id]) < 2 {
		t.Errorf("cluster b's early notice was received %d times; want lifeboat a's receive (and hand-back) before lifeboat b's", len(got[early.id]))
	}
	t.Logf("messages of the other cluster received: %d in all", foreign)
}

// handBackSlack is how late a handed-back message may be received again
// beyond its delay: moto's long polls look every 50-150 ms
// (test/testenv/motoserver.py), plus the two lifeboats' work on a loaded
// 2-core machine. A message hidden for the visibility timeout is 30 s late.
const handBackSlack = 750 * time.Millisecond

// receipt is one lifeboat's receive of a Spot notice, from its log: own
// when lifeboat took it as its cluster's (InterruptionReceived), else
// handed back as another cluster's.
type receipt struct {
	by  string
	own bool
	at  time.Time
}

// receiptsOf reads every Spot notice's receives from the lifeboats' logs,
// by instance ID, in time order.
func receiptsOf(t *testing.T, lbs map[string]*testenv.Lifeboat) map[string][]receipt {
	t.Helper()
	out := map[string][]receipt{}
	for name, lb := range lbs {
		for _, line := range lb.Logs() {
			var l struct {
				Time       time.Time `json:"time"`
				Msg        string    `json:"msg"`
				InstanceID string    `json:"instanceID"`
			}
			if json.Unmarshal([]byte(line), &l) != nil || l.InstanceID == "" {
				continue
			}
			switch {
			case l.Msg == "InterruptionReceived":
				out[l.InstanceID] = append(out[l.InstanceID], receipt{by: name, own: true, at: l.Time})
			case l.Msg == "event for an instance that is not a node of this cluster":
				out[l.InstanceID] = append(out[l.InstanceID], receipt{by: name, at: l.Time})
			}
		}
	}
	for _, rs := range out {
		slices.SortFunc(rs, func(a, b receipt) int { return a.at.Compare(b.at) })
	}
	return out
}

// Issue 17 section 4, Karpenter coexistence and node scope: nodes with
// karpenter.sh/nodepool are left to Karpenter by default, taken with
// --karpenter-nodes=handle; --node-selector limits the nodes lifeboat acts
// on. A message about a node out of scope is treated like one about
// another cluster's instance: handed back (--unknown-instance=leave, the
// default) or deleted (delete).
func TestKarpenterAndNodeScope(t *testing.T) {
	type kind string
	const (
		plain     kind = "plain"
		karpenter kind = "karpenter"
		teamA     kind = "team-a"
	)
	labels := map[kind]map[string]string{
		plain:     nil,
		karpenter: {"karpenter.sh/nodepool": "default", "karpenter.sh/registered": "true"},
		teamA:     {"lifeboat.test/team": "a"},
	}
	for _, tc := range []struct {
		name       string
		flags      []string
		acted      []kind // the others stay untouched
		queueEmpty bool   // else the skipped nodes' messages are left in the queue
	}{
		{"default: Karpenter's nodes skipped", nil, []kind{plain, teamA}, false},
		{"--karpenter-nodes=handle", []string{"--karpenter-nodes", "handle"}, []kind{plain, karpenter, teamA}, true},
		{"--node-selector", []string{"--node-selector", "lifeboat.test/team=a"}, []kind{teamA}, false},
		{"skipped with --unknown-instance=delete", []string{"--unknown-instance", "delete"}, []kind{plain, teamA}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{flags: tc.flags})
			ns := kube.Namespace(t)
			nodes := map[kind]*spotNode{}
			for _, k := range []kind{plain, karpenter, teamA} {
				id := testenv.RandomInstanceID()
				n := kube.Node(t, testenv.NodeSpec{InstanceID: id, Labels: labels[k]})
				if _, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: n.Name, ShutdownAfter: 500 * time.Millisecond}); err != nil {
					t.Fatal(err)
				}
				nodes[k] = &spotNode{cluster: string(k), client: kube.Client, name: n.Name, id: id}
			}
			if err := h.Lifeboat.WaitLog(h.Ctx, "consuming queue"); err != nil {
				t.Fatal(err)
			}
			put := time.Now()
			for _, k := range []kind{plain, karpenter, teamA} {
				h.PutEvent(route.SourceEC2, route.SpotInterruption, time.Now(), map[string]string{"instance-id": nodes[k].id, "instance-action": "terminate"})
			}
			h.Eventually(15*time.Second, fmt.Sprintf("%v drained", tc.acted), func() bool {
				done := true
				for _, k := range tc.acted {
					nodes[k].poll(h.Ctx, put)
					done = done && nodes[k].drained > 0
				}
				return done
			})
			// The skipped nodes' messages have been received (and handed
			// back or deleted) several times by now: still untouched.
			h.Eventually(10*time.Second, "the skipped nodes' messages received", func() bool {
				return h.Metric("lifeboat_unknown_instance_events_total", nil) >= float64(3-len(tc.acted))
			})
			for k, n := range nodes {
				n.poll(h.Ctx, put)
				if !slices.Contains(tc.acted, k) && (n.cordoned > 0 || n.drained > 0) {
					t.Errorf("%s node %s was cordoned or drained; it is out of scope", k, n.name)
				}
			}
			if tc.queueEmpty {
				h.Eventually(10*time.Second, "the queue empty", h.QueueEmpty)
			} else if h.QueueEmpty() {
				t.Error("the skipped nodes' messages were deleted under --unknown-instance=leave; their owner (Karpenter, another lifeboat) never gets them")
			}
		})
	}
}

// Issue 17 section 4, volume detach: a terminate action is completed with
// CONTINUE only once the node's VolumeAttachments are gone (removed here
// 3 s after the drain, as the attach/detach controller and the CSI
// attacher would), bounded by --volume-detach-timeout (a VolumeAttachment
// that never goes: completed at the bound, with a Warning).
func TestVolumeDetachBeforeContinue(t *testing.T) {
	for _, tc := range []struct {
		name     string
		flags    []string
		removeIn time.Duration // 0: never
	}{
		{"removed 3 s after the drain", nil, 3 * time.Second},
		{"never removed: completed at --volume-detach-timeout", []string{"--volume-detach-timeout", "4s"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{flags: tc.flags})
			group := "vol-" + testenv.UniqueName("g")
			id := h.CreateGroup(group, 1)[0]
			node := h.NodeName(id)
			h.PutHook(group, "drain", terminating, 30, "ABANDON")
			va := &storagev1.VolumeAttachment{
				ObjectMeta: metav1.ObjectMeta{Name: testenv.UniqueName("csi")},
				Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: node,
					Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: aws.String(testenv.UniqueName("pv"))}},
			}
			if _, err := kube.Client.StorageV1().VolumeAttachments().Create(h.Ctx, va, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = kube.Client.StorageV1().VolumeAttachments().Delete(context.Background(), va.Name, metav1.DeleteOptions{})
			})
			if _, err := h.AS.SetDesiredCapacity(h.Ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(0)}); err != nil {
				t.Fatal(err)
			}
			h.Eventually(15*time.Second, "the node drained and lifeboat waiting for its volume", func() bool { return h.NodeEvents(node, "WaitingForVolumes") > 0 })
			drained := time.Now()
			var removed time.Time
			if tc.removeIn > 0 {
				time.Sleep(tc.removeIn)
				if a, ok := h.ActionFor(id, terminating); !ok || !a.Active() {
					t.Fatalf("the terminate action ended (%+v) while the node's VolumeAttachment was still there", a)
				}
				removed = time.Now()
				if err := kube.Client.StorageV1().VolumeAttachments().Delete(h.Ctx, va.Name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			var a awssim.Action
			h.Eventually(15*time.Second, "the terminate action to end", func() bool {
				var ok bool
				a, ok = h.ActionFor(id, terminating)
				return ok && !a.Active()
			})
			if a.CompletedBy != awssim.CompletedByAPI || a.Result != "CONTINUE" || a.Completions != 1 {
				t.Fatalf("action ended by %s with %s after %d completions; want one CompleteLifecycleAction CONTINUE", a.CompletedBy, a.Result, a.Completions)
			}
			if tc.removeIn > 0 {
				if a.Completed.Before(removed) {
					t.Errorf("CONTINUE at %v, before the VolumeAttachment was removed at %v", a.Completed, removed)
				}
				if lag := a.Completed.Sub(removed); lag > 2*time.Second {
					t.Errorf("CONTINUE %v after the VolumeAttachment was removed; want ≤ 2 s", lag)
				}
				t.Logf("drained -> VolumeAttachment removed %v -> CONTINUE %v later", removed.Sub(drained).Round(time.Millisecond), a.Completed.Sub(removed).Round(time.Millisecond))
				h.Eventually(5*time.Second, "a VolumesDetached event", func() bool { return h.NodeEvents(node, "VolumesDetached") > 0 })
				return
			}
			if waited := a.Completed.Sub(drained); waited < 3*time.Second {
				t.Errorf("CONTINUE %v after the drain; want the 4 s bound (3 s at the least: the drain was seen up to 1 s late)", waited)
			}
			h.Eventually(5*time.Second, "a VolumesStillAttached warning", func() bool { return h.NodeEvents(node, "VolumesStillAttached") > 0 })
			if !strings.Contains(h.Lifeboat.Process().Tail(400), va.Name) {
				t.Errorf("lifeboat's log does not name the VolumeAttachment %s", va.Name)
			}
		})
	}
}
