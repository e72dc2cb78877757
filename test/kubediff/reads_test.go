package kubediff

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"lifeboat.dev/lifeboat/internal/kube"
)

// read is one read both clients make of the same objects.
type read struct {
	name string
	do   func(ctx context.Context, c kube.Client) (runtime.Object, error)
	// want is the error predicate expected ("" for success).
	want string
}

// TestReadsAgree makes the reads lifeboat makes (node get and list with
// their resourceVersion semantics and paging, pods by spec.nodeName,
// PodDisruptionBudgets) through both clients, in protobuf (what lifeboat
// asks for) and JSON: the same requests, byte for byte the same answers,
// the same objects, the same errors.
func TestReadsAgree(t *testing.T) {
	ns := env.Namespace(t)
	group := ns // unique per test
	n1, _ := names("read-a")
	n2, _ := names("read-b")
	node(t, n1, group)
	node(t, n2, group)
	pod(t, ns, "p1", n1, map[string]string{"app": "x"})
	pod(t, ns, "p2", n1, map[string]string{"app": "y"})
	pod(t, ns, "p3", n2, map[string]string{"app": "z"})
	pdb(t, ns, "budget", map[string]string{"app": "z"})
	ctx, cancel := contextTimeout(opTimeout)
	defer cancel()
	snapshot, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: testLabel + "=" + group})
	if err != nil {
		t.Fatal(err)
	}
	sel := metav1.ListOptions{LabelSelector: testLabel + "=" + group}
	withSel := func(f func(*metav1.ListOptions)) metav1.ListOptions {
		o := sel
		f(&o)
		return o
	}

	// The continue token of a first page, from each side (the two tokens
	// are compared with the pages).
	var page1 = map[string]string{}
	reads := []read{
		{name: "get node", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			return c.Nodes().Get(ctx, n1, metav1.GetOptions{})
		}},
		{name: "get node from the cache (resourceVersion 0)", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			return c.Nodes().Get(ctx, n1, metav1.GetOptions{ResourceVersion: "0"})
		}},
		{name: "get missing node", want: "NotFound", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			return c.Nodes().Get(ctx, "no-such-node", metav1.GetOptions{})
		}},
		{name: "list nodes by label", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			return c.Nodes().List(ctx, sel)
		}},
		{name: "list nodes by name (IMDS mode's own node)", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			return c.Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + n1})
		}},
		{name: "list nodes at an exact resourceVersion", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			return c.Nodes().List(ctx, withSel(func(o *metav1.ListOptions) {
				o.ResourceVersion, o.ResourceVersionMatch = snapshot.ResourceVersion, metav1.ResourceVersionMatchExact
			}))
		}},
		{name: "list nodes from the cache (resourceVersion 0)", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			return c.Nodes().List(ctx, withSel(func(o *metav1.ListOptions) { o.ResourceVersion = "0" }))
		}},
		{name: "list nodes, first page", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			l, err := c.Nodes().List(ctx, withSel(func(o *metav1.ListOptions) {
				o.Limit, o.ResourceVersion, o.ResourceVersionMatch = 1, snapshot.ResourceVersion, metav1.ResourceVersionMatchExact
			}))
			if err == nil {
				if l.Continue == "" {
					t.Errorf("first page of 2 nodes has no continue token")
				}
				page1[sideOf(c)] = l.Continue
			}
			return l, err
		}},
		{name: "list nodes, second page", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			return c.Nodes().List(ctx, withSel(func(o *metav1.ListOptions) { o.Limit, o.Continue = 1, page1[sideOf(c)] }))
		}},
		{name: "list nodes with a bad label selector", want: "BadRequest", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			return c.Nodes().List(ctx, metav1.ListOptions{LabelSelector: "a in (("})
		}},
		{name: "list pods of a node, every namespace", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			return c.Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n1})
		}},
		{name: "list pods of a node, one namespace", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			return c.Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n2})
		}},
		{name: "list pods by an unknown field", want: "BadRequest", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			return c.Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.bogus=x"})
		}},
		{name: "get pod", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			return c.Pods(ns).Get(ctx, "p1", metav1.GetOptions{})
		}},
		{name: "get missing pod", want: "NotFound", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			return c.Pods(ns).Get(ctx, "nope", metav1.GetOptions{})
		}},
		{name: "list PodDisruptionBudgets", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			return c.PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
		}},
		{name: "list PodDisruptionBudgets, every namespace", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			return c.PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "metadata.namespace=" + ns})
		}},
	}
	for _, ct := range contentTypes {
		t.Run(string(ct), func(t *testing.T) {
			p := newPair(t, config(env.Config, ct))
			sides[p.ours.client], sides[p.lib.client] = "ours", "client-go"
			for _, r := range reads {
				ctx, cancel := contextTimeout(opTimeout)
				o, oerr := r.do(ctx, p.ours.client)
				l, lerr := r.do(ctx, p.lib.client)
				cancel()
				sameError(t, r.name, r.want, oerr, lerr, nil, nil)
				if oerr == nil && lerr == nil {
					sameObject(t, r.name, o, l, nil, nil)
				}
				x := sameWire(t, r.name, p, withAnswers, nil, nil)
				if len(x) != 1 {
					t.Errorf("%s: ours sent %d requests, want 1", r.name, len(x))
				}
			}
			if page1["ours"] != page1["client-go"] {
				t.Errorf("continue tokens differ: ours %q, client-go %q", page1["ours"], page1["client-go"])
			}
		})
	}
}

// sides names the clients of the running test, for reads that keep state
// per side.
var sides = map[kube.Client]string{}

func sideOf(c kube.Client) string { return sides[c] }
