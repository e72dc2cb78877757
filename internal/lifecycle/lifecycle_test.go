package lifecycle

import (
	"testing"
	"time"
)

// Issue 14 item 10: an interval at or above the hook's heartbeat timeout
// put each heartbeat at expiry; it is clamped to half the timeout.
func TestHeartbeatInterval(t *testing.T) {
	hook := Hook{HeartbeatTimeout: 30 * time.Second}
	for _, tc := range []struct {
		name        string
		configured  time.Duration
		want        time.Duration
		wantClamped bool
	}{
		{"default: half the timeout", 0, 15 * time.Second, false},
		{"configured below half", 10 * time.Second, 10 * time.Second, false},
		{"configured at half", 15 * time.Second, 15 * time.Second, false},
		{"configured above half", 20 * time.Second, 15 * time.Second, true},
		{"configured equal to the timeout", 30 * time.Second, 15 * time.Second, true},
		{"configured above the timeout", time.Hour, 15 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, clamped := HeartbeatInterval(tc.configured, hook)
			if got != tc.want || clamped != tc.wantClamped {
				t.Errorf("HeartbeatInterval(%v, 30 s timeout) = %v, %v; want %v, %v", tc.configured, got, clamped, tc.want, tc.wantClamped)
			}
			if got >= hook.HeartbeatTimeout {
				t.Errorf("interval %v is not below the timeout", got)
			}
		})
	}
	for _, tc := range []struct{ configured, want time.Duration }{{0, UnknownHookInterval}, {2 * time.Second, 2 * time.Second}, {time.Minute, UnknownHookInterval}} {
		if got := IntervalUnknownHook(tc.configured); got != tc.want {
			t.Errorf("IntervalUnknownHook(%v) = %v, want %v", tc.configured, got, tc.want)
		}
	}
}
