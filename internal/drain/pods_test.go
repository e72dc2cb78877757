package drain

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestFinished(t *testing.T) {
	for _, tc := range []struct {
		phase corev1.PodPhase
		want  bool
	}{
		{phase: corev1.PodSucceeded, want: true},
		{phase: corev1.PodFailed, want: true},
		{phase: corev1.PodRunning, want: false},
		{phase: corev1.PodPending, want: false},
		{phase: corev1.PodUnknown, want: false},
		{phase: "", want: false},
	} {
		t.Run(string(tc.phase), func(t *testing.T) {
			p := &corev1.Pod{Status: corev1.PodStatus{Phase: tc.phase}}
			if got := Finished(p); got != tc.want {
				t.Errorf("Finished(phase %q) = %v, want %v", tc.phase, got, tc.want)
			}
		})
	}
}
