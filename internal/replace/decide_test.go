package replace

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// now is a fixed instant: no test depends on today's date.
var now = time.Date(2030, 3, 4, 5, 6, 7, 0, time.UTC)

const node = "ip-10-0-0-1.ec2.internal"

var template = corev1.PodTemplateSpec{
	ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
	Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "web:1"}}},
}

func deployment(replicas int32, mut ...func(*appsv1.Deployment)) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Annotations: map[string]string{}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: template,
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr.To(intstr.FromString("25%")), MaxSurge: ptr.To(intstr.FromString("25%"))}}},
	}
	for _, m := range mut {
		m(d)
	}
	return d
}

func replicaSet() *appsv1.ReplicaSet {
	t := template.DeepCopy()
	t.Labels = map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: "old"}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-old", Labels: t.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Template: *t},
	}
}

// pod is a ready pod of the old ReplicaSet on nodeName, created 40 s
// before it became Ready.
func pod(name, nodeName string, ready bool) corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
			Labels:          map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: "old"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-old", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: nodeName},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status,
			LastTransitionTime: metav1.NewTime(now.Add(-time.Hour + 40*time.Second))}}},
	}
}

func pdb(allowed int32) policyv1.PodDisruptionBudget {
	return policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed}}
}

func TestDecide(t *testing.T) {
	here := pod("web-a", node, true)
	there := pod("web-b", "ip-10-0-0-2.ec2.internal", true)
	thereUnready := pod("web-b", "ip-10-0-0-2.ec2.internal", false)
	spot := now.Add(2*time.Minute - 5*time.Second - 30*time.Second) // a Spot notice less the margin and a 30 s grace
	input := func(mut ...func(*Input)) Input {
		in := Input{Node: node, Pods: []corev1.Pod{here}, ReplicaSet: replicaSet(), Deployment: deployment(1),
			Selected: []corev1.Pod{here}, Now: now, EvictBy: spot, MaxWait: DefaultMaxWait}
		for _, m := range mut {
			m(&in)
		}
		return in
	}
	replace := Decision{Action: Replace, Reason: ReasonLast, Need: 40 * time.Second, NeedFrom: "learned", Restart: true, Want: 1, Rounds: 1, Until: spot}
	tests := []struct {
		name string
		in   Input
		want Decision
	}{
		{"replicas 1", input(), replace},
		{"every ready replica on this node", input(func(in *Input) {
			second := pod("web-c", node, true)
			in.Deployment = deployment(3)
			in.Pods = []corev1.Pod{here, second}
			in.Selected = []corev1.Pod{here, second, thereUnready}
		}), Decision{Action: Replace, Reason: ReasonLast, Need: 40 * time.Second, NeedFrom: "learned", Restart: true, Want: 2, Rounds: 2, Until: spot}},
		{"a ready replica elsewhere: not last", input(func(in *Input) {
			in.Deployment = deployment(2)
			in.Selected = []corev1.Pod{here, there}
		}), Decision{Reason: ReasonNotLast}},
		{"a terminating replica elsewhere does not count", input(func(in *Input) {
			gone := there.DeepCopy()
			gone.DeletionTimestamp = ptr.To(metav1.NewTime(now))
			in.Deployment = deployment(2)
			in.Selected = []corev1.Pod{here, *gone}
		}), replace},
		// The rollout scales the old ReplicaSet down as each new pod is
		// Ready, and may delete web-b (elsewhere) while the drain evicts
		// web-a: only as many new pods as were Ready keep the two.
		{"a PDB allowing 0 disruptions: as many new pods as were Ready, one rollout round each", input(func(in *Input) {
			in.Deployment = deployment(2)
			in.Selected = []corev1.Pod{here, there}
			in.PDBs = []policyv1.PodDisruptionBudget{pdb(0)}
		}), Decision{Action: Replace, Reason: ReasonLast, Need: 40 * time.Second, NeedFrom: "learned", Restart: true, Want: 2, Rounds: 2, Until: spot}},
		{"a PDB allowing 0, three replicas: three rounds of 40 s do not fit", input(func(in *Input) {
			third := pod("web-c", "ip-10-0-0-3.ec2.internal", true)
			in.Deployment = deployment(3)
			in.Selected = []corev1.Pod{here, there, third}
			in.PDBs = []policyv1.PodDisruptionBudget{pdb(0)}
		}), Decision{Reason: ReasonNoTime, Need: 40 * time.Second, NeedFrom: "learned", Rounds: 3}},
		{"maxSurge 2: two new pods a round", input(func(in *Input) {
			third := pod("web-c", "ip-10-0-0-3.ec2.internal", true)
			in.Deployment = deployment(3, func(d *appsv1.Deployment) { d.Spec.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(2)) })
			in.Selected = []corev1.Pod{here, there, third}
			in.PDBs = []policyv1.PodDisruptionBudget{pdb(0)}
		}), Decision{Action: Replace, Reason: ReasonLast, Need: 40 * time.Second, NeedFrom: "learned", Restart: true, Want: 3, Rounds: 2, Until: spot}},
		{"a PDB allowing 1: not last", input(func(in *Input) {
			in.Deployment = deployment(2)
			in.Selected = []corev1.Pod{here, there}
			in.PDBs = []policyv1.PodDisruptionBudget{pdb(1)}
		}), Decision{Reason: ReasonNotLast}},
		{"maxUnavailable > 0", input(func(in *Input) {
			in.Deployment = deployment(1, func(d *appsv1.Deployment) { d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1)) })
		}), Decision{Reason: ReasonMaxUnavailable}},
		{"25% of 4 replicas is 1 unavailable", input(func(in *Input) {
			in.Deployment = deployment(4)
		}), Decision{Reason: ReasonMaxUnavailable}},
		{"Recreate", input(func(in *Input) {
			in.Deployment = deployment(1, func(d *appsv1.Deployment) {
				d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
			})
		}), Decision{Reason: ReasonRecreate}},
		{"paused", input(func(in *Input) {
			in.Deployment = deployment(1, func(d *appsv1.Deployment) { d.Spec.Paused = true })
		}), Decision{Reason: ReasonPaused}},
		{"opted out", input(func(in *Input) {
			in.Deployment = deployment(1, func(d *appsv1.Deployment) { d.Annotations[AnnotationOptOut] = "false" })
		}), Decision{Reason: ReasonOptedOut}},
		{"an HPA owns replicas: the restart leaves them alone, so it proceeds", input(func(in *Input) {
			in.Deployment = deployment(1, func(d *appsv1.Deployment) { d.Spec.Replicas = nil })
		}), replace},
		{"time too short", input(func(in *Input) {
			in.EvictBy = now.Add(30 * time.Second)
		}), Decision{Reason: ReasonNoTime, Need: 40 * time.Second, NeedFrom: "learned", Rounds: 1}},
		{"the annotation overrides the learned time", input(func(in *Input) {
			in.EvictBy = now.Add(30 * time.Second)
			in.Deployment.Annotations[AnnotationSeconds] = "20"
		}), Decision{Action: Replace, Reason: ReasonLast, Need: 20 * time.Second, NeedFrom: "annotation", Restart: true, Want: 1, Rounds: 1, Until: now.Add(30 * time.Second)}},
		{"no pod ever Ready and no annotation", input(func(in *Input) {
			p := pod("web-a", node, false)
			in.Pods, in.Selected = []corev1.Pod{p}, []corev1.Pod{p}
		}), Decision{Reason: ReasonUnknownTime}},
		{"no deadline: MaxWait bounds the wait", input(func(in *Input) {
			in.EvictBy = time.Time{}
		}), Decision{Action: Replace, Reason: ReasonLast, Need: 40 * time.Second, NeedFrom: "learned", Restart: true, Want: 1, Rounds: 1, Until: now.Add(DefaultMaxWait)}},
		{"a rollout already under way: no second restart", input(func(in *Input) {
			in.Deployment.Spec.Template.Annotations = map[string]string{RestartedAt: "earlier"}
		}), Decision{Action: Replace, Reason: ReasonLast, Need: 40 * time.Second, NeedFrom: "learned", Want: 1, Rounds: 1, Until: spot}},
		{"scaled to zero: nothing to keep", input(func(in *Input) {
			in.Deployment = deployment(0)
		}), Decision{Reason: ReasonNotLast}},
		{"a ReplicaSet without a Deployment", input(func(in *Input) { in.Deployment = nil }), Decision{Reason: ReasonNoDeployment}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.in)
			got.Detail = "" // words, not the decision
			if got != tt.want {
				t.Errorf("Decide:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestOwnerReason(t *testing.T) {
	owned := func(apiVersion, kind string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{
			{APIVersion: apiVersion, Kind: kind, Name: "x", Controller: ptr.To(true)}}}}
	}
	for _, tt := range []struct {
		name string
		pod  *corev1.Pod
		want Reason
	}{
		{"a ReplicaSet's", owned("apps/v1", "ReplicaSet"), ""},
		{"a StatefulSet's", owned("apps/v1", "StatefulSet"), ReasonStatefulSet},
		{"a bare pod", &corev1.Pod{}, ReasonBarePod},
		{"a Job's", owned("batch/v1", "Job"), ReasonOtherOwner},
		{"an owner that is not the controller", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "x"}}}}, ReasonBarePod},
	} {
		if got := OwnerReason(tt.pod); got != tt.want {
			t.Errorf("%s: OwnerReason = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestReplacement(t *testing.T) {
	fresh := pod("web-n", "ip-10-0-0-2.ec2.internal", true)
	fresh.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "new"
	onNode := fresh.DeepCopy()
	onNode.Spec.NodeName = node
	unready := pod("web-n", "ip-10-0-0-2.ec2.internal", false)
	unready.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "new"
	oldElsewhere := pod("web-o", "ip-10-0-0-2.ec2.internal", true)
	for _, tt := range []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{"new, Ready, elsewhere", fresh, true},
		{"on the draining node", *onNode, false},
		{"not Ready", unready, false},
		{"of the old template", oldElsewhere, false},
	} {
		if got := Replacement(&tt.pod, node, "old"); got != tt.want {
			t.Errorf("%s: Replacement = %v, want %v", tt.name, got, tt.want)
		}
	}
}
