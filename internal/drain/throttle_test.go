package drain_test

import (
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"lifeboat.dev/lifeboat/internal/drain"
)

// apfThrottled is what client-go makes of API priority and fairness's
// answer to a request it turns away: 429, a plain-text body and a
// Retry-After header (no DisruptionBudget cause).
func apfThrottled(retryAfter int) error {
	return apierrors.NewGenericServerResponse(429, "POST", schema.GroupResource{Resource: "pods/eviction"}, "app",
		"Too many requests, please try again later.", retryAfter, true)
}

// An eviction the API server throttles (429 from priority and fairness)
// is not blocked by anything: it is not counted blocked (metrics, the
// forecast) and is asked again after the server's Retry-After, at most
// the drain's backoff. A budget's 429 still is blocked.
func TestThrottledEvictionIsNotBlocked(t *testing.T) {
	tests := []struct {
		name        string
		refusal     error
		wantGap     time.Duration // between the evictions
		wantBlocked int
	}{
		{name: "API priority and fairness, Retry-After 1", refusal: apfThrottled(1), wantGap: time.Second, wantBlocked: 0},
		{name: "API priority and fairness, Retry-After 3", refusal: apfThrottled(3), wantGap: 3 * time.Second, wantBlocked: 0},
		{name: "API priority and fairness, Retry-After 14: the backoff bounds it", refusal: apfThrottled(14), wantGap: 5 * time.Second, wantBlocked: 0},
		{name: "PodDisruptionBudget", refusal: pdbRefusal("guard"), wantGap: 5 * time.Second, wantBlocked: 2},
		{name: "PodDisruptionBudget, no cause given, Retry-After 10", refusal: apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10),
			wantGap: 5 * time.Second, wantBlocked: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fakePod("app", 30)
			c := newFakeCluster(t, p)
			c.answer = func(_ *corev1.Pod, attempt int) error {
				if attempt <= 2 {
					return tt.refusal
				}
				return nil
			}
			var mu sync.Mutex
			blocked := 0
			c.progress = func(pr drain.Progress) { mu.Lock(); blocked = max(blocked, pr.Blocked); mu.Unlock() }
			res, err := c.drain(drain.Options{Backoff: 5 * time.Second}, c.clock.Now().Add(time.Hour))
			if err != nil {
				t.Fatalf("Drain = %+v, %v; want the pod evicted", res, err)
			}
			evs := c.evictionsOf("app")
			if len(evs) != 3 {
				t.Fatalf("%d evictions, want 3", len(evs))
			}
			for i := 1; i < len(evs); i++ {
				if gap := evs[i].at.Sub(evs[i-1].at); gap != tt.wantGap {
					t.Errorf("eviction %d came %v after the one before, want %v", i+1, gap, tt.wantGap)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if blocked != tt.wantBlocked {
				t.Errorf("progress counted %d blocked evictions, want %d", blocked, tt.wantBlocked)
			}
		})
	}
}
