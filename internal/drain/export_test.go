package drain

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// WaitGone exposes waitGone to the external tests: it returns the number
// of pods left (at the deadline without force deletion, or stuck).
func (d *Drainer) WaitGone(ctx context.Context, node string, pods []corev1.Pod, fromRV string, deadline time.Time) (int, error) {
	w, err := d.waitGone(ctx, node, pods, nil, fromRV, Deadline{At: deadline}, func(func(*Progress)) {})
	return w.left + len(w.stuck), err
}
