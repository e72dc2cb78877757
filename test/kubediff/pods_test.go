package kubediff

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/internal/kube"
)

// podWrite is one eviction or deletion both clients make, each of its own
// pod (pod is the pod as created).
type podWrite struct {
	name string
	// pdb puts the pod under a PodDisruptionBudget that allows no
	// disruption.
	pdb  bool
	do   func(ctx context.Context, c kube.Client, pod *corev1.Pod) error
	want string
	// after is what the pod must be once written: gone, or deleting with
	// this grace (0: untouched).
	gone  bool
	grace int64
}

func evict(grace *int64, uid func(*corev1.Pod) types.UID) func(ctx context.Context, c kube.Client, pod *corev1.Pod) error {
	return func(ctx context.Context, c kube.Client, pod *corev1.Pod) error {
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
		if grace != nil || uid != nil {
			ev.DeleteOptions = &metav1.DeleteOptions{GracePeriodSeconds: grace}
			if uid != nil {
				ev.DeleteOptions.Preconditions = &metav1.Preconditions{UID: ptr.To(uid(pod))}
			}
		}
		return c.Pods(pod.Namespace).EvictV1(ctx, ev)
	}
}

func del(opts func(*corev1.Pod) metav1.DeleteOptions) func(ctx context.Context, c kube.Client, pod *corev1.Pod) error {
	return func(ctx context.Context, c kube.Client, pod *corev1.Pod) error {
		return c.Pods(pod.Namespace).Delete(ctx, pod.Name, opts(pod))
	}
}

func ownUID(p *corev1.Pod) types.UID { return p.UID }

func otherUID(*corev1.Pod) types.UID { return "00000000-0000-0000-0000-000000000000" }

// TestPodWritesAgree evicts and deletes pods through both clients, each
// its own pod, as the drain does (eviction with the pod's UID as
// precondition and a grace period, deletion with grace 0 and the UID):
// the same requests, the same pods afterwards, the same errors (NotFound,
// Conflict). Under a PodDisruptionBudget that allows nothing, the API
// server answers 429 with Retry-After; ours returns it at once (the
// drain's visible backoff), client-go's typed client waits the
// Retry-After and asks again: that difference is asserted.
func TestPodWritesAgree(t *testing.T) {
	writes := []podWrite{
		{name: "eviction", do: evict(nil, nil), grace: 30},
		{name: "eviction with grace and the UID", do: evict(ptr.To[int64](5), ownUID), grace: 5},
		// An eviction whose UID precondition fails is left out: the API
		// server retries a conflicting eviction for 10 s (EvictionsRetry)
		// before it answers 409, the same for both clients. The deletion
		// below checks the same precondition at once.
		{name: "eviction of a missing pod", want: "NotFound", do: func(ctx context.Context, c kube.Client, pod *corev1.Pod) error {
			return c.Pods(pod.Namespace).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "no-such-pod", Namespace: pod.Namespace}})
		}},
		{name: "deletion with grace 0 and the UID", gone: true, do: del(func(p *corev1.Pod) metav1.DeleteOptions {
			return metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &p.UID}}
		})},
		{name: "deletion with grace", grace: 7, do: del(func(p *corev1.Pod) metav1.DeleteOptions {
			return metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](7)}
		})},
		{name: "deletion of another pod's UID", want: "Conflict", do: del(func(p *corev1.Pod) metav1.DeleteOptions {
			return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(otherUID(p))}}
		})},
		{name: "deletion with a stale resourceVersion", want: "Conflict", do: del(func(p *corev1.Pod) metav1.DeleteOptions {
			return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: ptr.To("1")}}
		})},
		{name: "deletion of a missing pod", want: "NotFound", do: func(ctx context.Context, c kube.Client, pod *corev1.Pod) error {
			return c.Pods(pod.Namespace).Delete(ctx, "no-such-pod", metav1.DeleteOptions{})
		}},
	}
	ns := env.Namespace(t)
	nodeName, _ := names("pods")
	node(t, nodeName, t.Name())
	for _, ct := range contentTypes {
		t.Run(string(ct), func(t *testing.T) {
			p := newPair(t, config(env.Config, ct))
			for i, w := range writes {
				on, ln := names(string(ct)[:4] + "-" + string(rune('a'+i)))
				op := pod(t, ns, on, nodeName, map[string]string{"pod": on})
				lp := pod(t, ns, ln, nodeName, map[string]string{"pod": ln})
				so, sl := subst{on: "POD", string(op.UID): "UID"}, subst{ln: "POD", string(lp.UID): "UID"}
				ctx, cancel := contextTimeout(opTimeout)
				oerr, lerr := w.do(ctx, p.ours.client, op), w.do(ctx, p.lib.client, lp)
				cancel()
				sameError(t, w.name, w.want, oerr, lerr, so, sl)
				sameWire(t, w.name, p, requestsOnly, so, sl)
				o, oerr := afterWrite(t, ns, on)
				l, lerr := afterWrite(t, ns, ln)
				switch {
				case w.gone && (!apierrors.IsNotFound(oerr) || !apierrors.IsNotFound(lerr)):
					t.Errorf("%s: want both pods gone, ours: %v, client-go: %v", w.name, oerr, lerr)
				case w.gone:
				case oerr != nil || lerr != nil:
					t.Errorf("%s: reading the pods: ours: %v, client-go: %v", w.name, oerr, lerr)
				default:
					sameObject(t, w.name+": the pod afterwards", o, l, so, sl)
					if g := ptr.Deref(o.DeletionGracePeriodSeconds, 0); g != w.grace {
						t.Errorf("%s: ours left the pod with deletion grace %d, want %d", w.name, g, w.grace)
					}
				}
			}
		})
	}
}

func afterWrite(t *testing.T, ns, name string) (*corev1.Pod, error) {
	t.Helper()
	ctx, cancel := contextTimeout(opTimeout)
	defer cancel()
	return env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
}

// TestEvictionBlockedByBudget evicts a running pod under a
// PodDisruptionBudget that allows no disruption. The API server answers
// 429 with the DisruptionBudget cause and no Retry-After (it sets one,
// 10 s, only while the disruption controller has not processed the budget
// yet). So client-go's typed client, which retries a 429 only after a
// Retry-After, returns it at once too: both send the eviction once and
// return the same error. (kube.REST also sends it only once when a
// Retry-After comes: internal/kube's TestPodsEvictionsAndPDBs.)
func TestEvictionBlockedByBudget(t *testing.T) {
	ns := env.Namespace(t)
	nodeName, _ := names("budget")
	node(t, nodeName, t.Name())
	for _, ct := range contentTypes {
		t.Run(string(ct), func(t *testing.T) {
			p := newPair(t, config(env.Config, ct))
			on, ln := names("pdb-" + string(ct)[:4])
			// The API server ignores budgets for Pending pods: these run.
			op := running(t, pod(t, ns, on, nodeName, map[string]string{"pod": on}))
			lp := running(t, pod(t, ns, ln, nodeName, map[string]string{"pod": ln}))
			pdb(t, ns, on, map[string]string{"pod": on})
			pdb(t, ns, ln, map[string]string{"pod": ln})
			so, sl := subst{on: "POD", string(op.UID): "UID"}, subst{ln: "POD", string(lp.UID): "UID"}

			ctx, cancel := contextTimeout(opTimeout)
			defer cancel()
			oerr := evict(ptr.To[int64](5), ownUID)(ctx, p.ours.client, op)
			lerr := evict(ptr.To[int64](5), ownUID)(ctx, p.lib.client, lp)
			sameError(t, "blocked eviction", "TooManyRequests", oerr, lerr, so, sl)
			var status apierrors.APIStatus
			if errors.As(oerr, &status) {
				if s := status.Status(); s.Details == nil || len(s.Details.Causes) != 1 || s.Details.Causes[0].Type != policyv1.DisruptionBudgetCause {
					t.Errorf("ours: status %+v, want the DisruptionBudget cause", s)
				}
			}
			x := sameWire(t, "blocked eviction", p, withAnswers, so, sl)
			if len(x) != 1 || x[0].Status != 429 || x[0].RetryAfter != "" {
				t.Errorf("ours sent %+v, want one request answered 429 without a Retry-After", x)
			}
		})
	}
}

// running sets a pod's status to Running and Ready, as a kubelet would.
func running(t *testing.T, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx, cancel := contextTimeout(opTimeout)
	defer cancel()
	p = p.DeepCopy()
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	got, err := env.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("marking pod %s/%s running: %v", p.Namespace, p.Name, err)
	}
	return got
}
