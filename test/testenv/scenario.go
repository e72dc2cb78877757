package testenv

import (
	"context"
	"fmt"
	"maps"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"golang.org/x/sync/errgroup"
)

// waitTimeout bounds each helper's wait when ctx has no earlier deadline.
const waitTimeout = 60 * time.Second

// pollInterval is how often helpers look again while waiting.
const pollInterval = 50 * time.Millisecond

// OwnerLabel is set on pods made by CreatePod with an OwnerKind; the owning
// ReplicaSet or DaemonSet selects on it.
const OwnerLabel = "lifeboat.test/owner"

// PauseImage is the image of every pod the helpers create. kwok never pulls it.
const PauseImage = "registry.k8s.io/pause:3.10"

// UniqueName returns prefix followed by a random suffix, valid as a DNS label.
func UniqueName(prefix string) string {
	return prefix + "-" + rand.String(6)
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a fresh namespace named after t, waits for its default
// ServiceAccount (needed before any pod can be created), and deletes it in
// t's cleanup. When t fails, the tails of the component logs are printed.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	prefix := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(prefix) > 40 {
		prefix = strings.TrimRight(prefix[:40], "-")
	}
	ns, err := e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "t-" + prefix + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := e.Client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	dumpOnFailure(t, e.Processes()...)
	if err := e.waitServiceAccount(ctx, ns.Name, "default"); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// PriorityClass creates a PriorityClass with a unique name and the given
// value, deleted in t's cleanup, and returns its name.
func (e *Env) PriorityClass(t testing.TB, value int32) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	pc, err := e.Client.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{GenerateName: fmt.Sprintf("prio-%d-", value)},
		Value:      value,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating PriorityClass: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Client.SchedulingV1().PriorityClasses().Delete(ctx, pc.Name, metav1.DeleteOptions{})
	})
	return pc.Name
}

// NodeSpec describes a kwok node.
type NodeSpec struct {
	// Name of the node; empty means a unique EC2-style private DNS name
	// (ip-10-x-y-z.ec2.internal). Give moto's PrivateDnsName to match an
	// instance.
	Name string
	// InstanceID goes into spec.providerID (aws:///<AZ>/<InstanceID>);
	// empty means a unique random i-... ID.
	InstanceID string
	// AZ is the availability zone, default us-east-1a; it also sets the
	// topology zone and region labels.
	AZ string
	// InstanceType sets the node.kubernetes.io/instance-type label when not empty.
	InstanceType string
	// Labels and Annotations are added to the defaults.
	Labels      map[string]string
	Annotations map[string]string
	// Taints are set at creation.
	Taints []corev1.Taint
	// Unschedulable creates the node cordoned.
	Unschedulable bool
}

// ProviderID returns the AWS provider ID of a node: aws:///<az>/<instance-id>.
func ProviderID(az, instanceID string) string {
	return fmt.Sprintf("aws:///%s/%s", az, instanceID)
}

// RandomInstanceID returns a random, well-formed EC2 instance ID.
func RandomInstanceID() string {
	const hex = "0123456789abcdef"
	b := []byte("i-")
	for range 17 {
		b = append(b, hex[rand.Intn(len(hex))])
	}
	return string(b)
}

// CreateNode creates a kwok-managed Node and waits until it is Ready and
// free of the not-ready/unreachable taints (the node-lifecycle controller
// removes the not-ready taint admission puts on every new node; without a
// controller manager only Ready is awaited). The caller deletes it
// (DeleteNode), or uses Node, which does.
func (e *Env) CreateNode(ctx context.Context, spec NodeSpec) (*corev1.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	node := nodeObject(spec)
	spec.Name = node.Name
	if _, err := e.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating node %s: %w", spec.Name, err)
	}
	var last *corev1.Node
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		n, err := e.Client.CoreV1().Nodes().Get(ctx, spec.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = n
		return e.nodeUsable(n), nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for node %s to be Ready without not-ready taint (conditions %v, taints %v): %w",
			spec.Name, conditionsOf(last), taintsOf(last), err)
	}
	return last, nil
}

// nodeUsable reports whether a kwok node is Ready and, with a controller
// manager, rid of its not-ready and unreachable taints.
func (e *Env) nodeUsable(n *corev1.Node) bool {
	if e.opts.NoControllerManager {
		return NodeReady(n) // nobody removes the admission's not-ready taint
	}
	return NodeReady(n) && !HasTaint(n, corev1.TaintNodeNotReady) && !HasTaint(n, corev1.TaintNodeUnreachable)
}

// CreateNodes creates kwok nodes as CreateNode does, parallel at once,
// then waits for all of them with one node list a second instead of a
// poll per node: thousands of nodes (test/bench) are set up in the time
// the API server and the node lifecycle controller need, not in the time
// the client's rate limit allows for the polls. The wait is bounded by a
// minute and a quarter second a node: the node lifecycle controller takes
// the admission's not-ready taint off about five nodes a second here.
// Each spec needs a Name.
func (e *Env) CreateNodes(ctx context.Context, specs []NodeSpec, parallel int) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	want := map[string]bool{}
	for _, spec := range specs {
		if spec.Name == "" {
			return fmt.Errorf("CreateNodes: a spec without a name")
		}
		want[spec.Name] = true
		g.Go(func() error {
			if _, err := e.Client.CoreV1().Nodes().Create(gctx, nodeObject(spec), metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating node %s: %w", spec.Name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	waiting := len(want)
	err := wait.PollUntilContextTimeout(ctx, time.Second, waitTimeout+time.Duration(len(specs))*250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := e.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, nil // the next poll
		}
		waiting = len(want)
		for i := range list.Items {
			if want[list.Items[i].Name] && e.nodeUsable(&list.Items[i]) {
				waiting--
			}
		}
		return waiting == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d of %d nodes to be Ready without not-ready taint: %w", waiting, len(specs), err)
	}
	return nil
}

// nodeObject is the kwok node of spec, its defaults filled in.
func nodeObject(spec NodeSpec) *corev1.Node {
	if spec.AZ == "" {
		spec.AZ = "us-east-1a"
	}
	if spec.InstanceID == "" {
		spec.InstanceID = RandomInstanceID()
	}
	if spec.Name == "" {
		spec.Name = fmt.Sprintf("ip-10-%d-%d-%d.ec2.internal", rand.Intn(256), rand.Intn(256), 1+rand.Intn(254))
	}
	labels := map[string]string{
		"kubernetes.io/hostname":        spec.Name,
		"kubernetes.io/os":              "linux",
		"kubernetes.io/arch":            "amd64",
		"topology.kubernetes.io/zone":   spec.AZ,
		"topology.kubernetes.io/region": strings.TrimRight(spec.AZ, "abcdefghijklmnopqrstuvwxyz"),
		"type":                          "kwok",
	}
	if spec.InstanceType != "" {
		labels["node.kubernetes.io/instance-type"] = spec.InstanceType
	}
	maps.Copy(labels, spec.Labels)
	annotations := map[string]string{KwokNodeAnnotation: "fake"}
	maps.Copy(annotations, spec.Annotations)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Labels: labels, Annotations: annotations},
		Spec: corev1.NodeSpec{
			ProviderID:    ProviderID(spec.AZ, spec.InstanceID),
			Taints:        spec.Taints,
			Unschedulable: spec.Unschedulable,
		},
	}
	return node
}

// Node creates a kwok node like CreateNode, fails t on error, and deletes
// the node in t's cleanup.
func (e *Env) Node(t testing.TB, spec NodeSpec) *corev1.Node {
	t.Helper()
	n, err := e.CreateNode(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.DeleteNode(ctx, n.Name); err != nil {
			t.Error(err)
		}
	})
	return n
}

// DeleteNode deletes a node; a missing node is not an error.
func (e *Env) DeleteNode(ctx context.Context, name string) error {
	err := e.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting node %s: %w", name, err)
	}
	return nil
}

// NodeReady reports whether the node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// HasTaint reports whether the node has a taint with key.
func HasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

func conditionsOf(n *corev1.Node) []string {
	if n == nil {
		return nil
	}
	var out []string
	for _, c := range n.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s", c.Type, c.Status))
	}
	return out
}

func taintsOf(n *corev1.Node) []string {
	if n == nil {
		return nil
	}
	var out []string
	for _, t := range n.Spec.Taints {
		out = append(out, t.ToString())
	}
	return out
}

// Owner kinds for PodSpec.OwnerKind.
const (
	OwnerNone       = ""
	OwnerReplicaSet = "ReplicaSet"
	OwnerDaemonSet  = "DaemonSet"
)

// PodSpec describes a pod bound directly to a node (spec.nodeName, no
// scheduler involved).
type PodSpec struct {
	Namespace string
	// Name of the pod; empty means a unique "pod-xxxxxx".
	Name string
	// Node the pod is bound to (required).
	Node string
	// Grace is terminationGracePeriodSeconds, rounded up to whole seconds.
	// 0 leaves the Kubernetes default (30 s); a negative value means 0 s.
	Grace time.Duration
	// ShutdownAfter is how long the pod really takes to stop once it is
	// being deleted (ShutdownAnnotation); kwok removes it then, or at its
	// deadline if that is earlier. 0 means no annotation: the pod lives
	// until its deadline.
	ShutdownAfter time.Duration
	// PreStop is the container's preStop hook. kwok runs no hook: it is
	// there for what reads the spec (the drain forecast); set
	// ShutdownAfter to how long the hook and the shutdown really take.
	PreStop *corev1.LifecycleHandler
	// PriorityClass names an existing PriorityClass (see Env.PriorityClass).
	PriorityClass string
	// OwnerKind makes the pod owned by a real controller: OwnerReplicaSet
	// (replicas 1) or OwnerDaemonSet (updateStrategy OnDelete, runs only on
	// Node), created with the pod's name after the pod runs and adopting it.
	// OwnerNone leaves the pod bare.
	OwnerKind string
	// ReplacementNodeSelector is the node selector of the ReplicaSet's
	// template, i.e. where a replacement pod may be scheduled once this one
	// is evicted. nil means nowhere: replacements stay Pending and never
	// land on another test's nodes.
	ReplacementNodeSelector map[string]string
	Labels                  map[string]string
	Annotations             map[string]string
	Tolerations             []corev1.Toleration
	// MountAnnotations gives the pod a downward-API volume of its
	// annotations: lifeboat hands the deadline only to pods that can read
	// it (podnotice.Readers).
	MountAnnotations bool
}

// daemonSetTolerations are the tolerations the DaemonSet controller adds to
// its pods (pkg/controller/daemon/util.AddOrUpdateDaemonPodTolerations).
var daemonSetTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// CreatePod creates a pod on spec.Node, waits until it is Running and
// Ready, and for an OwnerKind until its controller has adopted it. It
// returns the pod as last read.
func (e *Env) CreatePod(ctx context.Context, spec PodSpec) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	if spec.Node == "" {
		return nil, fmt.Errorf("creating pod in %s: PodSpec.Node is required", spec.Namespace)
	}
	if spec.Name == "" {
		spec.Name = UniqueName("pod")
	}
	pod := podObject(spec)
	labels, annotations, podSpec := pod.Labels, pod.Annotations, pod.Spec
	if _, err := e.Client.CoreV1().Pods(spec.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating pod %s/%s: %w", spec.Namespace, spec.Name, err)
	}
	got, err := e.waitPod(ctx, spec.Namespace, spec.Name, "Running and Ready", PodReady)
	if err != nil {
		return nil, err
	}

	// The controller is created after the pod runs, so that it finds the pod
	// in its cache and adopts it instead of making its own.
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{OwnerLabel: spec.Name}}
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
		Spec:       *podSpec.DeepCopy(),
	}
	switch spec.OwnerKind {
	case OwnerNone:
		return got, nil
	case OwnerReplicaSet:
		template.Spec.NodeName = ""
		template.Spec.NodeSelector = spec.ReplacementNodeSelector
		if template.Spec.NodeSelector == nil {
			template.Spec.NodeSelector = map[string]string{"lifeboat.test/replacements": "nowhere"}
		}
		_, err = e.Client.AppsV1().ReplicaSets(spec.Namespace).Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: spec.Namespace},
			Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: selector, Template: template},
		}, metav1.CreateOptions{})
	case OwnerDaemonSet:
		// template.Spec.NodeName keeps the DaemonSet on this node only.
		_, err = e.Client.AppsV1().DaemonSets(spec.Namespace).Create(ctx, &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: spec.Namespace},
			Spec: appsv1.DaemonSetSpec{
				Selector:       selector,
				Template:       template,
				UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType},
			},
		}, metav1.CreateOptions{})
	default:
		return nil, fmt.Errorf("creating pod %s/%s: unknown OwnerKind %q", spec.Namespace, spec.Name, spec.OwnerKind)
	}
	if err != nil {
		return nil, fmt.Errorf("creating %s %s/%s: %w", spec.OwnerKind, spec.Namespace, spec.Name, err)
	}
	return e.waitPod(ctx, spec.Namespace, spec.Name, "adopted by its "+spec.OwnerKind, func(p *corev1.Pod) bool {
		ref := metav1.GetControllerOf(p)
		return ref != nil && ref.Kind == spec.OwnerKind && ref.Name == spec.Name
	})
}

// PodReady reports whether a pod is Running with its Ready condition True.
func PodReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitPod polls a pod until ok accepts it.
func (e *Env) waitPod(ctx context.Context, namespace, name, what string, ok func(*corev1.Pod) bool) (*corev1.Pod, error) {
	var last *corev1.Pod
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		p, err := e.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = p
		return ok(p), nil
	})
	if err != nil {
		phase := "unknown"
		if last != nil {
			phase = string(last.Status.Phase)
		}
		return nil, fmt.Errorf("waiting for pod %s/%s to be %s (phase %s): %w", namespace, name, what, phase, err)
	}
	return last, nil
}

// WaitPodGone waits (at most a minute) until the pod named namespace/name
// no longer exists and returns when that was seen.
func (e *Env) WaitPodGone(ctx context.Context, namespace, name string) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	var gone time.Time
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		_, err := e.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			gone = time.Now()
			return true, nil
		}
		return false, err
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("waiting for pod %s/%s to disappear: %w", namespace, name, err)
	}
	return gone, nil
}

// PDBSpec describes a PodDisruptionBudget; set exactly one of MinAvailable
// and MaxUnavailable.
type PDBSpec struct {
	Namespace string
	// Name of the PDB; empty means a unique "pdb-xxxxxx".
	Name           string
	Selector       map[string]string
	MinAvailable   *intstr.IntOrString
	MaxUnavailable *intstr.IntOrString
	// UnhealthyPodEvictionPolicy is IfHealthyBudget (the API default) or AlwaysAllow.
	UnhealthyPodEvictionPolicy *policyv1.UnhealthyPodEvictionPolicyType
}

// GuardPod creates a PodDisruptionBudget named "guard" in namespace, with
// minAvailable 1 over the pods labelled app=app, and waits until it covers
// exactly one healthy pod and allows no disruption: from then on every
// eviction of that pod is refused (429).
func (e *Env) GuardPod(ctx context.Context, namespace, app string) error {
	one := intstr.FromInt32(1)
	if _, err := e.CreatePDB(ctx, PDBSpec{Namespace: namespace, Name: "guard", Selector: map[string]string{"app": app}, MinAvailable: &one}); err != nil {
		return err
	}
	_, err := e.WaitPDB(ctx, namespace, "guard", func(b *policyv1.PodDisruptionBudget) bool {
		return b.Status.ExpectedPods == 1 && b.Status.CurrentHealthy == 1 && b.Status.DisruptionsAllowed == 0
	})
	return err
}

// CreatePDB creates a PodDisruptionBudget and waits until the disruption
// controller has processed it (status.observedGeneration caught up): before
// that every eviction it covers answers 429. Create the pods it selects
// first, so its status counts them. As in any cluster, MaxUnavailable and
// percentages only work for pods with a controller (OwnerKind): for bare
// pods the disruption controller allows no disruption.
func (e *Env) CreatePDB(ctx context.Context, spec PDBSpec) (*policyv1.PodDisruptionBudget, error) {
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	if spec.Name == "" {
		spec.Name = UniqueName("pdb")
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: spec.Namespace},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:                   &metav1.LabelSelector{MatchLabels: spec.Selector},
			MinAvailable:               spec.MinAvailable,
			MaxUnavailable:             spec.MaxUnavailable,
			UnhealthyPodEvictionPolicy: spec.UnhealthyPodEvictionPolicy,
		},
	}
	if _, err := e.Client.PolicyV1().PodDisruptionBudgets(spec.Namespace).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating PodDisruptionBudget %s/%s: %w", spec.Namespace, spec.Name, err)
	}
	return e.WaitPDB(ctx, spec.Namespace, spec.Name, nil)
}

// WaitPDB waits (at most a minute) until the disruption controller has
// processed the current generation of a PDB and ok (if not nil) accepts its
// status.
func (e *Env) WaitPDB(ctx context.Context, namespace, name string, ok func(*policyv1.PodDisruptionBudget) bool) (*policyv1.PodDisruptionBudget, error) {
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	var last *policyv1.PodDisruptionBudget
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		p, err := e.Client.PolicyV1().PodDisruptionBudgets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = p
		return p.Status.ObservedGeneration >= p.Generation && (ok == nil || ok(p)), nil
	})
	if err != nil {
		status := "none"
		if last != nil {
			status = fmt.Sprintf("%+v", last.Status)
		}
		return nil, fmt.Errorf("waiting for PodDisruptionBudget %s/%s (status %s): %w", namespace, name, status, err)
	}
	return last, nil
}

// podObject is the pod of spec (a Name and Node given).
func podObject(spec PodSpec) *corev1.Pod {
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	if spec.OwnerKind != OwnerNone {
		labels[OwnerLabel] = spec.Name
	}
	annotations := maps.Clone(spec.Annotations)
	if spec.ShutdownAfter > 0 {
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[ShutdownAnnotation] = strconv.FormatFloat(spec.ShutdownAfter.Seconds(), 'f', -1, 64)
	}
	podSpec := corev1.PodSpec{
		NodeName:          spec.Node,
		PriorityClassName: spec.PriorityClass,
		Tolerations:       spec.Tolerations,
		Containers:        []corev1.Container{{Name: "app", Image: PauseImage}},
	}
	if spec.PreStop != nil {
		podSpec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: spec.PreStop}
	}
	if spec.MountAnnotations {
		podSpec.Volumes = []corev1.Volume{{Name: "podinfo", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
			Items: []corev1.DownwardAPIVolumeFile{{Path: "annotations", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations"}}}}}}}
		podSpec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "podinfo", MountPath: "/etc/podinfo"}}
	}
	switch {
	case spec.Grace < 0:
		podSpec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	case spec.Grace > 0:
		podSpec.TerminationGracePeriodSeconds = ptr.To(int64(math.Ceil(spec.Grace.Seconds())))
	}
	if spec.OwnerKind == OwnerDaemonSet {
		podSpec.Tolerations = append(append([]corev1.Toleration(nil), podSpec.Tolerations...), daemonSetTolerations...)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: spec.Namespace, Labels: labels, Annotations: annotations},
		Spec:       podSpec,
	}
}

// CreatePods creates pods as CreatePod does (no OwnerKind), parallel at
// once, then waits until all are Running and Ready with one list of each
// namespace a second instead of a poll per pod (see CreateNodes). Each
// spec needs a Name and a Node.
func (e *Env) CreatePods(ctx context.Context, specs []PodSpec, parallel int) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	want := map[string]map[string]bool{} // namespace -> names
	for _, spec := range specs {
		if spec.Name == "" || spec.Node == "" || spec.OwnerKind != OwnerNone {
			return fmt.Errorf("CreatePods: pod %q: a Name and a Node, no OwnerKind", spec.Name)
		}
		if want[spec.Namespace] == nil {
			want[spec.Namespace] = map[string]bool{}
		}
		want[spec.Namespace][spec.Name] = true
		g.Go(func() error {
			if _, err := e.Client.CoreV1().Pods(spec.Namespace).Create(gctx, podObject(spec), metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating pod %s/%s: %w", spec.Namespace, spec.Name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	waiting := len(specs)
	err := wait.PollUntilContextTimeout(ctx, time.Second, waitTimeout+time.Duration(len(specs))*250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		waiting = 0
		for ns, names := range want {
			list, err := e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
			if err != nil {
				return false, nil // the next poll
			}
			ready := 0
			for i := range list.Items {
				if names[list.Items[i].Name] && PodReady(&list.Items[i]) {
					ready++
				}
			}
			waiting += len(names) - ready
		}
		return waiting == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d of %d pods to be Running and Ready: %w", waiting, len(specs), err)
	}
	return nil
}
