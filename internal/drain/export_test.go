package drain

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// WaitGone exposes waitGone to the external tests.
func (d *Drainer) WaitGone(ctx context.Context, node string, pods []corev1.Pod, fromRV string, deadline time.Time) (int, error) {
	return d.waitGone(ctx, node, pods, fromRV, deadline, func(func(*Progress)) {})
}
