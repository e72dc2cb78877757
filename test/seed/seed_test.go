package seed

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/test/testenv"
)

func evict(t *testing.T, namespace, name string) error {
	t.Helper()
	return env.Client.PolicyV1().Evictions(namespace).Evict(t.Context(), &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
	})
}

func createPod(t *testing.T, spec testenv.PodSpec) *corev1.Pod {
	t.Helper()
	p, err := env.CreatePod(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEvictionAgainstPDB(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	node := env.Node(t, testenv.NodeSpec{})

	blocked := createPod(t, testenv.PodSpec{Namespace: ns, Node: node.Name, Labels: map[string]string{"app": "blocked"}})
	if _, err := env.CreatePDB(t.Context(), testenv.PDBSpec{
		Namespace: ns, Selector: map[string]string{"app": "blocked"}, MinAvailable: ptr.To(intstr.FromInt32(1)),
	}); err != nil {
		t.Fatal(err)
	}
	err := evict(t, ns, blocked.Name)
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("eviction blocked by a PDB: err = %v, want 429 TooManyRequests", err)
	}
	if code := apierrors.ReasonForError(err); code != metav1.StatusReasonTooManyRequests {
		t.Errorf("reason = %s", code)
	}
	var status apierrors.APIStatus
	if s, ok := err.(apierrors.APIStatus); ok {
		status = s
	}
	if status == nil || status.Status().Code != 429 {
		t.Errorf("eviction status = %+v, want code 429", status)
	}
	t.Logf("blocked eviction: %v", err)

	// maxUnavailable needs the pod's controller to count expected pods.
	free := createPod(t, testenv.PodSpec{Namespace: ns, Node: node.Name, Grace: time.Second, OwnerKind: testenv.OwnerReplicaSet, Labels: map[string]string{"app": "free"}})
	pdb, err := env.CreatePDB(t.Context(), testenv.PDBSpec{
		Namespace: ns, Selector: map[string]string{"app": "free"}, MaxUnavailable: ptr.To(intstr.FromInt32(1)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitPDB(t.Context(), ns, pdb.Name, func(p *policyv1.PodDisruptionBudget) bool {
		return p.Status.DisruptionsAllowed == 1
	}); err != nil {
		t.Fatal(err)
	}
	if err := evict(t, ns, free.Name); err != nil {
		t.Fatalf("eviction allowed by the PDB: %v", err)
	}
	if _, err := env.WaitPodGone(t.Context(), ns, free.Name); err != nil {
		t.Fatal(err)
	}
	// The blocked pod is untouched.
	p, err := env.Client.CoreV1().Pods(ns).Get(t.Context(), blocked.Name, metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp != nil {
		t.Errorf("blocked pod after the evictions: %v, deletionTimestamp %v", err, p.GetDeletionTimestamp())
	}
}

// evictAndTime evicts a running pod and returns how long it took to vanish.
func evictAndTime(t *testing.T, ns, name string, wantGrace int64) time.Duration {
	t.Helper()
	start := time.Now()
	if err := evict(t, ns, name); err != nil {
		t.Fatalf("evicting %s: %v", name, err)
	}
	p, err := env.Client.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err == nil {
		if p.DeletionTimestamp == nil || p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != wantGrace {
			t.Errorf("pod being deleted: deletionTimestamp %v, deletionGracePeriodSeconds %v, want grace %d",
				p.DeletionTimestamp, p.DeletionGracePeriodSeconds, wantGrace)
		}
	} else if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	gone, err := env.WaitPodGone(t.Context(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return gone.Sub(start)
}

func TestEvictedPodStopsAfterItsShutdownTime(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	node := env.Node(t, testenv.NodeSpec{})
	pod := createPod(t, testenv.PodSpec{Namespace: ns, Node: node.Name, Grace: 30 * time.Second, ShutdownAfter: 5 * time.Second})
	if got := pod.Annotations[testenv.ShutdownAnnotation]; got != "5" {
		t.Errorf("%s = %q, want 5", testenv.ShutdownAnnotation, got)
	}
	d := evictAndTime(t, ns, pod.Name, 30)
	t.Logf("grace 30 s, shutdown 5 s: gone after %v", d)
	if d < 3*time.Second || d > 15*time.Second {
		t.Errorf("pod vanished after %v, want about 5 s (3-15 s)", d)
	}
}

func TestShutdownTimeSurvivesPodUpdates(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	node := env.Node(t, testenv.NodeSpec{})
	pod := createPod(t, testenv.PodSpec{Namespace: ns, Node: node.Name, Grace: 30 * time.Second, ShutdownAfter: 4 * time.Second})
	start := time.Now()
	if err := evict(t, ns, pod.Name); err != nil {
		t.Fatal(err)
	}
	// kwok plans the deletion again on every update: the end must not move.
	for i := range 3 {
		time.Sleep(time.Second)
		patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{"touched":"%d"}}}`, i))
		if _, err := env.Client.CoreV1().Pods(ns).Patch(t.Context(), pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("patching terminating pod: %v", err)
		}
	}
	gone, err := env.WaitPodGone(t.Context(), ns, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	d := gone.Sub(start)
	t.Logf("grace 30 s, shutdown 4 s, updated 3 times: gone after %v", d)
	if d < 3*time.Second || d > 6*time.Second {
		t.Errorf("pod vanished after %v, want about 4 s", d)
	}
}

func TestEvictedPodStopsAtItsDeadline(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	node := env.Node(t, testenv.NodeSpec{})
	pod := createPod(t, testenv.PodSpec{Namespace: ns, Node: node.Name, Grace: 3 * time.Second})
	d := evictAndTime(t, ns, pod.Name, 3)
	t.Logf("grace 3 s, no shutdown annotation: gone after %v", d)
	// deletionTimestamp has whole seconds, so the deadline can be up to 1 s early.
	if d < 1500*time.Millisecond || d > 8*time.Second {
		t.Errorf("pod vanished after %v, want about 3 s (1.5-8 s)", d)
	}
}

func TestShutdownLongerThanGraceEndsAtDeadline(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	node := env.Node(t, testenv.NodeSpec{})
	pod := createPod(t, testenv.PodSpec{Namespace: ns, Node: node.Name, Grace: 2 * time.Second, ShutdownAfter: 60 * time.Second})
	d := evictAndTime(t, ns, pod.Name, 2)
	t.Logf("grace 2 s, shutdown 60 s: gone after %v", d)
	if d < time.Second || d > 6*time.Second {
		t.Errorf("pod vanished after %v, want about 2 s (the deadline)", d)
	}
}

func TestKwokNodesStayReady(t *testing.T) {
	t.Parallel()
	node := env.Node(t, testenv.NodeSpec{InstanceID: testenv.RandomInstanceID(), AZ: "us-east-1c", InstanceType: "m5.large"})
	if want := "aws:///us-east-1c/"; len(node.Spec.ProviderID) < len(want) || node.Spec.ProviderID[:len(want)] != want {
		t.Errorf("providerID = %q", node.Spec.ProviderID)
	}
	if node.Labels["topology.kubernetes.io/region"] != "us-east-1" {
		t.Errorf("region label = %q", node.Labels["topology.kubernetes.io/region"])
	}
	// kwok renews the node's lease (every 10 s): that is what keeps the
	// node-lifecycle controller from marking the node NotReady later.
	leases := env.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	var first *metav1.MicroTime
	deadline := time.Now().Add(25 * time.Second)
	for {
		l, err := leases.Get(t.Context(), node.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			t.Fatal(err)
		case first == nil:
			first = l.Spec.RenewTime
		case l.Spec.RenewTime != nil && first != nil && l.Spec.RenewTime.After(first.Time):
			t.Logf("lease renewed: %v -> %v", first.Time, l.Spec.RenewTime.Time)
			goto renewed
		}
		if time.Now().After(deadline) {
			t.Fatalf("node lease of %s not renewed within 25 s (first renewTime %v)", node.Name, first)
		}
		time.Sleep(200 * time.Millisecond)
	}
renewed:
	n, err := env.Client.CoreV1().Nodes().Get(t.Context(), node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !testenv.NodeReady(n) {
		t.Errorf("node not Ready: %+v", n.Status.Conditions)
	}
	for _, taint := range n.Spec.Taints {
		if taint.Key == corev1.TaintNodeNotReady || taint.Key == corev1.TaintNodeUnreachable {
			t.Errorf("node has taint %s", taint.ToString())
		}
	}
}

func TestDeploymentRunsOnKwokNode(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	pool := testenv.UniqueName("pool")
	node := env.Node(t, testenv.NodeSpec{Labels: map[string]string{"lifeboat.test/pool": pool}})
	labels := map[string]string{"app": "web"}
	_, err := env.Client.AppsV1().Deployments(ns).Create(t.Context(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"lifeboat.test/pool": pool},
					Containers:   []corev1.Container{{Name: "app", Image: testenv.PauseImage}},
				},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		pods, err := env.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) == 1 && testenv.PodReady(&pods.Items[0]) {
			if got := pods.Items[0].Spec.NodeName; got != node.Name {
				t.Fatalf("pod scheduled on %q, want %q", got, node.Name)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deployment pod not Running on %s within 30 s: %d pods", node.Name, len(pods.Items))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestOwnedPods(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	node := env.Node(t, testenv.NodeSpec{})
	prio := env.PriorityClass(t, 1000)

	rsPod := createPod(t, testenv.PodSpec{Namespace: ns, Node: node.Name, OwnerKind: testenv.OwnerReplicaSet, PriorityClass: prio, Grace: time.Second})
	if ref := metav1.GetControllerOf(rsPod); ref == nil || ref.Kind != "ReplicaSet" {
		t.Errorf("ReplicaSet pod controller = %+v", ref)
	}
	if rsPod.Spec.Priority == nil || *rsPod.Spec.Priority != 1000 {
		t.Errorf("priority = %v, want 1000", rsPod.Spec.Priority)
	}
	dsPod := createPod(t, testenv.PodSpec{Namespace: ns, Node: node.Name, OwnerKind: testenv.OwnerDaemonSet})
	if ref := metav1.GetControllerOf(dsPod); ref == nil || ref.Kind != "DaemonSet" {
		t.Errorf("DaemonSet pod controller = %+v", ref)
	}

	// Evicting the ReplicaSet's pod makes a replacement that stays Pending
	// (its template selects no node); the DaemonSet keeps exactly its pod.
	if err := evict(t, ns, rsPod.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitPodGone(t.Context(), ns, rsPod.Name); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		pods, err := env.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: testenv.OwnerLabel + "=" + rsPod.Name})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) == 1 && pods.Items[0].Name != rsPod.Name {
			if p := pods.Items[0]; p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending {
				t.Errorf("replacement %s on node %q in phase %s, want unscheduled Pending", p.Name, p.Spec.NodeName, p.Status.Phase)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no replacement pod for %s within 15 s (%d pods)", rsPod.Name, len(pods.Items))
		}
		time.Sleep(100 * time.Millisecond)
	}
	pods, err := env.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: testenv.OwnerLabel + "=" + dsPod.Name})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || pods.Items[0].Name != dsPod.Name {
		t.Errorf("DaemonSet pods = %d (want only %s)", len(pods.Items), dsPod.Name)
	}
}
