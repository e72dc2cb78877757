package podnotice_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/kube/clientset"
	"lifeboat.dev/lifeboat/internal/podnotice"
)

var deadline = time.Date(2030, 1, 1, 12, 2, 0, 0, time.FixedZone("CET", 3600))

func pod(name string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: annotations}}
}

func TestAnnotate(t *testing.T) {
	told := map[string]string{podnotice.AnnotationDeadline: "2030-01-01T11:02:00Z", podnotice.AnnotationReason: "spot-interruption"}
	tests := []struct {
		name    string
		pods    []*corev1.Pod
		notice  podnotice.Notice
		refuse  error // every patch's answer (nil: accepted)
		want    map[string]map[string]string
		patches int
		result  podnotice.Result
	}{
		{name: "deadline and reason, in UTC", pods: []*corev1.Pod{pod("a", nil), pod("b", map[string]string{"keep": "me"})},
			notice:  podnotice.Notice{Deadline: deadline, Reason: "spot-interruption"},
			want:    map[string]map[string]string{"a": told, "b": {"keep": "me", podnotice.AnnotationDeadline: "2030-01-01T11:02:00Z", podnotice.AnnotationReason: "spot-interruption"}},
			patches: 2, result: podnotice.Result{Written: 2}},
		{name: "already told: no write (idempotent)", pods: []*corev1.Pod{pod("a", told)},
			notice: podnotice.Notice{Deadline: deadline, Reason: "spot-interruption"},
			want:   map[string]map[string]string{"a": told}, result: podnotice.Result{Unchanged: 1}},
		{name: "no deadline known: reason only", pods: []*corev1.Pod{pod("a", nil)},
			notice: podnotice.Notice{Reason: "scheduled-change"},
			want:   map[string]map[string]string{"a": {podnotice.AnnotationReason: "scheduled-change"}}, patches: 1, result: podnotice.Result{Written: 1}},
		{name: "a deadline no longer known is removed", pods: []*corev1.Pod{pod("a", told)},
			notice: podnotice.Notice{Reason: "scheduled-change"},
			want:   map[string]map[string]string{"a": {podnotice.AnnotationReason: "scheduled-change"}}, patches: 1, result: podnotice.Result{Written: 1}},
		{name: "403 (pods patch not granted): counted, first error kept", pods: []*corev1.Pod{pod("a", nil), pod("b", nil)},
			notice: podnotice.Notice{Deadline: deadline, Reason: "spot-interruption"},
			refuse: apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "a", errors.New("no")),
			want:   map[string]map[string]string{"a": nil, "b": nil}, patches: 2, result: podnotice.Result{Failed: 2}},
		{name: "pod gone: not a failure", pods: []*corev1.Pod{pod("a", nil)},
			notice: podnotice.Notice{Deadline: deadline, Reason: "spot-interruption"},
			refuse: apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "a"),
			want:   map[string]map[string]string{"a": nil}, patches: 1, result: podnotice.Result{Gone: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := make([]runtime.Object, len(tt.pods))
			list := make([]corev1.Pod, len(tt.pods))
			for i, p := range tt.pods {
				objs[i], list[i] = p, *p
			}
			cs := fake.NewClientset(objs...)
			patches := 0
			cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				patches++
				if tt.refuse != nil {
					return true, nil, tt.refuse
				}
				return false, nil, nil
			})
			got := podnotice.Annotate(context.Background(), clientset.New(cs), list, tt.notice, 4)
			if (got.Err != nil) != (tt.result.Failed > 0) {
				t.Errorf("Err = %v, want one only with failures", got.Err)
			}
			got.Err = nil
			if got != tt.result {
				t.Errorf("Result = %+v, want %+v", got, tt.result)
			}
			if patches != tt.patches {
				t.Errorf("%d patches, want %d", patches, tt.patches)
			}
			for name, want := range tt.want {
				p, err := cs.CoreV1().Pods("ns").Get(context.Background(), name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if len(p.Annotations) != len(want) {
					t.Errorf("pod %s annotations %v, want %v", name, p.Annotations, want)
				}
				for k, v := range want {
					if p.Annotations[k] != v {
						t.Errorf("pod %s annotations %v, want %v", name, p.Annotations, want)
					}
				}
			}
		})
	}
}

// A patch the API server never answers holds the step up for Bound at
// most: the eviction after it is delayed no longer. (The hang is in a
// wrapper ahead of the fake clientset, which ignores ctx, as a hung
// connection would without a timeout; not in a reactor, which runs under
// the fake's one lock and so would hold up b's patch too whenever a's
// went first.)
func TestAnnotateIsBounded(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	cs := hangingPatch{Client: clientset.New(fake.NewClientset(pod("a", nil), pod("b", nil))), name: "a", release: release}
	start := time.Now()
	r := podnotice.Annotate(context.Background(), cs, []corev1.Pod{*pod("a", nil), *pod("b", nil)}, podnotice.Notice{Reason: "x"}, 2)
	if took := time.Since(start); took < podnotice.Bound || took > podnotice.Bound+time.Second {
		t.Errorf("Annotate returned after %v, want after Bound (%v)", took, podnotice.Bound)
	}
	if r.Written != 1 || r.Failed != 1 || !errors.Is(r.Err, context.DeadlineExceeded) {
		t.Errorf("Result = %+v, want b written, a failed with the deadline exceeded", r)
	}
}

// hangingPatch is a kube.Client whose patch of the pod name never returns
// until release is closed.
type hangingPatch struct {
	kube.Client
	name    string
	release chan struct{}
}

func (h hangingPatch) Pods(namespace string) kube.PodClient {
	return hangingPods{PodClient: h.Client.Pods(namespace), h: h}
}

type hangingPods struct {
	kube.PodClient
	h hangingPatch
}

func (p hangingPods) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*corev1.Pod, error) {
	if name == p.h.name {
		<-p.h.release
	}
	return p.PodClient.Patch(ctx, name, pt, data, opts, sub...)
}
