package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
)

var (
	applyOnce    sync.Once
	dynClient    dynamic.Interface
	restMapper   meta.RESTMapper
	applyOnceErr error
)

func applyClients() (dynamic.Interface, meta.RESTMapper, error) {
	applyOnce.Do(func() {
		dynClient, applyOnceErr = dynamic.NewForConfig(kube.Config)
		if applyOnceErr != nil {
			return
		}
		restMapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Client.Discovery()))
	})
	return dynClient, restMapper, applyOnceErr
}

// apply creates or updates objects with server-side apply as the cluster
// admin, as `helm install/upgrade` (or kubectl apply) would.
func apply(ctx context.Context, objs []*unstructured.Unstructured) error {
	dc, mapper, err := applyClients()
	if err != nil {
		return err
	}
	for _, o := range objs {
		res, err := resourceFor(dc, mapper, o)
		if err != nil {
			return err
		}
		data, err := json.Marshal(o.Object)
		if err != nil {
			return err
		}
		if _, err := res.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: "deploy-test", Force: ptr.To(true)}); err != nil {
			return fmt.Errorf("applying %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// remove deletes objects; missing ones are fine.
func remove(ctx context.Context, objs []*unstructured.Unstructured) error {
	dc, mapper, err := applyClients()
	if err != nil {
		return err
	}
	for _, o := range objs {
		res, err := resourceFor(dc, mapper, o)
		if err != nil {
			return err
		}
		if err := res.Delete(ctx, o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// applyForTest applies objs and deletes them in t's cleanup.
func applyForTest(t testing.TB, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := remove(ctx, objs); err != nil {
			t.Error(err)
		}
	})
	if err := apply(ctx, objs); err != nil {
		t.Fatal(err)
	}
}

func resourceFor(dc dynamic.Interface, mapper meta.RESTMapper, o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if o.GetNamespace() == "" {
			return nil, fmt.Errorf("%s %s has no namespace (the chart must set it)", o.GetKind(), o.GetName())
		}
		return dc.Resource(m.Resource).Namespace(o.GetNamespace()), nil
	}
	return dc.Resource(m.Resource), nil
}
