package drain

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// WaitGone exposes waitGone to the external tests: it returns the number
// of pods left (at the deadline without force deletion, or stuck).
func (d *Drainer) WaitGone(ctx context.Context, node string, pods []corev1.Pod, fromRV string, deadline time.Time) (int, error) {
	w, err := d.waitGone(ctx, node, pods, fromRV, deadline, func(func(*Progress)) {})
	return w.left + len(w.stuck), err
}

// NewForFake returns a Drainer that posts evictions through the typed
// client (PolicyV1().Evictions), which client-go's fake clientset answers
// through its reactors. The real Drainer posts through the REST client
// with client-go's retries off, which the fake clientset does not have.
func NewForFake(client kubernetes.Interface, clk clock.WithTicker, log *slog.Logger, o Options) *Drainer {
	d := New(client, clk, log, o)
	d.post = func(ctx context.Context, ev *policyv1.Eviction) error {
		return client.PolicyV1().Evictions(ev.Namespace).Evict(ctx, ev)
	}
	return d
}
