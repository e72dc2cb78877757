package deploy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/test/testenv"
)

const controlPlaneRole = "node-role.kubernetes.io/control-plane"

// F5: on a cluster whose only schedulable node is the control plane,
// installing the chart and upgrading it (new image tag, a changed value)
// completes, for the Deployment (queue mode) and the DaemonSet (IMDS mode,
// with and without host network). The "before" pictures: a Deployment with
// a host port, or with a required pod anti-affinity, like
// aws-node-termination-handler's, never finishes its rollout there.
//
// kwok runs the pods (no container runs): what is tested is scheduling and
// rollout progress, by the real kube-scheduler and the Deployment,
// ReplicaSet and DaemonSet controllers.
func TestUpgradeOnOneNodeF5(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nodes, err := kube.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 0 {
		t.Fatalf("F5 needs a cluster whose only node is the control plane; found %d nodes (left over by another test?)", len(nodes.Items))
	}
	node := kube.Node(t, testenv.NodeSpec{
		Name:   testenv.UniqueName("control-plane"),
		Labels: map[string]string{controlPlaneRole: ""},
		Taints: []corev1.Taint{{Key: controlPlaneRole, Effect: corev1.TaintEffectNoSchedule}},
	})
	// A real lifeboat stops within a second of SIGTERM; kwok removes the
	// pods that long after their deletion.
	fastShutdown := map[string]any{testenv.ShutdownAnnotation: "1"}

	t.Run("queue mode Deployment", func(t *testing.T) {
		ns := kube.Namespace(t)
		enforceRestricted(ctx, t, ns)
		values := func(tag, logLevel string) map[string]any {
			return map[string]any{"queueURL": exampleQueue, "awsRegion": "us-east-1", "clusterName": clusterName,
				"image": map[string]any{"tag": tag}, "logLevel": logLevel, "podAnnotations": fastShutdown}
		}
		before := mustRender(t, "lifeboat", ns, values("0.1.0", "info"))
		applyForTest(t, before.Objects)
		name := before.one(t, "Deployment").GetName()
		first := waitDeployment(ctx, t, ns, name, "0.1.0")
		after := mustRender(t, "lifeboat", ns, values("0.2.0", "debug"))
		start := time.Now()
		if err := apply(ctx, after.Objects); err != nil {
			t.Fatal(err)
		}
		second := waitDeployment(ctx, t, ns, name, "0.2.0")
		t.Logf("upgrade rolled out in %v", time.Since(start).Round(time.Millisecond))
		if second.Name == first.Name {
			t.Fatalf("the upgrade made no new ReplicaSet (%s)", first.Name)
		}
		old, err := kube.Client.AppsV1().ReplicaSets(ns).Get(ctx, first.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if *old.Spec.Replicas != 0 {
			t.Errorf("old ReplicaSet %s still wants %d replicas", old.Name, *old.Spec.Replicas)
		}
		pods := podsOf(ctx, t, ns, second.Spec.Selector)
		for _, p := range pods {
			if p.Spec.NodeName != node.Name {
				t.Errorf("pod %s on %q, want the control-plane node", p.Name, p.Spec.NodeName)
			}
			if v := settings(p.Spec.Containers[0])["LOG_LEVEL"]; v != "debug" {
				t.Errorf("pod %s has LIFEBOAT_LOG_LEVEL %q: the changed value did not roll out", p.Name, v)
			}
		}
	})

	for _, hostNetwork := range []bool{false, true} {
		t.Run(fmt.Sprintf("imds mode DaemonSet hostNetwork=%v", hostNetwork), func(t *testing.T) {
			ns := kube.Namespace(t)
			if !hostNetwork {
				enforceRestricted(ctx, t, ns)
			}
			values := func(tag, logLevel string) map[string]any {
				return map[string]any{"mode": "imds", "useHostNetwork": hostNetwork, "image": map[string]any{"tag": tag}, "logLevel": logLevel, "podAnnotations": fastShutdown}
			}
			before := mustRender(t, "lifeboat", ns, values("0.1.0", "info"))
			applyForTest(t, before.Objects)
			name := before.one(t, "DaemonSet").GetName()
			waitDaemonSet(ctx, t, ns, name, "0.1.0")
			after := mustRender(t, "lifeboat", ns, values("0.2.0", "debug"))
			start := time.Now()
			if err := apply(ctx, after.Objects); err != nil {
				t.Fatal(err)
			}
			ds := waitDaemonSet(ctx, t, ns, name, "0.2.0")
			t.Logf("upgrade rolled out in %v", time.Since(start).Round(time.Millisecond))
			pods := podsOf(ctx, t, ns, ds.Spec.Selector)
			if len(pods) != 1 || pods[0].Spec.NodeName != node.Name || pods[0].Spec.HostNetwork != hostNetwork {
				t.Fatalf("pods after the upgrade: %v; want one on the control-plane node", podSummary(pods))
			}
			if v := settings(pods[0].Spec.Containers[0])["LOG_LEVEL"]; v != "debug" {
				t.Errorf("LIFEBOAT_LOG_LEVEL %q: the changed value did not roll out", v)
			}
		})
	}

	// The "before" pictures, as aws-node-termination-handler's queue-mode
	// Deployment has them: one replica, the default rolling update (which
	// for one replica is maxSurge 1, maxUnavailable 0), and a host port
	// (its metrics and probes ports) or a required anti-affinity. The new
	// pod must start beside the old one, cannot, and the rollout never ends.
	before := []struct {
		name string
		edit func(*corev1.PodSpec, map[string]string)
		why  string // in the scheduler's message
	}{
		{"hostPort", func(ps *corev1.PodSpec, _ map[string]string) {
			ps.Containers[0].Ports = []corev1.ContainerPort{{Name: "http-metrics", ContainerPort: 9092, HostPort: 9092, Protocol: corev1.ProtocolTCP}}
		}, "free ports"},
		{"required pod anti-affinity", func(ps *corev1.PodSpec, l map[string]string) {
			ps.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: l},
				}},
			}}
		}, "anti-affinity"},
	}
	for _, b := range before {
		t.Run("before: "+b.name+" stays Pending", func(t *testing.T) {
			ns := kube.Namespace(t)
			l := map[string]string{"app": "nth-like"}
			ps := corev1.PodSpec{
				Containers:        []corev1.Container{{Name: "handler", Image: "nth-like:v1"}},
				Tolerations:       []corev1.Toleration{{Key: controlPlaneRole, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
				PriorityClassName: "system-cluster-critical",
			}
			b.edit(&ps, l)
			d, err := kube.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "nth-like"},
				Spec: appsv1.DeploymentSpec{
					Replicas: ptr.To[int32](1),
					Selector: &metav1.LabelSelector{MatchLabels: l},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l, Annotations: map[string]string{testenv.ShutdownAnnotation: "1"}}, Spec: ps},
				},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			first := waitDeployment(ctx, t, ns, d.Name, "v1")
			d, err = kube.Client.AppsV1().Deployments(ns).Get(ctx, d.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			d.Spec.Template.Spec.Containers[0].Image = "nth-like:v2"
			if _, err := kube.Client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			// The new pod is Unschedulable, for the reason given.
			var pending corev1.Pod
			err = eventually(ctx, 20*time.Second, "the new pod to be reported Unschedulable", func() (bool, error) {
				for _, p := range podsOf(ctx, t, ns, d.Spec.Selector) {
					if p.Spec.Containers[0].Image != "nth-like:v2" {
						continue
					}
					for _, c := range p.Status.Conditions {
						if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
							pending = p
							return true, nil
						}
					}
				}
				return false, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			msg := podScheduledMessage(&pending)
			if !strings.Contains(msg, b.why) {
				t.Errorf("scheduler says %q; want it to mention %q", msg, b.why)
			}
			// And it stays so: the rollout does not progress.
			time.Sleep(5 * time.Second)
			p, err := kube.Client.CoreV1().Pods(ns).Get(ctx, pending.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending {
				t.Fatalf("new pod %s is %s on %q; the before picture does not reproduce F5", p.Name, p.Status.Phase, p.Spec.NodeName)
			}
			old, err := kube.Client.AppsV1().ReplicaSets(ns).Get(ctx, first.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if *old.Spec.Replicas != 1 || old.Status.ReadyReplicas != 1 {
				t.Errorf("old ReplicaSet wants %d, has %d ready; want it kept at 1 (the rollout is stuck)", *old.Spec.Replicas, old.Status.ReadyReplicas)
			}
			t.Logf("stuck as expected: %s", msg)
		})
	}
}

// enforceRestricted makes the API server admit only pods that meet the
// restricted Pod Security Standard in ns (Pod Security admission): the
// chart's pods must (except with host network, which no standard but
// privileged allows).
func enforceRestricted(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	patch := []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted","pod-security.kubernetes.io/enforce-version":"latest"}}}`)
	if _, err := kube.Client.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitDeployment waits until the Deployment's rollout is complete with every
// pod running image tag, and returns its current ReplicaSet.
func waitDeployment(ctx context.Context, t *testing.T, ns, name, tag string) *appsv1.ReplicaSet {
	t.Helper()
	var d *appsv1.Deployment
	err := eventually(ctx, 60*time.Second, "Deployment "+name+" rolled out with "+tag, func() (bool, error) {
		var err error
		d, err = kube.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		want := *d.Spec.Replicas
		s := d.Status
		done := s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.Replicas == want && s.AvailableReplicas == want && s.UnavailableReplicas == 0
		return done && strings.HasSuffix(d.Spec.Template.Spec.Containers[0].Image, ":"+tag), nil
	})
	if err != nil {
		if d != nil {
			t.Logf("deployment status: %+v; pods: %v", d.Status, podSummary(podsOf(ctx, t, ns, d.Spec.Selector)))
		}
		t.Fatal(err)
	}
	rss, err := kube.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range rss.Items {
		rs := &rss.Items[i]
		if rs.Annotations["deployment.kubernetes.io/revision"] == d.Annotations["deployment.kubernetes.io/revision"] {
			if rs.Status.AvailableReplicas != *d.Spec.Replicas {
				t.Fatalf("current ReplicaSet %s has %d available, want %d", rs.Name, rs.Status.AvailableReplicas, *d.Spec.Replicas)
			}
			return rs
		}
	}
	t.Fatalf("no ReplicaSet of revision %s", d.Annotations["deployment.kubernetes.io/revision"])
	return nil
}

// waitDaemonSet waits until the DaemonSet runs image tag, available, on
// every node it should.
func waitDaemonSet(ctx context.Context, t *testing.T, ns, name, tag string) *appsv1.DaemonSet {
	t.Helper()
	var ds *appsv1.DaemonSet
	err := eventually(ctx, 60*time.Second, "DaemonSet "+name+" rolled out with "+tag, func() (bool, error) {
		var err error
		ds, err = kube.Client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := ds.Status
		done := s.ObservedGeneration >= ds.Generation && s.DesiredNumberScheduled == 1 && s.UpdatedNumberScheduled == 1 &&
			s.NumberAvailable == 1 && s.NumberUnavailable == 0 && s.CurrentNumberScheduled == 1
		if !done || !strings.HasSuffix(ds.Spec.Template.Spec.Containers[0].Image, ":"+tag) {
			return false, nil
		}
		pods := podsOf(ctx, t, ns, ds.Spec.Selector)
		return len(pods) == 1 && strings.HasSuffix(pods[0].Spec.Containers[0].Image, ":"+tag) && testenv.PodReady(&pods[0]), nil
	})
	if err != nil {
		if ds != nil {
			t.Logf("daemonset status: %+v; pods: %v", ds.Status, podSummary(podsOf(ctx, t, ns, ds.Spec.Selector)))
		}
		t.Fatal(err)
	}
	return ds
}

func podsOf(ctx context.Context, t *testing.T, ns string, sel *metav1.LabelSelector) []corev1.Pod {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	list, err := kube.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: s.String()})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func podSummary(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, fmt.Sprintf("%s %s node=%q image=%s %s", p.Name, p.Status.Phase, p.Spec.NodeName, p.Spec.Containers[0].Image, podScheduledMessage(&p)))
	}
	return out
}

func podScheduledMessage(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Message
		}
	}
	return ""
}
