package kevents

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// recorded is one call that reached the underlying recorder.
type recorded struct {
	ann     map[string]string
	reason  string
	message string
}

type capture struct{ got []recorded }

func (c *capture) Event(_ runtime.Object, _, reason, message string) {
	c.got = append(c.got, recorded{reason: reason, message: message})
}
func (c *capture) Eventf(_ runtime.Object, _, reason, f string, args ...any) {
	c.got = append(c.got, recorded{reason: reason, message: fmt.Sprintf(f, args...)})
}
func (c *capture) AnnotatedEventf(_ runtime.Object, ann map[string]string, _, reason, f string, args ...any) {
	c.got = append(c.got, recorded{ann: ann, reason: reason, message: fmt.Sprintf(f, args...)})
}

func TestAnnotated(t *testing.T) {
	c := &capture{}
	r := Annotated(c, map[string]string{"team": "infra", "route": "pager"})
	node := &corev1.Node{}
	r.Event(node, corev1.EventTypeNormal, "Cordoned", "100% cordoned")
	r.Eventf(node, corev1.EventTypeNormal, "Draining", "%d pods", 3)
	r.AnnotatedEventf(node, map[string]string{"route": "chat"}, corev1.EventTypeWarning, "Stuck", "pod %s", "a/b")
	want := []recorded{
		{ann: map[string]string{"team": "infra", "route": "pager"}, reason: "Cordoned", message: "100% cordoned"},
		{ann: map[string]string{"team": "infra", "route": "pager"}, reason: "Draining", message: "3 pods"},
		{ann: map[string]string{"team": "infra", "route": "chat"}, reason: "Stuck", message: "pod a/b"},
	}
	if d := cmp.Diff(want, c.got, cmp.AllowUnexported(recorded{})); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if Annotated(c, nil) != c {
		t.Error("no annotations must return the recorder itself")
	}
}
