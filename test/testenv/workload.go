package testenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The events the workload (test/images/workload) records.
const (
	WorkloadStarted      = "started"
	WorkloadReady        = "ready"
	WorkloadPreStopBegin = "prestop-begin"
	WorkloadPreStopEnd   = "prestop-end"
	WorkloadSIGTERM      = "sigterm"
	WorkloadWork         = "work"
	WorkloadWorkFinished = "work-finished"
	WorkloadExit         = "exit"
	// WorkloadAnnotationsWatched: the workload reads its downward-API
	// annotations file (WorkloadSpec.WatchAnnotations).
	WorkloadAnnotationsWatched = "annotations-watched"
	// WorkloadDeadlineSeen: the annotations file first showed
	// lifeboat.io/deadline; WorkloadEntry.Value is it.
	WorkloadDeadlineSeen = "deadline-seen"
	// WorkloadReadinessPassed: the first readiness probe was answered
	// (WorkloadSpec.HTTPPort); the kubelet marks the pod Ready on it.
	WorkloadReadinessPassed = "readiness-passed"
	// WorkloadHTTPStopped: after SIGTERM the HTTP server closed its
	// listener and finished the requests in flight; WorkloadEntry.Value
	// is how many requests it served.
	WorkloadHTTPStopped = "http-stopped"
)

// WorkloadSpec describes a pod running WorkloadImage on a real node.
type WorkloadSpec struct {
	Namespace, Name, Node string
	// RecordDir is the host directory the workload records into (hostPath);
	// ReadWorkloadRecord reads it.
	RecordDir string
	// PreStop is how long its preStop exec hook takes; zero means no hook.
	PreStop time.Duration
	// Shutdown is how long its SIGTERM handler works before it exits.
	Shutdown time.Duration
	// Grace is terminationGracePeriodSeconds (whole seconds).
	Grace time.Duration
	// Labels are the pod's labels.
	Labels map[string]string
	// WatchAnnotations mounts the pod's annotations as a downward-API
	// volume, which the workload reads while it runs
	// (WorkloadDeadlineSeen).
	WatchAnnotations bool
	// HTTPPort, when set, makes the workload serve HTTP on it (every path
	// answers 200 with the pod's name) with a readiness probe on /readyz
	// every second; SIGTERM stops the server gracefully before the
	// handler's work (WorkloadHTTPStopped).
	HTTPPort int32
	// NodeSelector places the pods of WorkloadDeployment.
	NodeSelector map[string]string
}

// WorkloadPod returns the pod of a workload: bound to its node, the image
// never pulled, no service-account token, its record directory mounted.
// It records under s.Name whatever its pod is called: a DaemonSet or
// ReplicaSet made from its spec records each of its pods, a stopped one's
// successor too, in that one record.
func WorkloadPod(s WorkloadSpec) *corev1.Pod {
	t := workloadTemplate(s)
	t.Spec.NodeName = s.Node
	for i, e := range t.Spec.Containers[0].Env {
		if e.Name == "POD_NAME" {
			t.Spec.Containers[0].Env[i] = corev1.EnvVar{Name: "POD_NAME", Value: s.Name}
		}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: t.Labels}, Spec: t.Spec}
}

// WorkloadDeployment returns a Deployment named s.Name of replicas
// workload pods (the API's default strategy), placed by the scheduler on
// nodes matching s.NodeSelector (s.Node is not used); its selector is
// app=s.Name. Each pod records under its own name.
func WorkloadDeployment(s WorkloadSpec, replicas int32) *appsv1.Deployment {
	s.Labels = maps.Clone(s.Labels)
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels["app"] = s.Name
	t := workloadTemplate(s)
	t.Spec.NodeSelector = s.NodeSelector
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": s.Name}},
			Template: t},
	}
}

// workloadTemplate is the pod of a workload, unbound.
func workloadTemplate(s WorkloadSpec) corev1.PodTemplateSpec {
	var lifecycle *corev1.Lifecycle
	if s.PreStop > 0 {
		lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/workload", "prestop"}}}}
	}
	labels := map[string]string{"app": "workload"}
	maps.Copy(labels, s.Labels)
	env := []corev1.EnvVar{
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "WORKLOAD_PRESTOP", Value: s.PreStop.String()},
		{Name: "WORKLOAD_SHUTDOWN", Value: s.Shutdown.String()},
	}
	mounts := []corev1.VolumeMount{{Name: "records", MountPath: "/records"}}
	volumes := []corev1.Volume{{Name: "records", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: s.RecordDir, Type: ptr.To(corev1.HostPathDirectoryOrCreate)},
	}}}
	if s.WatchAnnotations {
		env = append(env, corev1.EnvVar{Name: "WORKLOAD_ANNOTATIONS", Value: "/podinfo/annotations"})
		mounts = append(mounts, corev1.VolumeMount{Name: "podinfo", MountPath: "/podinfo", ReadOnly: true})
		volumes = append(volumes, corev1.Volume{Name: "podinfo", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
			Items: []corev1.DownwardAPIVolumeFile{{Path: "annotations", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations"}}},
		}}})
	}
	var ports []corev1.ContainerPort
	var readiness *corev1.Probe
	if s.HTTPPort != 0 {
		env = append(env, corev1.EnvVar{Name: "WORKLOAD_HTTP_PORT", Value: strconv.Itoa(int(s.HTTPPort))})
		ports = []corev1.ContainerPort{{Name: "http", ContainerPort: s.HTTPPort}}
		readiness = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("http")}},
			PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1,
		}
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To(int64(s.Grace / time.Second)),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			Containers: []corev1.Container{{
				Name:            "workload",
				Image:           WorkloadImage,
				ImagePullPolicy: corev1.PullNever,
				Env:             env,
				Ports:           ports,
				ReadinessProbe:  readiness,
				Lifecycle:       lifecycle,
				VolumeMounts:    mounts,
			}},
			Volumes: volumes,
		},
	}
}

// WorkloadEntry is one recorded event.
type WorkloadEntry struct {
	Time  time.Time `json:"time"`
	Event string    `json:"event"`
	PID   int       `json:"pid"`
	// Value is what was seen (WorkloadDeadlineSeen: the deadline).
	Value string `json:"value,omitempty"`
}

// WorkloadRecord is what a workload recorded of its life, in order.
type WorkloadRecord []WorkloadEntry

// ReadWorkloadRecord reads the record of a pod; a pod that never started
// has an empty record.
func ReadWorkloadRecord(dir, namespace, name string) (WorkloadRecord, error) {
	b, err := os.ReadFile(filepath.Join(dir, namespace+"_"+name+".jsonl"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r WorkloadRecord
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var e WorkloadEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("record of %s/%s: line %q: %w", namespace, name, sc.Text(), err)
		}
		r = append(r, e)
	}
	return r, sc.Err()
}

// ReadWorkloadRecords reads the records of every pod of a namespace that
// recorded into dir, by pod name (a Deployment's pods).
func ReadWorkloadRecords(dir, namespace string) (map[string]WorkloadRecord, error) {
	files, err := filepath.Glob(filepath.Join(dir, namespace+"_*.jsonl"))
	if err != nil {
		return nil, err
	}
	out := map[string]WorkloadRecord{}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), namespace+"_"), ".jsonl")
		r, err := ReadWorkloadRecord(dir, namespace, name)
		if err != nil {
			return nil, err
		}
		out[name] = r
	}
	return out, nil
}

// Count returns how many times event was recorded.
func (r WorkloadRecord) Count(event string) int {
	n := 0
	for _, e := range r {
		if e.Event == event {
			n++
		}
	}
	return n
}

// At returns when event was first recorded.
func (r WorkloadRecord) At(event string) (time.Time, bool) {
	for _, e := range r {
		if e.Event == event {
			return e.Time, true
		}
	}
	return time.Time{}, false
}

// Entry returns the first entry of event.
func (r WorkloadRecord) Entry(event string) (WorkloadEntry, bool) {
	for _, e := range r {
		if e.Event == event {
			return e, true
		}
	}
	return WorkloadEntry{}, false
}

// Last returns the last entry; zero for an empty record.
func (r WorkloadRecord) Last() WorkloadEntry {
	if len(r) == 0 {
		return WorkloadEntry{}
	}
	return r[len(r)-1]
}

// Finished reports whether the workload's SIGTERM handler finished its work
// and the process exited by itself.
func (r WorkloadRecord) Finished() bool {
	return r.Count(WorkloadWorkFinished) > 0 && r.Count(WorkloadExit) > 0
}

// String lists the events with their times relative to the first, compact
// enough for a failure message: "started +0s, ready +0.001s, ...".
func (r WorkloadRecord) String() string {
	if len(r) == 0 {
		return "(nothing recorded)"
	}
	var parts []string
	t0 := r[0].Time
	for i, e := range r {
		if e.Event == WorkloadWork && i+1 < len(r) && r[i+1].Event == WorkloadWork {
			continue // one "work" per run of them
		}
		parts = append(parts, fmt.Sprintf("%s +%.2fs", e.Event, e.Time.Sub(t0).Seconds()))
	}
	return strings.Join(parts, ", ")
}
