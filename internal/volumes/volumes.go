// Package volumes watches the cluster's VolumeAttachments
// (storage.k8s.io/v1), indexed by node, so that lifeboat can wait for a
// terminating node's volumes to detach before it lets the instance go:
// an EBS volume still attached to the old instance keeps the replacement
// pod from starting until the instance is gone.
//
// It owns the VolumeAttachment informer and nothing else: it never writes.
package volumes

import (
	"context"
	"sort"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	typedstoragev1 "k8s.io/client-go/kubernetes/typed/storage/v1"
	"k8s.io/client-go/tools/cache"
)

const byNode = "node"

// Client is the part of a Kubernetes clientset the cache uses.
type Client interface {
	StorageV1() typedstoragev1.StorageV1Interface
}

// Attachments is the VolumeAttachment cache.
type Attachments struct {
	informer cache.SharedIndexInformer
}

// New returns the cache; call Run to fill it.
func New(client Client, resync time.Duration) *Attachments {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, lo metav1.ListOptions) (runtime.Object, error) {
			return client.StorageV1().VolumeAttachments().List(ctx, lo)
		},
		WatchFuncWithContext: func(ctx context.Context, lo metav1.ListOptions) (watch.Interface, error) {
			return client.StorageV1().VolumeAttachments().Watch(ctx, lo)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &storagev1.VolumeAttachment{}, resync, cache.Indexers{
		byNode: func(obj any) ([]string, error) {
			if va, ok := obj.(*storagev1.VolumeAttachment); ok && va.Spec.NodeName != "" {
				return []string{va.Spec.NodeName}, nil
			}
			return nil, nil
		},
	})
	_ = inf.SetTransform(func(obj any) (any, error) {
		if va, ok := obj.(*storagev1.VolumeAttachment); ok {
			va.ManagedFields = nil
		}
		return obj, nil
	})
	return &Attachments{informer: inf}
}

// Run runs the informer until ctx ends.
func (a *Attachments) Run(ctx context.Context) { a.informer.RunWithContext(ctx) }

// Synced reports whether the cache is filled (false while VolumeAttachments
// cannot be listed, e.g. without the RBAC grant).
func (a *Attachments) Synced() bool { return a.informer.HasSynced() }

// OnNode returns the names of the VolumeAttachments of a node, sorted: a
// volume counts until its VolumeAttachment is gone (a detaching one is
// still there, marked for deletion, until the attacher has detached it).
func (a *Attachments) OnNode(node string) []string {
	objs, err := a.informer.GetIndexer().ByIndex(byNode, node)
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		names = append(names, o.(*storagev1.VolumeAttachment).Name)
	}
	sort.Strings(names)
	return names
}
