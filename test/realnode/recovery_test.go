package realnode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/internal/route"
	"lifeboat.dev/lifeboat/test/testenv"
)

const (
	// recoveryBound is how long after the power-off the replacements must
	// run with lifeboat: Kubernetes force-deletes the pods of an
	// out-of-service node only once it is also NotReady
	// (--node-monitor-grace-period, default 50 s, kept) and its pod
	// garbage collector looks every 20 s.
	recoveryBound = 120 * time.Second
	// harmWatch is how long the case without lifeboat is watched.
	harmWatch = 90 * time.Second
)

// TestTimeToRecovery measures the time from a node's power-off to its
// workloads' replacements Running on the other node: a StatefulSet pod and
// a one-replica Deployment's pod, each with a ReadWriteOnce volume of an
// attachRequired CSI driver, so that the real kube-controller-manager's
// attach-detach controller attaches it through a VolumeAttachment (the
// test plays the CSI driver's attacher and node plugin: csi_test.go).
//
// Two real nodes in one group; the workloads run on A, their volumes
// attached there (a VolumeAttachment each). A Spot interruption warning
// (instance-action "stop") for A is sent and A is powered off 2 s later
// (with lifeboat: once its drain began, if that is later), before its pods
// could finish their 20 s shutdown; EC2 says the instance
// stopped (moto's instance is stopped and the state-change notifications
// put on the bus). The Node stays, as it does for a stopped instance.
//
//   - without lifeboat: after harmWatch neither workload runs on B and
//     both old pods are still there: the StatefulSet pod is never replaced
//     while its Node exists, and the Deployment's pod is only deleted after
//     the unreachable taint's 300 s toleration, then cannot free its volume
//     while the old pod is stuck.
//   - lifeboat without --out-of-service-taint: A is drained at the notice,
//     so both old pods are Terminating; after harmWatch they still are
//     (their kubelet is gone) and neither workload runs on B.
//   - lifeboat with --out-of-service-taint: drained at the notice and
//     tainted out-of-service on the state-change notification; both
//     replacements run on B within recoveryBound.
func TestTimeToRecovery(t *testing.T) {
	for _, c := range []struct {
		name     string
		lifeboat bool
		flags    []string
	}{
		{name: "without lifeboat"},
		{name: "lifeboat without the taint", lifeboat: true},
		{name: "with lifeboat", lifeboat: true, flags: []string{"--out-of-service-taint"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			recovers := len(c.flags) > 0
			w := newWorld(t, worldOptions{lifeboat: c.lifeboat, flags: c.flags, timeout: 6 * time.Minute})
			disk := startCSI(w.Ctx, t)
			ids := w.CreateGroup("ttr", 2)
			a, b := ids[0], ids[1]
			nodeA, nodeB := w.NodeName(a), w.NodeName(b)
			plugin := disk.startCSINode(w.Ctx, t, w.machines.Node(a))
			disk.startCSINode(w.Ctx, t, w.machines.Node(b))

			// The workloads start on A: B is cordoned until they run.
			w.setUnschedulable(nodeB, true)
			sts, dep := w.statefulSetWithVolume("db"), w.deploymentWithVolume("web")
			old := map[string]types.UID{}
			for _, app := range []string{sts, dep} {
				w.Eventually(90*time.Second, app+" running on "+nodeA, func() bool {
					p, ok := w.runningPod(app, nodeA)
					old[app] = p.UID
					return ok
				})
			}
			w.Eventually(30*time.Second, "both volumes attached to "+nodeA, func() bool {
				return len(w.attachedTo(nodeA)) == 2
			})
			w.setUnschedulable(nodeB, false)

			notice := time.Now()
			w.PutEvent(route.SourceEC2, route.SpotInterruption, notice, map[string]string{"instance-id": a, "instance-action": "stop"})
			if c.lifeboat { // the power-off comes once the drain began
				w.Eventually(15*time.Second, nodeA+" cordoned and both pods evicted by lifeboat", func() bool {
					for _, app := range []string{sts, dep} {
						if p, ok := w.pod(old[app]); !ok || p.DeletionTimestamp == nil {
							return false
						}
					}
					return w.Node(nodeA).Spec.Unschedulable
				})
			}
			time.Sleep(time.Until(notice.Add(2 * time.Second)))
			plugin.Stop()
			off := w.stop(a)

			watch := recoveryBound
			if !recovers {
				watch = harmWatch
			}
			tl := w.watchRecovery(off, off.Add(watch), nodeA, nodeB, map[string]types.UID{sts: old[sts], dep: old[dep]})
			t.Logf("%s: %s", c.name, tl)
			for _, app := range []string{sts, dep} {
				running, ok := tl.running[app]
				switch {
				case recovers && !ok:
					t.Errorf("%s: no replacement Running on %s %v after the power-off", app, nodeB, recoveryBound)
				case recovers:
					t.Logf("TIME TO RECOVERY %s, %s: %.1f s", app, c.name, running.Sub(off).Seconds())
				case ok:
					t.Errorf("%s: replacement Running on %s %.1f s after the power-off (%s); the harm is that it is not", app, nodeB, running.Sub(off).Seconds(), c.name)
				default:
					t.Logf("TIME TO RECOVERY %s, %s: not recovered after %v (%s)", app, c.name, harmWatch, w.podStates(app))
					p, present := w.pod(old[app])
					if !present {
						t.Errorf("%s: the old pod is gone after %v (%s); the harm is that it stays", app, harmWatch, c.name)
					} else if drained := p.DeletionTimestamp != nil; drained != c.lifeboat {
						t.Errorf("%s: the old pod Terminating = %t after %v (%s), want %t", app, drained, harmWatch, c.name, c.lifeboat)
					}
				}
			}
			if _, ok := tl.tainted(); ok != recovers {
				t.Errorf("%s: %s on %s = %t, want %t", c.name, outOfServiceTaint, nodeA, ok, recovers)
			}
			if !recovers && len(w.attachedTo(nodeA)) != 2 {
				t.Errorf("the volumes left %s after %v (%s); the harm is that they stay attached", nodeA, harmWatch, c.name)
			}
		})
	}
}

const outOfServiceTaint = "node.kubernetes.io/out-of-service"

// setUnschedulable cordons or uncordons a node.
func (w *world) setUnschedulable(node string, on bool) {
	w.T.Helper()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	if _, err := suite.Kube.Client.CoreV1().Nodes().Patch(w.Ctx, node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		w.T.Fatal(err)
	}
}

// stop powers the node of an instance off and stops the instance in EC2
// (moto) with its state-change notifications, as a Spot stop does; the
// Node stays. It returns the time of the power-off.
func (w *world) stop(instanceID string) time.Time {
	w.T.Helper()
	inst, ok := w.Sim.Instance(instanceID)
	if !ok {
		w.T.Fatalf("no instance %s", instanceID)
	}
	w.machines.PowerOff(inst)
	off, _ := w.machines.PoweredOff(instanceID)
	api := ec2.NewFromConfig(testenv.MotoAWSConfig(), func(o *ec2.Options) { o.BaseEndpoint = aws.String(suite.Moto.Endpoint) })
	if _, err := api.StopInstances(w.Ctx, &ec2.StopInstancesInput{InstanceIds: []string{instanceID}}); err != nil {
		w.T.Fatal(err)
	}
	for _, state := range []string{"stopping", "stopped"} {
		w.PutEvent(route.SourceEC2, route.StateChange, time.Now(), map[string]string{"instance-id": instanceID, "state": state})
	}
	return off
}

// volumeFor creates a PersistentVolume of the CSI driver, pre-bound to the
// claim ns/claim, ReadWriteOnce as an EBS volume is.
func (w *world) volumeFor(claim string) {
	w.T.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: w.ns + "-" + claim},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "",
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: w.ns, Name: claim},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: csiDriverName, VolumeHandle: "vol-" + w.ns + "-" + claim,
			}},
		},
	}
	if _, err := suite.Kube.Client.CoreV1().PersistentVolumes().Create(w.Ctx, pv, metav1.CreateOptions{}); err != nil {
		w.T.Fatal(err)
	}
	w.T.Cleanup(func() {
		_ = suite.Kube.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
}

func claimSpec() corev1.PersistentVolumeClaimSpec {
	return corev1.PersistentVolumeClaimSpec{
		AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		StorageClassName: ptr.To(""),
		Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}
}

// podTemplate is the workload (its SIGTERM handler works 20 s) with the
// claim mounted at /data; each pod records under its own name
// (testenv.WorkloadDeployment's template).
func (w *world) podTemplate(app string) corev1.PodTemplateSpec {
	tmpl := testenv.WorkloadDeployment(testenv.WorkloadSpec{Namespace: w.ns, Name: app, RecordDir: w.records,
		Shutdown: 20 * time.Second, Grace: 30 * time.Second}, 1).Spec.Template
	c := &tmpl.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: "/data"})
	return tmpl
}

// statefulSetWithVolume creates a one-replica StatefulSet whose claim
// template gives its pod a volume; it returns the app label.
func (w *world) statefulSetWithVolume(app string) string {
	w.T.Helper()
	w.volumeFor("data-" + app + "-0")
	tmpl := w.podTemplate(app)
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: app},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(1)), ServiceName: app,
			Selector:             &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Template:             tmpl,
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: claimSpec()}},
		},
	}
	if _, err := suite.Kube.Client.AppsV1().StatefulSets(w.ns).Create(w.Ctx, sts, metav1.CreateOptions{}); err != nil {
		w.T.Fatal(err)
	}
	return app
}

// deploymentWithVolume creates a one-replica Deployment whose pod mounts a
// claim; it returns the app label.
func (w *world) deploymentWithVolume(app string) string {
	w.T.Helper()
	claim := app + "-data"
	w.volumeFor(claim)
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: claim}, Spec: claimSpec()}
	if _, err := suite.Kube.Client.CoreV1().PersistentVolumeClaims(w.ns).Create(w.Ctx, pvc, metav1.CreateOptions{}); err != nil {
		w.T.Fatal(err)
	}
	tmpl := w.podTemplate(app)
	tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: app},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Template: tmpl,
		},
	}
	if _, err := suite.Kube.Client.AppsV1().Deployments(w.ns).Create(w.Ctx, dep, metav1.CreateOptions{}); err != nil {
		w.T.Fatal(err)
	}
	return app
}

// runningPod returns the app's pod that is Running on node and not being
// deleted.
func (w *world) runningPod(app, node string) (corev1.Pod, bool) {
	list, err := suite.Kube.Client.CoreV1().Pods(w.ns).List(w.Ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return corev1.Pod{}, false
	}
	for _, p := range list.Items {
		if p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			return p, true
		}
	}
	return corev1.Pod{}, false
}

// pod returns the namespace's pod with uid, if it still exists.
func (w *world) pod(uid types.UID) (corev1.Pod, bool) {
	list, err := suite.Kube.Client.CoreV1().Pods(w.ns).List(w.Ctx, metav1.ListOptions{})
	if err != nil {
		w.T.Fatal(err)
	}
	for _, p := range list.Items {
		if p.UID == uid {
			return p, true
		}
	}
	return corev1.Pod{}, false
}

// attachedTo returns the persistent volumes of the test's namespace that a
// VolumeAttachment marks attached to node.
func (w *world) attachedTo(node string) []string {
	vas, err := suite.Kube.Client.StorageV1().VolumeAttachments().List(w.Ctx, metav1.ListOptions{})
	if err != nil {
		w.T.Fatal(err)
	}
	var pvs []string
	for _, va := range vas.Items {
		if pv := va.Spec.Source.PersistentVolumeName; va.Spec.NodeName == node && va.Status.Attached && pv != nil && strings.HasPrefix(*pv, w.ns+"-") {
			pvs = append(pvs, *pv)
		}
	}
	return pvs
}

// podStates describes the app's pods: name, node, phase, Terminating.
func (w *world) podStates(app string) string {
	list, err := suite.Kube.Client.CoreV1().Pods(w.ns).List(w.Ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return err.Error()
	}
	var s []string
	for _, p := range list.Items {
		d := fmt.Sprintf("%s on %s %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		if p.DeletionTimestamp != nil {
			d += " Terminating"
		}
		s = append(s, d)
	}
	return "pods: " + strings.Join(s, ", ")
}

// recoveryTimeline is what happened after the power-off, by when it was
// first seen (polled every 200 ms).
type recoveryTimeline struct {
	off     time.Time
	events  map[string]time.Time // "tainted", "NotReady", "<app> old pod gone", "<app> volume detached from A"
	running map[string]time.Time // by app: replacement Running on B
}

func (tl recoveryTimeline) tainted() (time.Time, bool) {
	at, ok := tl.events["tainted"]
	return at, ok
}

func (tl recoveryTimeline) String() string {
	var s []string
	add := func(what string, at time.Time) {
		s = append(s, fmt.Sprintf("%s +%.1fs", what, at.Sub(tl.off).Seconds()))
	}
	for _, k := range []string{"tainted", "NotReady"} {
		if at, ok := tl.events[k]; ok {
			add(k, at)
		}
	}
	for k, at := range tl.events {
		if k != "tainted" && k != "NotReady" {
			add(k, at)
		}
	}
	for app, at := range tl.running {
		add(app+" Running on the other node", at)
	}
	return "after the power-off: " + strings.Join(s, "; ")
}

// watchRecovery polls until both apps run on to (or until end) and
// records the timeline.
func (w *world) watchRecovery(off, end time.Time, from, to string, old map[string]types.UID) recoveryTimeline {
	tl := recoveryTimeline{off: off, events: map[string]time.Time{}, running: map[string]time.Time{}}
	see := func(what string, ok bool) {
		if _, seen := tl.events[what]; ok && !seen {
			tl.events[what] = time.Now()
		}
	}
	for time.Now().Before(end) && len(tl.running) < len(old) {
		if n, ok := w.LookupNode(from); ok {
			see("tainted", testenv.HasTaint(n, outOfServiceTaint))
			see("NotReady", !testenv.NodeReady(n))
		}
		vas, vaErr := suite.Kube.Client.StorageV1().VolumeAttachments().List(w.Ctx, metav1.ListOptions{})
		onFrom := map[string]bool{}
		if vaErr == nil {
			for _, va := range vas.Items {
				if va.Spec.NodeName == from && va.Spec.Source.PersistentVolumeName != nil {
					onFrom[*va.Spec.Source.PersistentVolumeName] = true
				}
			}
		}
		for app, uid := range old {
			list, err := suite.Kube.Client.CoreV1().Pods(w.ns).List(w.Ctx, metav1.ListOptions{LabelSelector: "app=" + app})
			if err != nil {
				continue
			}
			gone := true
			for _, p := range list.Items {
				if p.UID == uid {
					gone = false
				}
			}
			see(app+" old pod gone", gone)
			volumeGone := vaErr == nil
			for pv := range onFrom {
				if strings.HasSuffix(pv, "-"+app+"-0") || strings.HasSuffix(pv, "-"+app+"-data") {
					volumeGone = false
				}
			}
			see(app+" volume detached from "+from, volumeGone)
			if _, done := tl.running[app]; !done {
				if _, ok := w.runningPod(app, to); ok {
					tl.running[app] = time.Now()
				}
			}
		}
		select {
		case <-w.Ctx.Done():
			return tl
		case <-time.After(200 * time.Millisecond):
		}
	}
	return tl
}
