// Package kevents owns what the Kubernetes Events lifeboat records carry
// beyond their message: the list of their reasons (Reasons), and fixed
// annotations added to every one (--events-annotations;
// aws-node-termination-handler's KUBERNETES_EVENTS_EXTRA_ANNOTATIONS), so
// that a cluster's event pipeline can route them. It records nothing
// itself.
package kevents

import (
	"maps"

	"k8s.io/apimachinery/pkg/runtime"

	"lifeboat.dev/lifeboat/internal/kube"
)

// Annotated returns r adding ann to every Event; r itself when ann is empty.
// An Event's own annotations win over ann.
func Annotated(r kube.EventRecorder, ann map[string]string) kube.EventRecorder {
	if len(ann) == 0 {
		return r
	}
	return annotated{r: r, ann: maps.Clone(ann)}
}

type annotated struct {
	r   kube.EventRecorder
	ann map[string]string
}

func (a annotated) Event(obj runtime.Object, eventtype, reason, message string) {
	a.r.AnnotatedEventf(obj, maps.Clone(a.ann), eventtype, reason, "%s", message)
}

func (a annotated) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	a.r.AnnotatedEventf(obj, maps.Clone(a.ann), eventtype, reason, messageFmt, args...)
}

func (a annotated) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	merged := maps.Clone(a.ann)
	maps.Copy(merged, annotations)
	a.r.AnnotatedEventf(obj, merged, eventtype, reason, messageFmt, args...)
}
