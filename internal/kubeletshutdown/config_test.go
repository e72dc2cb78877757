package kubeletshutdown

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestVerdict reads /configz documents as the kubelet serves them (v1beta1
// JSON: durations as strings, only the gates it was given) and says what
// the kubelet's shutdown manager would do with them.
func TestVerdict(t *testing.T) {
	tests := []struct {
		name    string
		configz string
		want    Verdict
		wantErr string
	}{
		{"EKS AL2023 from 1.34", `{"kubeletconfig":{"shutdownGracePeriod":"2m30s","shutdownGracePeriodCriticalPods":"30s"}}`,
			Verdict{State: Configured, Total: 150 * time.Second, Ordinary: 2 * time.Minute, Critical: 30 * time.Second}, ""},
		{"the kubelet's default", `{"kubeletconfig":{"shutdownGracePeriod":"0s","shutdownGracePeriodCriticalPods":"0s"}}`,
			Verdict{State: NotConfigured}, ""},
		{"fields left out", `{"kubeletconfig":{"maxPods":110}}`, Verdict{State: NotConfigured}, ""},
		{"no critical period", `{"kubeletconfig":{"shutdownGracePeriod":"1m"}}`,
			Verdict{State: Configured, Total: time.Minute, Ordinary: time.Minute}, ""},
		{"critical longer than the whole (no groups)", `{"kubeletconfig":{"shutdownGracePeriod":"30s","shutdownGracePeriodCriticalPods":"1m"}}`,
			Verdict{State: NotConfigured}, ""},
		{"feature gate off", `{"kubeletconfig":{"shutdownGracePeriod":"2m30s","featureGates":{"GracefulNodeShutdown":false}}}`,
			Verdict{State: GateOff}, ""},
		{"by pod priority", `{"kubeletconfig":{"shutdownGracePeriodByPodPriority":[{"priority":2000000000,"shutdownGracePeriodSeconds":20},{"priority":0,"shutdownGracePeriodSeconds":90},{"priority":-10,"shutdownGracePeriodSeconds":30}]}}`,
			Verdict{State: Configured, ByPriority: true, Total: 140 * time.Second, Ordinary: 30 * time.Second, Critical: 20 * time.Second}, ""},
		{"by pod priority, critical groups only", `{"kubeletconfig":{"shutdownGracePeriodByPodPriority":[{"priority":2000001000,"shutdownGracePeriodSeconds":20},{"priority":2000000000,"shutdownGracePeriodSeconds":40}]}}`,
			Verdict{State: Configured, ByPriority: true, Total: time.Minute, Ordinary: 40 * time.Second, Critical: time.Minute}, ""},
		{"by pod priority, its gate off", `{"kubeletconfig":{"shutdownGracePeriod":"1m","shutdownGracePeriodByPodPriority":[{"priority":0,"shutdownGracePeriodSeconds":90}],"featureGates":{"GracefulNodeShutdownBasedOnPodPriority":false}}}`,
			Verdict{State: Configured, Total: time.Minute, Ordinary: time.Minute}, ""},
		{"not configz", `{"kind":"Status"}`, Verdict{}, "no kubeletconfig"},
		{"not JSON", `404 page not found`, Verdict{}, "kubelet configz"},
		{"a bad duration", `{"kubeletconfig":{"shutdownGracePeriod":"soon"}}`, Verdict{}, "shutdownGracePeriod"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.configz))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse error = %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Verdict(); got != tt.want {
				t.Errorf("Verdict = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestVerdictString(t *testing.T) {
	v := Verdict{State: Configured, Total: 150 * time.Second, Ordinary: 2 * time.Minute, Critical: 30 * time.Second}
	want := "shutdownGracePeriod 2m30s, shutdownGracePeriodCriticalPods 30s: other pods get 2m0s once the shutdown begins, then system-critical pods 30s"
	if got := v.String(); got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got := (Verdict{State: NotConfigured}).String(); got != "not configured (shutdownGracePeriod 0)" {
		t.Errorf("String = %q", got)
	}
}

// TestReaderOnce: a node's kubelet is read once, its answer or its error
// kept; a canceled read is not kept.
func TestReaderOnce(t *testing.T) {
	calls := map[string]int{}
	fetch := func(_ context.Context, node string) ([]byte, error) {
		calls[node]++
		if node == "broken" {
			return nil, errors.New("forbidden")
		}
		return []byte(`{"kubeletconfig":{"shutdownGracePeriod":"2m30s","shutdownGracePeriodCriticalPods":"30s"}}`), nil
	}
	r := NewReader(fetch)
	ctx := context.Background()
	for range 3 {
		v, err := r.Verdict(ctx, "a")
		if err != nil || v.Ordinary != 2*time.Minute {
			t.Fatalf("Verdict(a) = %+v, %v", v, err)
		}
		if _, err := r.Verdict(ctx, "broken"); err == nil || !strings.Contains(err.Error(), "node broken") {
			t.Fatalf("Verdict(broken) error = %v", err)
		}
	}
	if calls["a"] != 1 || calls["broken"] != 1 {
		t.Errorf("reads = %v, want one per node", calls)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, _ = r.Verdict(canceled, "c")
	_, _ = r.Verdict(ctx, "c")
	if calls["c"] != 2 {
		t.Errorf("node c read %d times, want 2 (the canceled read is not kept)", calls["c"])
	}
}
