// Package nodes maps EC2 instance IDs to Kubernetes Nodes through an
// informer cache indexed on spec.providerID, so resolving an event costs no
// API request.
//
// It owns the Node informer and nothing else: it never writes to Nodes (the
// drain package does) and never talks to AWS.
package nodes

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/kube"
)

const byInstance = "instanceID"

// Index is the node cache.
type Index struct {
	informer cache.SharedIndexInformer
}

// Options select what the index watches.
type Options struct {
	// OnlyNode restricts the watch to one node (IMDS mode: its own).
	OnlyNode string
	// LabelSelector restricts the watch to the nodes lifeboat acts on
	// (config.NodeScope); the others are as absent as another cluster's.
	LabelSelector string
	// Resync is the informer resync period (0: none).
	Resync time.Duration
	// OnListWatch, if set, is told the outcome of every list and watch
	// request the informer makes (nil: the API server answered), so that
	// readiness follows the watch without asking the API server itself.
	OnListWatch func(error)
}

// Client is what the Index lists and watches through (a kube.Client is
// one).
type Client interface {
	Nodes() kube.NodeClient
}

// New returns an index; call Run to fill it.
func New(client Client, o Options) *Index {
	report := o.OnListWatch
	if report == nil {
		report = func(error) {}
	}
	tweak := func(lo *metav1.ListOptions) {
		if o.OnlyNode != "" {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", o.OnlyNode).String()
		}
		if o.LabelSelector != "" {
			lo.LabelSelector = o.LabelSelector
		}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, lo metav1.ListOptions) (runtime.Object, error) {
			tweak(&lo)
			// The reflector's first list asks for resourceVersion "0", which
			// the API server answers from its cache in one piece, ignoring
			// the page size: 5,000 nodes with their images decode into a
			// memory peak several times the cache. A list without a
			// resourceVersion is paginated (500 nodes a page).
			if lo.ResourceVersion == "0" {
				lo.ResourceVersion = ""
			}
			if lo.Limit == 0 {
				lo.Limit = 500
			}
			list, err := client.Nodes().List(ctx, lo)
			report(err)
			if err != nil {
				return list, err
			}
			// The reflector's pager keeps every page's nodes until the last
			// page arrives, and only then hands them to the transform: strip
			// each page as it arrives, so that only stripped nodes add up.
			for i := range list.Items {
				stripNode(&list.Items[i])
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, lo metav1.ListOptions) (watch.Interface, error) {
			tweak(&lo)
			w, err := client.Nodes().Watch(ctx, lo)
			report(err)
			return w, err
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &corev1.Node{}, o.Resync, cache.Indexers{
		byInstance: func(obj any) ([]string, error) {
			n, ok := obj.(*corev1.Node)
			if !ok {
				return nil, nil
			}
			if id := InstanceID(n.Spec.ProviderID); id != "" {
				return []string{id}, nil
			}
			return nil, nil
		},
	})
	// Keep only what lifeboat reads: big clusters have big Node objects
	// (images, volumes, managed fields) that would cost memory for nothing.
	_ = inf.SetTransform(strip)
	return &Index{informer: inf}
}

// strip drops the parts of a Node lifeboat never reads.
func strip(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	stripNode(n)
	return n, nil
}

// stripNode drops, in place, the parts of a Node lifeboat never reads.
func stripNode(n *corev1.Node) {
	n.ManagedFields = nil
	n.Status.Images = nil
	n.Status.VolumesAttached = nil
	n.Status.VolumesInUse = nil
	n.Status.Addresses = nil
	n.Status.Capacity = nil
	n.Status.Allocatable = nil
	// The boot ID tells IMDS mode that the node rebooted (reboot maintenance).
	n.Status.NodeInfo = corev1.NodeSystemInfo{BootID: n.Status.NodeInfo.BootID}
	n.Status.Features = nil
	n.Status.RuntimeHandlers = nil
}

// InstanceID extracts the instance ID of an AWS providerID
// (aws:///us-east-1a/i-0123456789abcdef0), or "".
func InstanceID(providerID string) string {
	if !strings.HasPrefix(providerID, "aws://") {
		return ""
	}
	i := strings.LastIndex(providerID, "/")
	return event.NormalizeInstanceID(providerID[i+1:])
}

// AddHandler registers h for node changes, before or while the index
// runs (h first sees every cached node added); the returned function
// removes it.
func (x *Index) AddHandler(h cache.ResourceEventHandler) (remove func(), err error) {
	reg, err := x.informer.AddEventHandler(h)
	if err != nil {
		return nil, err
	}
	return func() { _ = x.informer.RemoveEventHandler(reg) }, nil
}

// Run runs the informer until ctx ends.
func (x *Index) Run(ctx context.Context) { x.informer.RunWithContext(ctx) }

// WaitSynced waits until the cache is filled.
func (x *Index) WaitSynced(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), x.informer.HasSynced) {
		return fmt.Errorf("waiting for the node cache: %w", ctx.Err())
	}
	return nil
}

// Synced reports whether the cache is filled.
func (x *Index) Synced() bool { return x.informer.HasSynced() }

// ByInstance returns the node of an instance.
func (x *Index) ByInstance(instanceID string) (*corev1.Node, bool) {
	objs, err := x.informer.GetIndexer().ByIndex(byInstance, instanceID)
	if err != nil || len(objs) == 0 {
		return nil, false
	}
	return objs[0].(*corev1.Node), true
}

// ByName returns a node by name.
func (x *Index) ByName(name string) (*corev1.Node, bool) {
	obj, ok, err := x.informer.GetIndexer().GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	return obj.(*corev1.Node), true
}

// List returns every cached node (shared objects: do not modify).
func (x *Index) List() []*corev1.Node {
	objs := x.informer.GetIndexer().List()
	out := make([]*corev1.Node, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*corev1.Node))
	}
	return out
}

// Ready reports whether the node's Ready condition is True.
func Ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
