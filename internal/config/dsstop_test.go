package config

import (
	"strings"
	"testing"
)

// --stop-daemonset-pods acts only before a terminate action lifeboat
// completes: without completion (queue: --complete-lifecycle=false; imds:
// no --imds-complete-lifecycle) it is a startup error, not a no-op.
func TestStopDaemonSetPods(t *testing.T) {
	base := map[string]string{"LIFEBOAT_QUEUE_URL": testQueue, "LIFEBOAT_POD_NAMESPACE": "ns"}
	for _, tt := range []struct {
		name    string
		args    []string
		want    bool
		wantErr string
	}{
		{name: "default off"},
		{name: "queue mode", args: []string{"--stop-daemonset-pods"}, want: true},
		{name: "imds mode completing its action", args: []string{"--mode=imds", "--node-name=n", "--imds-complete-lifecycle", "--stop-daemonset-pods"}, want: true},
		{name: "queue mode without completion", args: []string{"--complete-lifecycle=false", "--stop-daemonset-pods"}, wantErr: "in queue mode it needs --complete-lifecycle"},
		{name: "imds mode without completion", args: []string{"--mode=imds", "--node-name=n", "--stop-daemonset-pods"}, wantErr: "in imds mode it needs --imds-complete-lifecycle"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := base
			if len(tt.args) > 0 && tt.args[0] == "--mode=imds" {
				e = map[string]string{"LIFEBOAT_POD_NAMESPACE": "ns"}
			}
			c, err := Load(tt.args, env(e))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load: %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.StopDaemonSetPods != tt.want {
				t.Errorf("StopDaemonSetPods = %v, want %v", c.StopDaemonSetPods, tt.want)
			}
		})
	}
}
