package drain_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/test/testenv"
)

// --pod-grace-period replaces the pod's own grace period, --node-grace-period
// caps the whole drain, and AWS's deadline caps both: the earliest wins.
func TestGracePeriodActions(t *testing.T) {
	tests := []struct {
		name      string
		own       int64
		podGrace  time.Duration
		nodeGrace time.Duration
		deadline  time.Duration // 0: none
		want      int64
		wantNil   bool
	}{
		{name: "pod grace shorter than the pod's own", own: 30, podGrace: 10 * time.Second, want: 10},
		{name: "pod grace longer than the pod's own", own: 30, podGrace: time.Minute, want: 60},
		{name: "pod grace equal to the pod's own", own: 30, podGrace: 30 * time.Second, want: 30, wantNil: true},
		{name: "pod grace capped by AWS's deadline", own: 30, podGrace: time.Minute, deadline: 20 * time.Second, want: 20},
		{name: "node grace caps a drain without deadline", own: 30, nodeGrace: 15 * time.Second, want: 15},
		{name: "node grace earlier than AWS's deadline", own: 30, nodeGrace: 15 * time.Second, deadline: time.Hour, want: 15},
		{name: "AWS's deadline earlier than node grace", own: 30, nodeGrace: 2 * time.Minute, deadline: 20 * time.Second, want: 20},
		{name: "node grace longer than the pod's own", own: 30, nodeGrace: 2 * time.Minute, want: 30, wantNil: true},
		{name: "pod grace and node grace", own: 30, podGrace: time.Minute, nodeGrace: 40 * time.Second, want: 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fakePod("app", tt.own)
			c := newFakeCluster(t, p)
			var deadline time.Time
			if tt.deadline != 0 {
				deadline = c.clock.Now().Add(tt.deadline)
			}
			_, _ = c.drain(drain.Options{Actions: drain.Actions{PodGrace: tt.podGrace, NodeGrace: tt.nodeGrace}}, deadline)
			evs := c.evictionsOf("app")
			if len(evs) == 0 {
				t.Fatal("no eviction was sent")
			}
			if got := graceOf(evs[0], p); got != tt.want || (evs[0].grace == nil) != tt.wantNil {
				t.Errorf("eviction asked for grace %v (effective %d s), want %d s (pod's own: %v)", fmtGrace(evs[0].grace), got, tt.want, tt.wantNil)
			}
		})
	}
}

// The taint effect, the load balancer label and the out-of-service taint
// (marked once EC2 confirms the shutdown, never by the drain itself) are
// set on the real API server, and Uncordon removes what lifeboat added,
// never what an operator set.
func TestNodeActions(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, time.Minute)
	tests := []struct {
		name       string
		acts       drain.Actions
		adminLabel bool // the operator labelled the node first
		wantEffect corev1.TaintEffect
		wantLabel  string // "" : no label while cordoned
		markOOS    bool   // MarkOutOfService after the drain
		keptLabel  bool   // the label stays after Uncordon
	}{
		{name: "defaults", wantEffect: corev1.TaintEffectNoSchedule},
		{name: "NoExecute and excluded from load balancers", acts: drain.Actions{TaintEffect: corev1.TaintEffectNoExecute, ExcludeFromLB: true},
			wantEffect: corev1.TaintEffectNoExecute, wantLabel: drain.ExcludeFromLBValue},
		{name: "operator's label kept", acts: drain.Actions{ExcludeFromLB: true}, adminLabel: true,
			wantEffect: corev1.TaintEffectNoSchedule, wantLabel: "admin", keptLabel: true},
		{name: "out of service marked after the drain", acts: drain.Actions{TaintEffect: corev1.TaintEffectPreferNoSchedule},
			wantEffect: corev1.TaintEffectPreferNoSchedule, markOOS: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := testenv.NodeSpec{}
			node := env.Node(t, spec).Name
			if tt.adminLabel {
				patch := []byte(`{"metadata":{"labels":{"` + drain.LabelExcludeFromLB + `":"admin"}}}`)
				if _, err := env.Client.CoreV1().Nodes().Patch(ctx, node, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			d := newDrainer(drain.Options{Actions: tt.acts})
			if _, err := d.Cordon(ctx, node, []string{"lifeboat.io/spot-interruption"}, "spot-interruption", nil); err != nil {
				t.Fatal(err)
			}
			if _, err := d.Drain(ctx, node, drain.Deadline{}, nil); err != nil {
				t.Fatal(err)
			}
			if tt.markOOS {
				if changed, err := d.MarkOutOfService(ctx, node); err != nil || !changed {
					t.Fatalf("MarkOutOfService: changed %v, %v", changed, err)
				}
			}
			n, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := taintOf(n, "lifeboat.io/spot-interruption"); got == nil || got.Effect != tt.wantEffect {
				t.Errorf("lifeboat taint = %+v, want effect %s", got, tt.wantEffect)
			}
			if got := n.Labels[drain.LabelExcludeFromLB]; got != tt.wantLabel {
				t.Errorf("label %s = %q, want %q", drain.LabelExcludeFromLB, got, tt.wantLabel)
			}
			oos := taintOf(n, drain.TaintOutOfService)
			if (oos != nil) != tt.markOOS || (oos != nil && (oos.Effect != corev1.TaintEffectNoExecute || oos.Value != drain.OutOfServiceValue)) {
				t.Errorf("out-of-service taint = %+v, want present: %v (NoExecute, %s)", oos, tt.markOOS, drain.OutOfServiceValue)
			}
			if _, err := d.Uncordon(ctx, node, "lifeboat.io/", nil); err != nil {
				t.Fatal(err)
			}
			n, err = env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := n.Labels[drain.LabelExcludeFromLB]; ok != tt.keptLabel {
				t.Errorf("after uncordon, label present = %v, want %v", ok, tt.keptLabel)
			}
			if got := taintOf(n, drain.TaintOutOfService); got != nil {
				t.Errorf("after uncordon, out-of-service taint %+v still present", got)
			}
			if _, ok := n.Annotations[drain.AnnotationOutOfService]; ok {
				t.Error("after uncordon, the out-of-service annotation is still present")
			}
		})
	}
}

// ClearOutOfService removes the taint lifeboat marked, and MarkOutOfService
// and ClearOutOfService leave an operator's taint as it is.
func TestOutOfServiceMarkAndClear(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, time.Minute)
	d := newDrainer(drain.Options{})
	ours := env.Node(t, testenv.NodeSpec{}).Name
	if changed, err := d.MarkOutOfService(ctx, ours); err != nil || !changed {
		t.Fatalf("MarkOutOfService: changed %v, %v", changed, err)
	}
	if changed, err := d.MarkOutOfService(ctx, ours); err != nil || changed {
		t.Fatalf("MarkOutOfService again: changed %v, %v; want no change", changed, err)
	}
	if changed, err := d.ClearOutOfService(ctx, ours); err != nil || !changed {
		t.Fatalf("ClearOutOfService: changed %v, %v", changed, err)
	}
	n, err := env.Client.CoreV1().Nodes().Get(ctx, ours, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := taintOf(n, drain.TaintOutOfService); got != nil || n.Annotations[drain.AnnotationOutOfService] != "" {
		t.Errorf("after ClearOutOfService: taint %+v, annotation %q", got, n.Annotations[drain.AnnotationOutOfService])
	}

	theirs := env.Node(t, testenv.NodeSpec{}).Name
	patch := []byte(`{"spec":{"taints":[{"key":"` + drain.TaintOutOfService + `","value":"operator","effect":"NoExecute"}]}}`)
	if _, err := env.Client.CoreV1().Nodes().Patch(ctx, theirs, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []func(context.Context, string) (bool, error){d.MarkOutOfService, d.ClearOutOfService} {
		if changed, err := f(ctx, theirs); err != nil || changed {
			t.Fatalf("changed %v, %v; want the operator's taint left alone", changed, err)
		}
	}
	n, err = env.Client.CoreV1().Nodes().Get(ctx, theirs, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := taintOf(n, drain.TaintOutOfService); got == nil || got.Value != "operator" {
		t.Errorf("operator's taint = %+v", got)
	}
}

func taintOf(n *corev1.Node, key string) *corev1.Taint {
	for i := range n.Spec.Taints {
		if n.Spec.Taints[i].Key == key {
			return &n.Spec.Taints[i]
		}
	}
	return nil
}

// Result.Pods names the evicted pods (for Events and notifications).
func TestResultNamesEvictedPods(t *testing.T) {
	c := newFakeCluster(t, fakePod("web-0", 1), fakePod("cart-1", 1))
	res, err := c.drain(drain.Options{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(res.Pods)
	if want := []string{"ns/cart-1", "ns/web-0"}; !slices.Equal(res.Pods, want) || res.Evicted != 2 {
		t.Errorf("evicted %d, pods %v; want 2, %v", res.Evicted, res.Pods, want)
	}
}
