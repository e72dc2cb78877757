package kubediff

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/internal/kube"
)

// write is one write both clients make, each to its own object (the
// node's name is passed; stale is the node's resourceVersion at creation,
// for preconditions that must fail).
type write struct {
	name string
	do   func(ctx context.Context, c kube.Client, node, stale string) (runtime.Object, error)
	want string
}

func patch(pt types.PatchType, body string, opts metav1.PatchOptions, sub ...string) func(ctx context.Context, c kube.Client, node, stale string) (runtime.Object, error) {
	return func(ctx context.Context, c kube.Client, node, stale string) (runtime.Object, error) {
		return c.Nodes().Patch(ctx, node, pt, []byte(fmt.Sprintf(body, stale)), opts, sub...)
	}
}

// TestNodeWritesAgree makes the node writes lifeboat makes (merge patches
// of annotations, cordons and taints, with and without a resourceVersion
// precondition; full updates) and the other patch kinds the client
// passes through, through both clients, each on its own node: the same
// requests, the same resulting nodes, the same errors (Conflict,
// NotFound, Invalid, BadRequest).
func TestNodeWritesAgree(t *testing.T) {
	writes := []write{
		{name: "merge patch of annotations", do: patch(types.MergePatchType,
			`{"metadata":{"annotations":{"lifeboat.io/events":"e-1","a":null}}}%.0s`, metav1.PatchOptions{})},
		{name: "merge patch cordon with a current resourceVersion", do: func(ctx context.Context, c kube.Client, node, _ string) (runtime.Object, error) {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			body := fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"spec":{"unschedulable":true,"taints":[{"key":"lifeboat.io/spot","effect":"NoSchedule"}]}}`, n.ResourceVersion)
			return c.Nodes().Patch(ctx, node, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		}},
		{name: "merge patch with a stale resourceVersion", want: "Conflict", do: patch(types.MergePatchType,
			`{"metadata":{"resourceVersion":%q},"spec":{"unschedulable":false}}`, metav1.PatchOptions{})},
		{name: "strategic merge patch", do: patch(types.StrategicMergePatchType,
			`{"metadata":{"labels":{"lifeboat.io/x":"y"}},"spec":{"podCIDR":"10.1.0.0/24"}}%.0s`, metav1.PatchOptions{})},
		{name: "JSON patch with a test", do: patch(types.JSONPatchType,
			`[{"op":"test","path":"/spec/unschedulable","value":true},{"op":"replace","path":"/spec/unschedulable","value":false}]%.0s`, metav1.PatchOptions{})},
		{name: "JSON patch whose test fails", want: "Invalid", do: patch(types.JSONPatchType,
			`[{"op":"test","path":"/spec/unschedulable","value":true}]%.0s`, metav1.PatchOptions{})},
		{name: "server-side apply", do: patch(types.ApplyPatchType,
			`{"apiVersion":"v1","kind":"Node","metadata":{"annotations":{"applied":"yes"}}}%.0s`, metav1.PatchOptions{FieldManager: "lifeboat", Force: ptr.To(true)})},
		{name: "dry-run merge patch", do: patch(types.MergePatchType,
			`{"metadata":{"annotations":{"dry":"run"}}}%.0s`, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})},
		{name: "status subresource patch", do: patch(types.MergePatchType,
			`{"status":{"nodeInfo":{"kubeletVersion":"v1.34.0"}}}%.0s`, metav1.PatchOptions{}, "status")},
		{name: "merge patch of an invalid label", want: "Invalid", do: patch(types.MergePatchType,
			`{"metadata":{"labels":{"bad key!":"x"}}}%.0s`, metav1.PatchOptions{})},
		{name: "malformed JSON patch", want: "BadRequest", do: patch(types.JSONPatchType, `{"not":"a list"}%.0s`, metav1.PatchOptions{})},
		{name: "patch of a missing node", want: "NotFound", do: func(ctx context.Context, c kube.Client, _, _ string) (runtime.Object, error) {
			return c.Nodes().Patch(ctx, "no-such-node", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
		}},
		{name: "update", do: func(ctx context.Context, c kube.Client, node, _ string) (runtime.Object, error) {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			n.Spec.Unschedulable = true
			n.Labels["updated"] = "yes"
			return c.Nodes().Update(ctx, n, metav1.UpdateOptions{})
		}},
		{name: "update with a stale resourceVersion", want: "Conflict", do: func(ctx context.Context, c kube.Client, node, stale string) (runtime.Object, error) {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			n.ResourceVersion = stale
			n.Spec.Unschedulable = false
			return c.Nodes().Update(ctx, n, metav1.UpdateOptions{})
		}},
		{name: "update of a missing node", want: "NotFound", do: func(ctx context.Context, c kube.Client, _, _ string) (runtime.Object, error) {
			return c.Nodes().Update(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "no-such-node", ResourceVersion: "1"}}, metav1.UpdateOptions{})
		}},
		// The deletion of a ghost node (--delete-ghost-nodes): with the
		// UID of the node lifeboat judged, so a node re-created under the
		// same name is never deleted. Last: it removes the node.
		{name: "deletion with another UID", want: "Conflict", do: func(ctx context.Context, c kube.Client, node, _ string) (runtime.Object, error) {
			return nil, c.Nodes().Delete(ctx, node, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID("0b1d0000-0000-0000-0000-000000000000"))}})
		}},
		{name: "deletion of a missing node", want: "NotFound", do: func(ctx context.Context, c kube.Client, _, _ string) (runtime.Object, error) {
			return nil, c.Nodes().Delete(ctx, "no-such-node", metav1.DeleteOptions{})
		}},
		{name: "deletion with the node's UID, then a read", want: "NotFound", do: func(ctx context.Context, c kube.Client, node, _ string) (runtime.Object, error) {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			if err := c.Nodes().Delete(ctx, node, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &n.UID}}); err != nil {
				return nil, err
			}
			return c.Nodes().Get(ctx, node, metav1.GetOptions{})
		}},
	}
	for _, ct := range contentTypes {
		t.Run(string(ct), func(t *testing.T) {
			p := newPair(t, config(env.Config, ct))
			on, ln := names("w-" + string(ct)[:4])
			onode, lnode := node(t, on, t.Name()), node(t, ln, t.Name())
			so, sl := subst{on: "NODE", string(onode.UID): "UID"}, subst{ln: "NODE", string(lnode.UID): "UID"}
			ostale, lstale := onode.ResourceVersion, lnode.ResourceVersion
			// The resourceVersions the preconditions send differ between
			// the sides: sameWire masks them in patches.
			for _, w := range writes {
				ctx, cancel := contextTimeout(opTimeout)
				o, oerr := w.do(ctx, p.ours.client, on, ostale)
				l, lerr := w.do(ctx, p.lib.client, ln, lstale)
				cancel()
				sameError(t, w.name, w.want, oerr, lerr, so, sl)
				if oerr == nil && lerr == nil {
					sameObject(t, w.name, o, l, so, sl)
				}
				sameWire(t, w.name, p, requestsOnly, so, sl)
			}
		})
	}
}
