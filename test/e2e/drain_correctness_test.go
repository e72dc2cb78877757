package e2e

// Drain correctness end to end (issue 14, items 2, 4, 5 and 6): the real
// lifeboat binary, the real API server, kwok's pod shutdown. Answers the
// API server cannot be made to give on demand (a 409 from a
// PodDisruptionBudget status conflict, a webhook's 403) come from a real
// validating admission webhook on pods/eviction, scoped to the test's
// namespace.

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/internal/route"
	"lifeboat.dev/lifeboat/test/testenv"
)

// evictionWebhook is a validating admission webhook for pods/eviction in
// one namespace. decide answers one eviction of a pod (n counts that pod's
// evictions from 1, dry runs left out): nil allows it.
type evictionWebhook struct {
	mu     sync.Mutex
	seen   map[string]int
	decide func(pod string, n int) *metav1.Status
}

// probePod is the name the webhook always refuses; a dry-run eviction of
// it shows when the API server calls the webhook.
const probePod = "webhook-probe"

// startEvictionWebhook serves the webhook over TLS, registers it for ns
// and waits until the API server calls it. Cleanup unregisters and stops it.
func startEvictionWebhook(t *testing.T, ctx context.Context, ns string, decide func(pod string, n int) *metav1.Status) *evictionWebhook {
	t.Helper()
	wh := &evictionWebhook{seen: map[string]int{}, decide: decide}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(wh.serve))
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	name := testenv.UniqueName("lifeboat-test-evictions")
	_, err := kube.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "evictions.lifeboat.test",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To(srv.URL + "/validate"), CABundle: caBundle},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/eviction"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("registering the eviction webhook: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := kube.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("unregistering the eviction webhook: %v", err)
		}
	})
	// The API server picks the configuration up asynchronously; the
	// webhook runs before the pod is looked up, so a pod need not exist.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := kube.Client.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Name: probePod, Namespace: ns},
			DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}},
		})
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "evictions.lifeboat.test") {
			return wh
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API server does not call the eviction webhook (probe eviction: %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (wh *evictionWebhook) serve(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	req := review.Request
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	switch {
	case req.Name == probePod:
		resp.Allowed, resp.Result = false, &metav1.Status{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: "probe"}
	case req.DryRun != nil && *req.DryRun:
	default:
		wh.mu.Lock()
		wh.seen[req.Name]++
		n := wh.seen[req.Name]
		wh.mu.Unlock()
		if st := wh.decide(req.Name, n); st != nil {
			resp.Allowed, resp.Result = false, st
		}
	}
	review.Response = resp
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

func (wh *evictionWebhook) evictions(pod string) int {
	wh.mu.Lock()
	defer wh.mu.Unlock()
	return wh.seen[pod]
}

// Item 2: an instance state change (its deadline is the event's time, so
// no time is left) must not remove pod objects at once: the eviction asks
// for at least 1 s, so the pod goes through a graceful deletion (the
// kubelet's SIGTERM) instead of vanishing while its containers still run.
func TestDrainLateDeadlineIsGraceful(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	group := "late-" + testenv.UniqueName("g")
	id := h.CreateGroup(group, 1)[0]
	node := h.NodeName(id)
	ns := kube.Namespace(t)
	pod, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: node, Grace: 30 * time.Second, ShutdownAfter: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w, err := kube.Client.CoreV1().Pods(ns).Watch(h.Ctx, metav1.ListOptions{ResourceVersion: pod.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	h.PutEvent(route.SourceEC2, route.StateChange, time.Now(), map[string]string{"instance-id": id, "state": "stopping"})
	// The deletion as the API server recorded it: the grace period of the
	// first update that set deletionTimestamp, and whether the pod was
	// removed without one.
	var terminatingGrace *int64
	timeout := time.After(40 * time.Second)
	for gone := false; !gone; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod || p.UID != pod.UID {
				continue
			}
			if ev.Type == watch.Modified && p.DeletionTimestamp != nil && terminatingGrace == nil {
				terminatingGrace = ptr.To(ptr.Deref(p.DeletionGracePeriodSeconds, -1))
			}
			gone = ev.Type == watch.Deleted
		case <-timeout:
			t.Fatal("pod not evicted within 40 s of the state change")
		}
	}
	if terminatingGrace == nil || *terminatingGrace < 1 {
		t.Errorf("pod object removed without a graceful deletion (grace while terminating: %v); an eviction with grace 0 removes it while its containers still run", fmtSeconds(terminatingGrace))
	}
}

func fmtSeconds(s *int64) string {
	if s == nil {
		return "never terminating"
	}
	return (time.Duration(*s) * time.Second).String()
}

// Item 4: a 409 from an eviction because the PodDisruptionBudget's status
// update kept conflicting is retried; the pod is evicted long before the
// Spot notice's deadline (it used to be taken for "pod gone" and waited
// for until the deadline).
func TestDrainEvictionConflictRetried(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	group := "conflict-" + testenv.UniqueName("g")
	id := h.CreateGroup(group, 1)[0]
	node := h.NodeName(id)
	ns := kube.Namespace(t)
	wh := startEvictionWebhook(t, h.Ctx, ns, func(pod string, n int) *metav1.Status {
		if strings.HasPrefix(pod, "conflict-") && n <= 2 {
			return &metav1.Status{Code: http.StatusConflict, Reason: metav1.StatusReasonConflict,
				Message: `Operation cannot be fulfilled on poddisruptionbudgets.policy "guard": the object has been modified; please apply your changes to the latest version and try again`,
				Details: &metav1.StatusDetails{Name: "guard", Group: "policy", Kind: "poddisruptionbudgets"}}
		}
		return nil
	})
	pod, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Name: testenv.UniqueName("conflict"), Node: node, ShutdownAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	h.PutEvent(route.SourceEC2, route.SpotInterruption, sent, map[string]string{"instance-id": id, "instance-action": "terminate"})
	// The Spot deadline is 2 minutes away; the retry backoff is 500 ms.
	h.Eventually(30*time.Second, "the pod evicted after two 409s", func() bool { return !h.podExists(ns, pod.Name) })
	if n := wh.evictions(pod.Name); n < 3 {
		t.Errorf("%d evictions of the pod reached the webhook, want ≥ 3 (two conflicts, then accepted)", n)
	}
	h.Eventually(10*time.Second, "a Drained event", func() bool { return h.NodeEvents(node, "Drained") >= 1 })
}

// Item 5: an eviction an admission webhook refuses (403) does not stop
// the drain: the node's other pods and its system-critical pods (a later
// priority group) are evicted before the deadline, and at the deadline the
// refused pod is force-deleted (--force-delete-at-deadline; with
// --delete-blocked-pods-before-deadline=false, which would delete it
// before, in time for its shutdown: TestBlockedPodGetsItsShutdown).
func TestDrainRefusedEvictionKeepsDraining(t *testing.T) {
	h := newHarness(t, harnessOptions{flags: []string{"--force-delete-at-deadline", "--deadline-margin", "2s", "--delete-blocked-pods-before-deadline=false"}})
	group := "refused-" + testenv.UniqueName("g")
	id := h.CreateGroup(group, 1)[0]
	node := h.NodeName(id)
	ns := kube.Namespace(t)
	startEvictionWebhook(t, h.Ctx, ns, func(pod string, _ int) *metav1.Status {
		if strings.HasPrefix(pod, "refused-") {
			return &metav1.Status{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: "this pod must not be evicted"}
		}
		return nil
	})
	refused, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Name: testenv.UniqueName("refused"), Node: node, Grace: 300 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	other, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: node, ShutdownAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	critical, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: node, ShutdownAfter: time.Second, PriorityClass: "system-cluster-critical"})
	if err != nil {
		t.Fatal(err)
	}
	// The notice was sent 100 s ago: 20 s are left before AWS acts.
	sent := time.Now().Add(-100 * time.Second)
	deadline := sent.Add(2 * time.Minute)
	h.PutEvent(route.SourceEC2, route.SpotInterruption, sent, map[string]string{"instance-id": id, "instance-action": "terminate"})
	h.Eventually(time.Until(deadline)-2*time.Second, "the other pod and the critical pod evicted before the deadline", func() bool {
		return !h.podExists(ns, other.Name) && !h.podExists(ns, critical.Name)
	})
	if !h.podExists(ns, refused.Name) {
		t.Fatal("the refused pod is gone before the deadline")
	}
	h.Eventually(time.Until(deadline)+10*time.Second, "the refused pod force-deleted at the deadline", func() bool { return !h.podExists(ns, refused.Name) })
	if time.Now().Before(deadline.Add(-3 * time.Second)) {
		t.Errorf("refused pod gone at %v, before the deadline %v", time.Now(), deadline)
	}
	h.Eventually(10*time.Second, "the drain reported", func() bool {
		return h.NodeEvents(node, "Drained")+h.NodeEvents(node, "DeadlinePassed") >= 1
	})
}

// Item 6, and issue 23 item 3: after the deadline's force deletion, a pod
// a finalizer holds must not keep the node's work open: the drain ends at
// once (nothing after the deadline may delay a lifecycle completion), its
// Drained Event counts the pod deleted at the deadline, and the message is
// deleted. (Before issue 23 the drain waited drain.DefaultStuckAfter more
// and ended with DeadlinePassed.)
func TestDrainFinalizerDoesNotHoldTheNode(t *testing.T) {
	h := newHarness(t, harnessOptions{flags: []string{"--force-delete-at-deadline"}})
	group := "held-" + testenv.UniqueName("g")
	id := h.CreateGroup(group, 1)[0]
	node := h.NodeName(id)
	ns := kube.Namespace(t)
	pod, err := kube.CreatePod(h.Ctx, testenv.PodSpec{Namespace: ns, Node: node, Grace: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const finalizer = "lifeboat.test/held"
	patch := `{"metadata":{"finalizers":["` + finalizer + `"]}}`
	if _, err := kube.Client.CoreV1().Pods(ns).Patch(h.Ctx, pod.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := kube.Client.CoreV1().Pods(ns).Patch(ctx, pod.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("removing the finalizer: %v", err)
		}
	})
	// A state change: the deadline is now, so the pod is force-deleted at
	// once, and the finalizer keeps its object.
	h.PutEvent(route.SourceEC2, route.StateChange, time.Now(), map[string]string{"instance-id": id, "state": "stopping"})
	h.Eventually(20*time.Second, "the pod deleted with grace 0 (force) and held by its finalizer", func() bool {
		p, err := kube.Client.CoreV1().Pods(ns).Get(h.Ctx, pod.Name, metav1.GetOptions{})
		return err == nil && p.DeletionTimestamp != nil && ptr.Deref(p.DeletionGracePeriodSeconds, -1) == 0
	})
	h.Eventually(20*time.Second, "the drain to end at once (Drained)", func() bool { return h.NodeEvents(node, "Drained") >= 1 })
	h.Eventually(20*time.Second, "the node's work to end (lifeboat.io/events removed)", func() bool {
		return h.Node(node).Annotations["lifeboat.io/events"] == ""
	})
	if !h.podExists(ns, pod.Name) {
		t.Error("the held pod's object is gone; the finalizer should keep it")
	}
}
