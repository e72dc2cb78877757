package config

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// nodeActions are the Config fields of the node action options.
type nodeActions struct {
	PodGrace, NodeGrace time.Duration
	TaintEffect         string
	ExcludeFromLB       bool
	OutOfService        bool
}

func actionsOf(c Config) nodeActions {
	return nodeActions{c.PodGracePeriod, c.NodeGracePeriod, c.TaintEffect, c.ExcludeFromLB, c.OutOfServiceTaint}
}

// NTH's variables of the node actions set lifeboat's flags with NTH's
// meaning; lifeboat's own flags and variables win.
func TestNodeActionOptions(t *testing.T) {
	base := map[string]string{"LIFEBOAT_QUEUE_URL": testQueue, "LIFEBOAT_POD_NAMESPACE": "ns"}
	defaults := nodeActions{TaintEffect: "NoSchedule"}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    nodeActions
		warning string // a substring of some warning; "" none expected
	}{
		{name: "defaults", want: defaults},
		{name: "flags", args: []string{"--pod-grace-period=20s", "--node-grace-period=2m", "--taint-effect=NoExecute", "--exclude-from-load-balancers", "--out-of-service-taint"},
			want: nodeActions{20 * time.Second, 2 * time.Minute, "NoExecute", true, true}},
		{name: "NTH variables", env: map[string]string{"POD_TERMINATION_GRACE_PERIOD": "20", "NODE_TERMINATION_GRACE_PERIOD": "120", "TAINT_NODE": "true", "TAINT_EFFECT": "PreferNoSchedule",
			"EXCLUDE_FROM_LOAD_BALANCERS": "true", "ENABLE_OUT_OF_SERVICE_TAINT": "true"},
			want:    nodeActions{20 * time.Second, 2 * time.Minute, "PreferNoSchedule", true, true},
			warning: "POD_TERMINATION_GRACE_PERIOD is a deprecated aws-node-termination-handler variable: read as --pod-grace-period=20s"},
		{name: "GRACE_PERIOD, NTH's older name", env: map[string]string{"GRACE_PERIOD": "45"},
			want: nodeActions{PodGrace: 45 * time.Second, TaintEffect: "NoSchedule"}, warning: "read as --pod-grace-period=45s"},
		{name: "POD_TERMINATION_GRACE_PERIOD wins over GRACE_PERIOD", env: map[string]string{"POD_TERMINATION_GRACE_PERIOD": "10", "GRACE_PERIOD": "45"},
			want: nodeActions{PodGrace: 10 * time.Second, TaintEffect: "NoSchedule"}, warning: "GRACE_PERIOD (a deprecated aws-node-termination-handler variable) is ignored: --pod-grace-period is already set by POD_TERMINATION_GRACE_PERIOD"},
		{name: "-1 is the pod's own", env: map[string]string{"POD_TERMINATION_GRACE_PERIOD": "-1", "NODE_TERMINATION_GRACE_PERIOD": "-1"},
			want: defaults, warning: "keeps lifeboat's default for --pod-grace-period"},
		{name: "grace 0 is 1s, never a deletion of a running pod's object", env: map[string]string{"POD_TERMINATION_GRACE_PERIOD": "0"},
			want: nodeActions{PodGrace: time.Second, TaintEffect: "NoSchedule"}},
		{name: "node grace 0 is no cap", env: map[string]string{"NODE_TERMINATION_GRACE_PERIOD": "0"}, want: defaults},
		{name: "false booleans", env: map[string]string{"EXCLUDE_FROM_LOAD_BALANCERS": "false", "ENABLE_OUT_OF_SERVICE_TAINT": "false"}, want: defaults},
		{name: "TAINT_EFFECT without TAINT_NODE: no effect, as in NTH", env: map[string]string{"TAINT_EFFECT": "NoExecute"},
			want: defaults, warning: "TAINT_EFFECT (an aws-node-termination-handler variable) has no effect without TAINT_NODE=true"},
		{name: "TAINT_EFFECT with TAINT_NODE=false", env: map[string]string{"TAINT_NODE": "false", "TAINT_EFFECT": "NoExecute"}, want: defaults},
		{name: "the flag wins", args: []string{"--taint-effect=NoSchedule"}, env: map[string]string{"TAINT_NODE": "true", "TAINT_EFFECT": "NoExecute"},
			want: defaults, warning: "TAINT_EFFECT (a deprecated aws-node-termination-handler variable) is ignored: --taint-effect is already set by the command line"},
		{name: "IMDS mode too", args: []string{"--mode=imds", "--node-name=n1"}, env: map[string]string{"TAINT_NODE": "true", "TAINT_EFFECT": "NoExecute", "POD_TERMINATION_GRACE_PERIOD": "5"},
			want: nodeActions{PodGrace: 5 * time.Second, TaintEffect: "NoExecute"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := map[string]string{}
			if !slices.Contains(tt.args, "--mode=imds") {
				maps.Copy(e, base)
			}
			for k, v := range tt.env {
				e[k] = v
			}
			c, err := Load(tt.args, env(e))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if d := cmp.Diff(tt.want, actionsOf(c)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			all := strings.Join(c.Warnings, "\n")
			if tt.warning != "" && !strings.Contains(all, tt.warning) {
				t.Errorf("warnings:\n%s\nwant one containing %q", all, tt.warning)
			}
		})
	}
}

func TestNodeActionErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{name: "unknown taint effect", args: []string{"--taint-effect=NoRun"}, want: `--taint-effect "NoRun": must be NoSchedule, PreferNoSchedule, NoExecute`},
		{name: "unknown NTH taint effect", env: map[string]string{"TAINT_NODE": "true", "TAINT_EFFECT": "noschedule"}, want: `--taint-effect "noschedule"`},
		{name: "unreadable TAINT_NODE", env: map[string]string{"TAINT_NODE": "yes", "TAINT_EFFECT": "NoExecute"}, want: `TAINT_NODE="yes"`},
		{name: "negative grace", args: []string{"--pod-grace-period=-5s"}, want: "--pod-grace-period -5s: must be ≥ 0"},
		{name: "sub-second grace", args: []string{"--pod-grace-period=500ms"}, want: "--pod-grace-period 500ms: must be 0 (the pod's own) or at least 1s"},
		{name: "NTH seconds not a number", env: map[string]string{"NODE_TERMINATION_GRACE_PERIOD": "2m"}, want: `NODE_TERMINATION_GRACE_PERIOD="2m" (alias of --node-grace-period): "2m" is not a whole number of seconds`},
		{name: "NTH boolean", env: map[string]string{"EXCLUDE_FROM_LOAD_BALANCERS": "yes"}, want: `EXCLUDE_FROM_LOAD_BALANCERS="yes"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := map[string]string{"LIFEBOAT_QUEUE_URL": testQueue, "LIFEBOAT_POD_NAMESPACE": "ns"}
			for k, v := range tt.env {
				e[k] = v
			}
			_, err := Load(tt.args, env(e))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// NTH's lifecycle timing variables: seconds, -1 for "not set".
func TestNTHLifecycleTiming(t *testing.T) {
	tests := []struct {
		name                   string
		env                    map[string]string
		interval, until, delay time.Duration
	}{
		{name: "defaults"},
		{name: "set", env: map[string]string{"HEARTBEAT_INTERVAL": "30", "HEARTBEAT_UNTIL": "600", "COMPLETE_LIFECYCLE_ACTION_DELAY_SECONDS": "20"},
			interval: 30 * time.Second, until: 10 * time.Minute, delay: 20 * time.Second},
		{name: "NTH's -1 everywhere", env: map[string]string{"HEARTBEAT_INTERVAL": "-1", "HEARTBEAT_UNTIL": "-1", "COMPLETE_LIFECYCLE_ACTION_DELAY_SECONDS": "-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := map[string]string{"LIFEBOAT_QUEUE_URL": testQueue, "LIFEBOAT_POD_NAMESPACE": "ns"}
			maps.Copy(e, tt.env)
			c, err := Load(nil, env(e))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			got := []time.Duration{c.HeartbeatInterval, c.HeartbeatUntil, c.CompleteLifecycleDelay}
			if d := cmp.Diff([]time.Duration{tt.interval, tt.until, tt.delay}, got); d != "" {
				t.Errorf("interval, until, delay (-want +got):\n%s", d)
			}
		})
	}
	if _, err := Load([]string{"--mode=imds", "--node-name=n", "--heartbeat-until=1m"}, env(nil)); err == nil || !strings.Contains(err.Error(), "--heartbeat-until is not supported in imds mode") {
		t.Errorf("--heartbeat-until in imds mode: %v, want refused", err)
	}
}

// CHECK_TAG_BEFORE_DRAINING and MANAGED_TAG are read together, with NTH's
// defaults (check on, tag aws-node-termination-handler/managed).
func TestNTHManagedTag(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    string
		warning string
	}{
		{name: "neither", want: ""},
		{name: "check on: NTH's default tag", env: map[string]string{"CHECK_TAG_BEFORE_DRAINING": "true"}, want: "aws-node-termination-handler/managed",
			warning: "CHECK_TAG_BEFORE_DRAINING is a deprecated aws-node-termination-handler variable: read as --managed-tag=aws-node-termination-handler/managed"},
		{name: "tag alone: NTH checks by default", env: map[string]string{"MANAGED_TAG": "team/nth"}, want: "team/nth", warning: "MANAGED_TAG is a deprecated"},
		{name: "both", env: map[string]string{"CHECK_TAG_BEFORE_DRAINING": "true", "MANAGED_TAG": "team/nth"}, want: "team/nth"},
		{name: "check off: no check whatever the tag", env: map[string]string{"CHECK_TAG_BEFORE_DRAINING": "false", "MANAGED_TAG": "team/nth"}, want: "",
			warning: "MANAGED_TAG (an aws-node-termination-handler variable) has no effect: CHECK_TAG_BEFORE_DRAINING=false"},
		{name: "the flag wins", args: []string{"--managed-tag=mine"}, env: map[string]string{"MANAGED_TAG": "team/nth"}, want: "mine",
			warning: "MANAGED_TAG (a deprecated aws-node-termination-handler variable) is ignored: --managed-tag is already set by the command line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := map[string]string{"LIFEBOAT_QUEUE_URL": testQueue, "LIFEBOAT_POD_NAMESPACE": "ns"}
			maps.Copy(e, tt.env)
			c, err := Load(tt.args, env(e))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if c.ManagedTag != tt.want {
				t.Errorf("--managed-tag = %q, want %q", c.ManagedTag, tt.want)
			}
			if all := strings.Join(c.Warnings, "\n"); tt.warning != "" && !strings.Contains(all, tt.warning) {
				t.Errorf("warnings:\n%s\nwant one containing %q", all, tt.warning)
			}
		})
	}
	if _, err := Load(nil, env(map[string]string{"LIFEBOAT_QUEUE_URL": testQueue, "LIFEBOAT_POD_NAMESPACE": "ns", "CHECK_TAG_BEFORE_DRAINING": "yes"})); err == nil || !strings.Contains(err.Error(), `CHECK_TAG_BEFORE_DRAINING="yes"`) {
		t.Errorf("unreadable CHECK_TAG_BEFORE_DRAINING: %v, want an error naming it", err)
	}
	c, err := Load([]string{"--mode=imds", "--node-name=n"}, env(map[string]string{"MANAGED_TAG": "team/nth"}))
	if err != nil || c.ManagedTag != "" || !strings.Contains(strings.Join(c.Warnings, "\n"), "does not apply in imds mode") {
		t.Errorf("MANAGED_TAG in imds mode: %q, %v, %v; want ignored with a warning", c.ManagedTag, err, c.Warnings)
	}
}
