package kube

import (
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Scheme knows core/v1 and policy/v1 (and the meta/v1 option types): what
// REST sends and decodes, and what the event recorder needs to name the
// objects an Event is about.
var Scheme = runtime.NewScheme()

var (
	codecs         serializer.CodecFactory
	parameterCodec runtime.ParameterCodec
)

func init() {
	utilruntime.Must(corev1.AddToScheme(Scheme))
	utilruntime.Must(policyv1.AddToScheme(Scheme))
	// Status and the option types in the unversioned "v1", as client-go's
	// own scheme has them: errors decode into a metav1.Status.
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	codecs = serializer.NewCodecFactory(Scheme)
	parameterCodec = runtime.NewParameterCodec(Scheme)
}

// REST is a Client over client-go's REST client: one for the core group
// (/api/v1), one for policy/v1 (/apis), sharing one HTTP client and one
// rate limiter, as a clientset's groups do. It speaks what the
// configuration asks for (protobuf or JSON); a configuration that names no
// content type gets what client-go's typed clients send then: protobuf
// (UseProtobufAsDefault), except for evictions, which client-go's
// EvictV1 sends as JSON. test/kubediff holds every request to client-go's.
type REST struct {
	core, policy *rest.RESTClient
}

var _ Client = (*REST)(nil)

// NewREST returns a REST client for rc (its QPS, burst, transport
// wrappers and content type).
func NewREST(rc *rest.Config) (*REST, error) {
	cfg := rest.CopyConfig(rc)
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		if cfg.Burst <= 0 {
			return nil, fmt.Errorf("kubernetes client: burst must be positive when QPS is set (QPS %v, burst %d)", cfg.QPS, cfg.Burst)
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	core, err := restClient(cfg, hc, "/api", corev1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	policy, err := restClient(cfg, hc, "/apis", policyv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	return &REST{core: core, policy: policy}, nil
}

func restClient(base *rest.Config, hc *http.Client, apiPath string, gv schema.GroupVersion) (*rest.RESTClient, error) {
	c := rest.CopyConfig(base)
	c.APIPath = apiPath
	c.GroupVersion = &gv
	c.NegotiatedSerializer = codecs.WithoutConversion()
	rc, err := rest.RESTClientForConfigAndClient(c, hc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for %s: %w", gv, err)
	}
	return rc, nil
}

func (r *REST) Nodes() NodeClient { return nodes{r.core} }

func (r *REST) Pods(namespace string) PodClient { return pods{r.core, namespace} }

func (r *REST) PodDisruptionBudgets(namespace string) PDBClient { return pdbs{r.policy, namespace} }

// timeout is a list's or watch's TimeoutSeconds as the request's timeout,
// as client-go's typed clients do.
func timeout(o metav1.ListOptions) time.Duration {
	if o.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*o.TimeoutSeconds) * time.Second
}

type nodes struct{ c *rest.RESTClient }

func (n nodes) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error) {
	out := &corev1.Node{}
	err := n.c.Get().UseProtobufAsDefault().Resource("nodes").Name(name).VersionedParams(&opts, parameterCodec).Do(ctx).Into(out)
	return out, err
}

func (n nodes) List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	out := &corev1.NodeList{}
	err := n.c.Get().UseProtobufAsDefault().Resource("nodes").VersionedParams(&opts, parameterCodec).Timeout(timeout(opts)).Do(ctx).Into(out)
	return out, err
}

func (n nodes) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return n.c.Get().UseProtobufAsDefault().Resource("nodes").VersionedParams(&opts, parameterCodec).Timeout(timeout(opts)).Watch(ctx)
}

func (n nodes) Update(ctx context.Context, node *corev1.Node, opts metav1.UpdateOptions) (*corev1.Node, error) {
	out := &corev1.Node{}
	err := n.c.Put().UseProtobufAsDefault().Resource("nodes").Name(node.Name).VersionedParams(&opts, parameterCodec).Body(node).Do(ctx).Into(out)
	return out, err
}

func (n nodes) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return n.c.Delete().UseProtobufAsDefault().Resource("nodes").Name(name).Body(&opts).Do(ctx).Error()
}

func (n nodes) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error) {
	out := &corev1.Node{}
	err := n.c.Patch(pt).UseProtobufAsDefault().Resource("nodes").Name(name).SubResource(subresources...).VersionedParams(&opts, parameterCodec).Body(data).Do(ctx).Into(out)
	return out, err
}

type pods struct {
	c  *rest.RESTClient
	ns string
}

func (p pods) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	err := p.c.Get().UseProtobufAsDefault().NamespaceIfScoped(p.ns, p.ns != "").Resource("pods").Name(name).VersionedParams(&opts, parameterCodec).Do(ctx).Into(out)
	return out, err
}

func (p pods) List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	out := &corev1.PodList{}
	err := p.c.Get().UseProtobufAsDefault().NamespaceIfScoped(p.ns, p.ns != "").Resource("pods").VersionedParams(&opts, parameterCodec).Timeout(timeout(opts)).Do(ctx).Into(out)
	return out, err
}

func (p pods) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return p.c.Get().UseProtobufAsDefault().NamespaceIfScoped(p.ns, p.ns != "").Resource("pods").VersionedParams(&opts, parameterCodec).Timeout(timeout(opts)).Watch(ctx)
}

func (p pods) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return p.c.Delete().UseProtobufAsDefault().NamespaceIfScoped(p.ns, p.ns != "").Resource("pods").Name(name).Body(&opts).Do(ctx).Error()
}

func (p pods) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	err := p.c.Patch(pt).UseProtobufAsDefault().Namespace(p.ns).Resource("pods").Name(name).SubResource(subresources...).VersionedParams(&opts, parameterCodec).Body(data).Do(ctx).Into(out)
	return out, err
}

// EvictV1 posts the eviction once (MaxRetries(0)): see PodClient.
func (p pods) EvictV1(ctx context.Context, ev *policyv1.Eviction) error {
	return p.c.Post().Namespace(p.ns).Resource("pods").Name(ev.Name).SubResource("eviction").Body(ev).MaxRetries(0).Do(ctx).Error()
}

type pdbs struct {
	c  *rest.RESTClient
	ns string
}

func (p pdbs) List(ctx context.Context, opts metav1.ListOptions) (*policyv1.PodDisruptionBudgetList, error) {
	out := &policyv1.PodDisruptionBudgetList{}
	err := p.c.Get().UseProtobufAsDefault().NamespaceIfScoped(p.ns, p.ns != "").Resource("poddisruptionbudgets").VersionedParams(&opts, parameterCodec).Timeout(timeout(opts)).Do(ctx).Into(out)
	return out, err
}
