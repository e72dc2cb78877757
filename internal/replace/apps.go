package replace

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsclient "k8s.io/client-go/kubernetes/typed/apps/v1"
)

// Client is what Replacer reads and writes of apps/v1: a ReplicaSet (to
// find its Deployment) and the Deployment (read, and a merge patch of
// its pod template's annotation).
type Client interface {
	ReplicaSet(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error)
	Deployment(ctx context.Context, namespace, name string) (*appsv1.Deployment, error)
	PatchDeployment(ctx context.Context, namespace, name string, mergePatch []byte) error
}

// Apps is a Client over client-go's typed apps/v1 client
// (kubernetes.Interface.AppsV1()). Replacement first runs in queue mode
// only: the IMDS-only build does not link this package.
type Apps struct{ c appsclient.AppsV1Interface }

var _ Client = Apps{}

// NewApps returns a Client over c: its configuration's rate limiter,
// transport and content type.
func NewApps(c appsclient.AppsV1Interface) Apps { return Apps{c} }

func (a Apps) ReplicaSet(ctx context.Context, ns, name string) (*appsv1.ReplicaSet, error) {
	return a.c.ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
}

func (a Apps) Deployment(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
	return a.c.Deployments(ns).Get(ctx, name, metav1.GetOptions{})
}

func (a Apps) PatchDeployment(ctx context.Context, ns, name string, data []byte) error {
	_, err := a.c.Deployments(ns).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
	return err
}
