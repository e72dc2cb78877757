package testenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
}

// WorkloadPod returns the pod of a workload: bound to its node, the image
// never pulled, no service-account token, its record directory mounted.
func WorkloadPod(s WorkloadSpec) *corev1.Pod {
	var lifecycle *corev1.Lifecycle
	if s.PreStop > 0 {
		lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/workload", "prestop"}}}}
	}
	labels := map[string]string{"app": "workload"}
	maps.Copy(labels, s.Labels)
	env := []corev1.EnvVar{
		{Name: "POD_NAMESPACE", Value: s.Namespace},
		{Name: "POD_NAME", Value: s.Name},
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
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:                      s.Node,
			TerminationGracePeriodSeconds: ptr.To(int64(s.Grace / time.Second)),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			Containers: []corev1.Container{{
				Name:            "workload",
				Image:           WorkloadImage,
				ImagePullPolicy: corev1.PullNever,
				Env:             env,
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
