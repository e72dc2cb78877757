package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// EventSink writes Events for client-go's event broadcaster (it satisfies
// record.EventSink): the requests of client-go's typed EventSinkImpl, in
// the Event's own namespace.
type EventSink struct{ c *rest.RESTClient }

// EventSink returns the sink writing through r.
func (r *REST) EventSink() EventSink { return EventSink{r.core} }

func (s EventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.c.Post().NamespaceIfScoped(e.Namespace, e.Namespace != "").Resource("events").Body(e).Do(context.Background()).Into(out)
	return out, err
}

func (s EventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.c.Put().NamespaceIfScoped(e.Namespace, e.Namespace != "").Resource("events").Name(e.Name).Body(e).Do(context.Background()).Into(out)
	return out, err
}

// Patch sends the broadcaster's strategic merge patch of a repeated Event
// (its count and last timestamp).
func (s EventSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.c.Patch(types.StrategicMergePatchType).NamespaceIfScoped(e.Namespace, e.Namespace != "").Resource("events").Name(e.Name).Body(data).Do(context.Background()).Into(out)
	return out, err
}
