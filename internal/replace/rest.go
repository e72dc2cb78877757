package replace

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
)

// Client is what Replacer reads and writes of apps/v1: a ReplicaSet (to
// find its Deployment) and the Deployment (read, and a merge patch of
// its pod template's annotation).
type Client interface {
	ReplicaSet(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error)
	Deployment(ctx context.Context, namespace, name string) (*appsv1.Deployment, error)
	PatchDeployment(ctx context.Context, namespace, name string, mergePatch []byte) error
}

// scheme knows apps/v1 only (and the meta/v1 option types), like
// kube.Scheme for core and policy: nothing else is linked.
var (
	scheme         = runtime.NewScheme()
	codecs         serializer.CodecFactory
	parameterCodec runtime.ParameterCodec
)

func init() {
	utilruntime.Must(appsv1.AddToScheme(scheme))
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	codecs = serializer.NewCodecFactory(scheme)
	parameterCodec = runtime.NewParameterCodec(scheme)
}

// REST is a Client over client-go's REST client for /apis/apps/v1.
type REST struct{ c *rest.RESTClient }

var _ Client = REST{}

// NewREST returns a REST client for rc (its rate limiter, transport and
// content type).
func NewREST(rc *rest.Config) (REST, error) {
	c := rest.CopyConfig(rc)
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	c.APIPath = "/apis"
	c.GroupVersion = &appsv1.SchemeGroupVersion
	c.NegotiatedSerializer = codecs.WithoutConversion()
	rc2, err := rest.RESTClientFor(c)
	if err != nil {
		return REST{}, fmt.Errorf("kubernetes client for apps/v1: %w", err)
	}
	return REST{rc2}, nil
}

func (r REST) ReplicaSet(ctx context.Context, ns, name string) (*appsv1.ReplicaSet, error) {
	out := &appsv1.ReplicaSet{}
	err := r.c.Get().UseProtobufAsDefault().Namespace(ns).Resource("replicasets").Name(name).
		VersionedParams(&metav1.GetOptions{}, parameterCodec).Do(ctx).Into(out)
	return out, err
}

func (r REST) Deployment(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
	out := &appsv1.Deployment{}
	err := r.c.Get().UseProtobufAsDefault().Namespace(ns).Resource("deployments").Name(name).
		VersionedParams(&metav1.GetOptions{}, parameterCodec).Do(ctx).Into(out)
	return out, err
}

func (r REST) PatchDeployment(ctx context.Context, ns, name string, data []byte) error {
	return r.c.Patch(types.MergePatchType).UseProtobufAsDefault().Namespace(ns).Resource("deployments").Name(name).
		VersionedParams(&metav1.PatchOptions{}, parameterCodec).Body(data).Do(ctx).Error()
}
