package controller

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/dsstop"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/kube/clientset"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/plan"
)

// steps is the order in which things happened, across goroutines.
type steps struct {
	mu   sync.Mutex
	seen []string
}

func (s *steps) add(what string) { s.mu.Lock(); defer s.mu.Unlock(); s.seen = append(s.seen, what) }

func (s *steps) String() string { s.mu.Lock(); defer s.mu.Unlock(); return strings.Join(s.seen, ", ") }

// Issue 25 item 4: on a terminate action, with the real drain and the
// real DaemonSet step over a fake API server, the node's ordinary pod is
// evicted and gone, then the opted-in DaemonSet pod is evicted and gone,
// and only then is the action completed with CONTINUE. A DaemonSet pod
// that does not opt in is never evicted.
func TestDaemonSetPodsStoppedAfterOtherPodsBeforeContinue(t *testing.T) {
	for _, tc := range []struct {
		name  string
		all   bool
		optIn bool
		want  string
	}{
		{name: "opted in by annotation", optIn: true,
			want: "evict ns/web, gone ns/web, evict ns/shipper, gone ns/shipper, complete CONTINUE"},
		{name: "all by flag", all: true,
			want: "evict ns/web, gone ns/web, evict ns/shipper, gone ns/shipper, complete CONTINUE"},
		{name: "not opted in: left to the instance (lifeboat before issue 25)",
			want: "evict ns/web, gone ns/web, complete CONTINUE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var order steps
			web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web"}, Spec: corev1.PodSpec{NodeName: "node-a"}}
			shipper := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "shipper", UID: "uid-shipper",
				OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "shipper", UID: "ds", Controller: ptr.To(true)}}},
				Spec: corev1.PodSpec{NodeName: "node-a"}}
			if tc.optIn {
				shipper.Annotations = map[string]string{dsstop.AnnotationStop: "true"}
			}
			client := fake.NewClientset(readyNode("node-a", instA), web, shipper)
			pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
			// The API server accepts each eviction; the kubelet removes
			// the pod 200 ms later. A drain planned again (the hook read
			// gives it a deadline) may evict a pod being evicted again:
			// only the first eviction of a pod is a step.
			var mu sync.Mutex
			asked := map[string]bool{}
			client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "eviction" {
					return false, nil, nil
				}
				ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
				mu.Lock()
				again := asked[ev.Name]
				asked[ev.Name] = true
				mu.Unlock()
				if again {
					return true, nil, nil
				}
				order.add("evict ns/" + ev.Name)
				go func() {
					time.Sleep(200 * time.Millisecond)
					order.add("gone ns/" + ev.Name)
					_ = client.Tracker().Delete(pods, ev.Namespace, ev.Name)
				}()
				return true, nil, nil
			})
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			lc := &fakeLifecycle{owned: true, hook: lifecycle.Hook{HeartbeatTimeout: 30 * time.Second, GlobalTimeout: time.Hour}}
			lc.afterComplete = func() { order.add("complete " + lc.completed[len(lc.completed)-1]) }
			kc := clientset.New(client)
			d := Deps{ASG: lc, Log: log,
				Drainer:    drain.New(kc, testClock, log, drain.Options{}),
				DaemonSets: dsstop.New(kc, testClock, log, dsstop.Options{All: tc.all})}
			c := run(t, client, nodes.Options{}, d, Options{Policy: plan.Policy{DrainKinds: []event.Kind{event.LifecycleTerminate}, CompleteLifecycle: true},
				LifecycleTimeoutResult: "ABANDON", RetryBackoff: 20 * time.Millisecond})
			c.Submit("node-a", instA, time.Time{}, events(t, lifecycleBody(event.TransitionTerminating, instA, "tok-ds")), 1)
			waitFor(t, "the terminate action completed", func() bool { return len(lc.snapshot().completed) == 1 })
			if got := order.String(); got != tc.want {
				t.Errorf("order:\n got %s\nwant %s", got, tc.want)
			}
			_, err := client.CoreV1().Pods("ns").Get(context.Background(), "shipper", metav1.GetOptions{})
			if still := err == nil; still == (tc.optIn || tc.all) {
				t.Errorf("shipper still there: %v (get: %v)", still, err)
			}
		})
	}
}
