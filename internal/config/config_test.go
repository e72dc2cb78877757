package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"lifeboat.dev/lifeboat/internal/event"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestLoadDefaults(t *testing.T) {
	c, err := Load([]string{"--queue-url", "https://sqs.us-east-1.amazonaws.com/123456789012/q", "--pod-namespace", "kube-system"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Mode != ModeQueue || c.Workers != 10 || c.QueueReceivers != 4 || c.VisibilityTimeout != 30*time.Second || !c.CompleteLifecycle || c.LeaseNamespace != "kube-system" {
		t.Errorf("unexpected defaults: %+v", c)
	}
	if c.Drains(event.RebalanceRecommendation) {
		t.Error("rebalance drains by default; want cordon only")
	}
	if !c.Drains(event.SpotInterruption) || !c.Drains(event.LifecycleTerminate) {
		t.Error("spot interruption and lifecycle terminate must drain by default")
	}
}

func TestLoadEnvAndFlags(t *testing.T) {
	getenv := env(map[string]string{
		"LIFEBOAT_QUEUE_URL":    "http://127.0.0.1:5000/123456789012/env-queue",
		"LIFEBOAT_WORKERS":      "3",
		"LIFEBOAT_AWS_ENDPOINT": "http://127.0.0.1:5000,autoscaling=http://127.0.0.1:6000",
		"LIFEBOAT_LEADER_ELECT": "false",
	})
	c, err := Load([]string{"--workers", "7"}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Workers != 7 {
		t.Errorf("flag must win over env: workers = %d", c.Workers)
	}
	if c.QueueURL != "http://127.0.0.1:5000/123456789012/env-queue" {
		t.Errorf("queue url from env: %q", c.QueueURL)
	}
	want := map[string]string{
		"sqs": "http://127.0.0.1:5000", "ec2": "http://127.0.0.1:5000", "eventbridge": "http://127.0.0.1:5000",
		"sts": "http://127.0.0.1:5000", "autoscaling": "http://127.0.0.1:6000", "elasticloadbalancing": "http://127.0.0.1:5000",
	}
	if d := cmp.Diff(want, c.Endpoints); d != "" {
		t.Errorf("endpoints (-want +got):\n%s", d)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string // substrings, all must appear
	}{
		{"queue url missing", []string{"--leader-elect=false"}, nil, []string{"--queue-url is required"}},
		{"every problem at once", []string{"--queue-url", "x", "--workers", "0", "--queue-receivers", "101", "--unknown-instance", "eat", "--log-format", "xml", "--leader-elect=false"}, nil,
			[]string{"is not a URL", "--workers 0", "--queue-receivers 101", "--unknown-instance", "--log-format"}},
		{"token option in imds mode", []string{"--mode", "imds", "--node-name", "n", "--heartbeat-interval", "10s"}, nil,
			[]string{"--heartbeat-interval is not supported in imds mode", "no lifecycle action token"}},
		{"complete lifecycle in imds mode from env", []string{"--mode", "imds", "--node-name", "n"}, map[string]string{"LIFEBOAT_COMPLETE_LIFECYCLE": "true"},
			[]string{"--complete-lifecycle is not supported in imds mode"}},
		{"queue option in imds mode", []string{"--mode", "imds", "--node-name", "n", "--queue-url", "http://x/q"}, nil,
			[]string{"--queue-url is not supported in imds mode (only in queue mode)"}},
		{"out-of-service taint in imds mode", []string{"--mode", "imds", "--node-name", "n", "--out-of-service-taint"}, nil,
			[]string{"--out-of-service-taint is refused with --mode imds", "cannot confirm", "use queue mode"}},
		{"out-of-service taint in imds mode from env", []string{"--mode", "imds", "--node-name", "n"}, map[string]string{"LIFEBOAT_OUT_OF_SERVICE_TAINT": "true"},
			[]string{"--out-of-service-taint is refused with --mode imds"}},
		{"ghost node deletion without a bound", []string{"--queue-url", "http://x/q", "--ghost-node-after", "0s", "--delete-ghost-nodes"}, nil,
			[]string{"--delete-ghost-nodes needs --ghost-node-after > 0"}},
		{"negative ghost node bound", []string{"--queue-url", "http://x/q", "--ghost-node-after", "-1s"}, nil, []string{"--ghost-node-after -1s: must be ≥ 0"}},
		{"ghost node deletion in imds mode", []string{"--mode", "imds", "--node-name", "n", "--delete-ghost-nodes"}, nil,
			[]string{"--delete-ghost-nodes is not supported in imds mode (only in queue mode)"}},
		{"load balancer wait without lifecycle completion", []string{"--queue-url", "http://x/q", "--complete-lifecycle=false", "--wait-for-load-balancers"}, nil,
			[]string{"--wait-for-load-balancers holds the completion of terminate actions: it needs --complete-lifecycle"}},
		{"load balancer wait in imds mode", []string{"--mode", "imds", "--node-name", "n", "--wait-for-load-balancers"}, nil,
			[]string{"--wait-for-load-balancers is not supported in imds mode"}},
		{"imds needs node", []string{"--mode", "imds"}, nil, []string{"--node-name is required in imds mode"}},
		{"a maintenance window that does not parse", []string{"--mode", "imds", "--node-name", "n", "--maintenance-windows", "Sat 02:00-06:00; Caturday 01:00-02:00"}, nil,
			[]string{`--maintenance-windows: maintenance window "Caturday 01:00-02:00": day "Caturday"`}},
		{"unknown mode", []string{"--mode", "lambda"}, nil, []string{`--mode "lambda"`}},
		{"bad kind", []string{"--drain-on", "spot"}, nil, []string{`unknown or non-draining kind "spot"`}},
		{"bad endpoint service", []string{"--aws-endpoint", "s3=http://x"}, nil, []string{`unknown service "s3"`}},
		{"bad env value", []string{"--queue-url", "http://x/q", "--leader-elect=false"}, map[string]string{"LIFEBOAT_WORKERS": "many"}, []string{"LIFEBOAT_WORKERS"}},
		{"stray argument", []string{"--queue-url", "http://x/q", "extra"}, nil, []string{"unexpected arguments"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.args, env(tt.env))
			if err == nil {
				t.Fatal("Load succeeded; want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// In IMDS mode lifecycle actions are completed only with
// --imds-complete-lifecycle (it needs Auto Scaling permissions on the
// instance role); --complete-lifecycle, queue mode's, is refused there.
func TestIMDSModeLifecycle(t *testing.T) {
	imds := []string{"--mode", "imds", "--node-name", "ip-10-0-0-1.ec2.internal"}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want bool
	}{
		{"off by default", nil, nil, false},
		{"flag", []string{"--imds-complete-lifecycle"}, nil, true},
		{"environment", nil, map[string]string{"LIFEBOAT_IMDS_COMPLETE_LIFECYCLE": "true"}, true},
		{"region and endpoint accepted", []string{"--imds-complete-lifecycle", "--region", "eu-west-1", "--aws-endpoint", "autoscaling=http://127.0.0.1:1"}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(append(append([]string(nil), imds...), tc.args...), env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if c.CompleteLifecycle != tc.want {
				t.Errorf("CompleteLifecycle = %v, want %v", c.CompleteLifecycle, tc.want)
			}
		})
	}
	if _, err := Load(append(imds, "--complete-lifecycle"), env(nil)); err == nil || !strings.Contains(err.Error(), "--complete-lifecycle is not supported in imds mode") {
		t.Errorf("--complete-lifecycle in imds mode: error %v, want it refused", err)
	}
	if _, err := Load([]string{"--queue-url", "https://sqs.us-east-1.amazonaws.com/1/q", "--imds-complete-lifecycle"}, env(nil)); err == nil || !strings.Contains(err.Error(), "--imds-complete-lifecycle is not supported in queue mode") {
		t.Errorf("--imds-complete-lifecycle in queue mode: error %v, want it refused", err)
	}
}

func TestConfigurationDocUpToDate(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "configuration.md")
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `make docs`)", err)
	}
	if d := cmp.Diff(Markdown(), string(got)); d != "" {
		t.Errorf("docs/configuration.md is stale; run `make docs` (-want +got):\n%s", d)
	}
}

// --wait-for-load-balancers without the exclusion label starts, with a
// warning: IP targets go with their pods, instance targets may not.
func TestWaitForLoadBalancersWarnsWithoutExclusion(t *testing.T) {
	for _, tt := range []struct {
		args []string
		warn bool
	}{
		{[]string{"--queue-url", "http://x/q", "--wait-for-load-balancers"}, true},
		{[]string{"--queue-url", "http://x/q", "--wait-for-load-balancers", "--exclude-from-load-balancers"}, false},
	} {
		c, err := Load(tt.args, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		warned := slices.ContainsFunc(c.Warnings, func(w string) bool {
			return strings.HasPrefix(w, "--wait-for-load-balancers without --exclude-from-load-balancers")
		})
		if !c.WaitForLoadBalancers || warned != tt.warn {
			t.Errorf("%v: WaitForLoadBalancers %v, warnings %q: want the warning %v", tt.args, c.WaitForLoadBalancers, c.Warnings, tt.warn)
		}
	}
}
