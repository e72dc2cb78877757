package podnotice

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestReaders(t *testing.T) {
	field := func(path string) []corev1.DownwardAPIVolumeFile {
		return []corev1.DownwardAPIVolumeFile{{Path: "f", FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	downward := func(items []corev1.DownwardAPIVolumeFile) corev1.Volume {
		return corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: items}}}
	}
	projected := func(items []corev1.DownwardAPIVolumeFile) corev1.Volume {
		return corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{}}, {DownwardAPI: &corev1.DownwardAPIProjection{Items: items}}}}}}
	}
	tests := []struct {
		name    string
		volumes []corev1.Volume
		want    bool
	}{
		{"no volumes", nil, false},
		{"all annotations", []corev1.Volume{downward(field("metadata.annotations"))}, true},
		{"the deadline by name", []corev1.Volume{downward(field("metadata.annotations['lifeboat.io/deadline']"))}, true},
		{"the reason by name", []corev1.Volume{downward(field("metadata.annotations['lifeboat.io/reason']"))}, true},
		{"another annotation", []corev1.Volume{downward(field("metadata.annotations['example.com/x']"))}, false},
		{"labels only", []corev1.Volume{downward(field("metadata.labels"))}, false},
		{"a resource field", []corev1.Volume{downward([]corev1.DownwardAPIVolumeFile{{Path: "cpu", ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}})}, false},
		{"projected annotations", []corev1.Volume{projected(field("metadata.annotations"))}, true},
		{"projected labels", []corev1.Volume{projected(field("metadata.labels"))}, false},
		{"an emptyDir", []corev1.Volume{{Name: "e", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := []corev1.Pod{{Spec: corev1.PodSpec{Volumes: tt.volumes}}}
			if got := len(Readers(pods)) == 1; got != tt.want {
				t.Errorf("reads = %v, want %v", got, tt.want)
			}
		})
	}
}
