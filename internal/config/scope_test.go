package config

import (
	"strings"
	"testing"
	"time"
)

// Issue 17 section 4: which nodes lifeboat acts on, and how long it waits
// for volumes to detach.
func TestNodeScopeAndVolumeDetach(t *testing.T) {
	base := []string{"--queue-url", "http://127.0.0.1:5000/1/q", "--leader-elect=false"}
	for _, tc := range []struct {
		name       string
		args       []string
		wantScope  string
		wantDetach time.Duration
		wantErr    string
	}{
		{"defaults: Karpenter's nodes skipped, 1m detach wait", nil, "!karpenter.sh/nodepool", time.Minute, ""},
		{"handle Karpenter's nodes", []string{"--karpenter-nodes", "handle"}, "", time.Minute, ""},
		{"selector and skip", []string{"--node-selector", "cluster=a, team in (x,y)", "--volume-detach-timeout", "0"}, "cluster=a, team in (x,y),!karpenter.sh/nodepool", 0, ""},
		{"selector only", []string{"--node-selector", "cluster=b", "--karpenter-nodes", "handle"}, "cluster=b", time.Minute, ""},
		{"bad selector", []string{"--node-selector", "a==b==c"}, "", 0, "--node-selector"},
		{"bad Karpenter policy", []string{"--karpenter-nodes", "ignore"}, "", 0, "--karpenter-nodes \"ignore\": must be skip or handle"},
		{"negative detach wait", []string{"--volume-detach-timeout", "-1s"}, "", 0, "--volume-detach-timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(append(append([]string{}, base...), tc.args...), env(nil))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.NodeScope(); got != tc.wantScope {
				t.Errorf("NodeScope() = %q, want %q", got, tc.wantScope)
			}
			if c.VolumeDetachTimeout != tc.wantDetach {
				t.Errorf("VolumeDetachTimeout = %v, want %v", c.VolumeDetachTimeout, tc.wantDetach)
			}
		})
	}
	// Queue-mode options: set in IMDS mode they are refused, not ignored.
	for _, f := range []string{"--node-selector=a=b", "--karpenter-nodes=handle", "--volume-detach-timeout=5s"} {
		if _, err := Load([]string{"--mode", "imds", "--node-name", "n", f}, env(nil)); err == nil {
			t.Errorf("%s accepted in imds mode", f)
		}
	}
}
