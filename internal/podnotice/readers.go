package podnotice

import corev1 "k8s.io/api/core/v1"

// Readers returns the pods of pods that can read the notice while they
// run: those with a downward-API volume (or a projected volume's
// downward-API source) that shows them metadata.annotations whole or
// one of the notice's annotations. Only they are written: a pod that
// cannot see its annotations before its SIGTERM would be told nothing,
// and each write is a request in the drain's path (a region-wide Spot
// reclaim drains thousands of nodes at once). A controller or a program
// that reads through the API can watch the Node instead (its taint, or
// the condition lifeboat.io/Terminating with --terminating-condition).
func Readers(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for i := range pods {
		if reads(&pods[i]) {
			out = append(out, pods[i])
		}
	}
	return out
}

func reads(p *corev1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.DownwardAPI != nil && showsNotice(v.DownwardAPI.Items) {
			return true
		}
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.DownwardAPI != nil && showsNotice(s.DownwardAPI.Items) {
				return true
			}
		}
	}
	return false
}

// showsNotice reports whether a downward-API volume's items show the
// notice: all annotations, or one of the notice's by name.
func showsNotice(items []corev1.DownwardAPIVolumeFile) bool {
	for _, it := range items {
		if it.FieldRef == nil {
			continue
		}
		switch it.FieldRef.FieldPath {
		case "metadata.annotations",
			"metadata.annotations['" + AnnotationDeadline + "']",
			"metadata.annotations['" + AnnotationReason + "']":
			return true
		}
	}
	return false
}
