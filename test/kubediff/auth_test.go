package kubediff

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"lifeboat.dev/lifeboat/internal/kube"
)

// TestAuthErrorsAgree sends lifeboat's requests as a ServiceAccount that
// RBAC grants nothing (Forbidden) and with a token the API server does
// not know (Unauthorized): both clients must fail alike.
func TestAuthErrorsAgree(t *testing.T) {
	ns := env.Namespace(t)
	ctx, cancel := contextTimeout(opTimeout)
	defer cancel()
	if _, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nobody, err := env.RESTConfigFor(ctx, ns, "nobody")
	if err != nil {
		t.Fatal(err)
	}
	stranger := rest.CopyConfig(env.Config)
	stranger.BearerToken = "not-a-token-the-api-server-knows"

	calls := []read{
		{name: "list nodes", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			return c.Nodes().List(ctx, metav1.ListOptions{})
		}},
		{name: "watch nodes", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			w, err := c.Nodes().Watch(ctx, metav1.ListOptions{})
			if err == nil {
				w.Stop()
			}
			return nil, err
		}},
		{name: "patch a node", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			return c.Nodes().Patch(ctx, "some-node", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
		}},
		{name: "list pods of a node", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			return c.Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=some-node"})
		}},
		{name: "evict a pod", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			return nil, c.Pods(ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}})
		}},
		{name: "delete a pod", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			return nil, c.Pods(ns).Delete(ctx, "p", metav1.DeleteOptions{})
		}},
		{name: "list PodDisruptionBudgets", do: func(ctx context.Context, c kube.Client) (runtime.Object, error) {
			return c.PodDisruptionBudgets("").List(ctx, metav1.ListOptions{})
		}},
	}
	for _, ct := range contentTypes {
		for _, who := range []struct {
			name string
			cfg  *rest.Config
			want string
		}{{"no RBAC", nobody, "Forbidden"}, {"unknown token", stranger, "Unauthorized"}} {
			t.Run(string(ct)+"/"+who.name, func(t *testing.T) {
				p := newPair(t, config(who.cfg, ct))
				for _, c := range calls {
					ctx, cancel := contextTimeout(opTimeout)
					_, oerr := c.do(ctx, p.ours.client)
					_, lerr := c.do(ctx, p.lib.client)
					cancel()
					sameError(t, c.name, who.want, oerr, lerr, nil, nil)
					sameWire(t, c.name, p, withAnswers, nil, nil)
				}
			})
		}
	}
}
