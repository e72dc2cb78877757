package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"lifeboat.dev/lifeboat/internal/event"
)

const testQueue = "https://sqs.us-east-1.amazonaws.com/123456789012/q"

func TestNTHAliases(t *testing.T) {
	defaultKinds := []event.Kind{event.SpotInterruption, event.ScheduledChange, event.StateChange, event.CapacityReservationInterruption, event.LifecycleTerminate}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		// check compares the fields the row is about.
		check func(t *testing.T, c Config)
		// warnings are substrings, one per expected warning, in order.
		warnings []string
	}{
		{
			name: "queue url, workers, dry run, namespace and pod name",
			env:  map[string]string{"QUEUE_URL": testQueue, "WORKERS": "4", "DRY_RUN": "true", "NAMESPACE": "kube-system", "POD_NAME": "nth-abc"},
			check: func(t *testing.T, c Config) {
				got := []any{c.QueueURL, c.Workers, c.DryRun, c.PodNamespace, c.LeaseNamespace, c.PodName}
				want := []any{testQueue, 4, true, "kube-system", "kube-system", "nth-abc"}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("(-want +got):\n%s", d)
				}
			},
			warnings: []string{"DRY_RUN is a deprecated", "POD_NAME is a deprecated", "NAMESPACE is a deprecated", "QUEUE_URL is a deprecated aws-node-termination-handler variable: read as --queue-url=" + testQueue + "; use LIFEBOAT_QUEUE_URL instead", "WORKERS is a deprecated"},
		},
		{
			name: "flag wins over alias",
			args: []string{"--queue-url", "http://127.0.0.1:1/flag-queue"},
			env:  map[string]string{"QUEUE_URL": testQueue, "NAMESPACE": "ns"},
			check: func(t *testing.T, c Config) {
				if c.QueueURL != "http://127.0.0.1:1/flag-queue" {
					t.Errorf("queue url = %q, want the flag's", c.QueueURL)
				}
			},
			warnings: []string{"NAMESPACE is a deprecated", "QUEUE_URL (a deprecated aws-node-termination-handler variable) is ignored: --queue-url is already set by the command line"},
		},
		{
			name: "LIFEBOAT_ variable wins over alias",
			env:  map[string]string{"QUEUE_URL": testQueue, "LIFEBOAT_QUEUE_URL": "http://127.0.0.1:1/env-queue", "LIFEBOAT_POD_NAMESPACE": "ns"},
			check: func(t *testing.T, c Config) {
				if c.QueueURL != "http://127.0.0.1:1/env-queue" {
					t.Errorf("queue url = %q, want LIFEBOAT_QUEUE_URL's", c.QueueURL)
				}
			},
			warnings: []string{"QUEUE_URL (a deprecated aws-node-termination-handler variable) is ignored: --queue-url is already set by LIFEBOAT_QUEUE_URL"},
		},
		{
			name: "sqs termination draining false means imds mode; node name applies",
			env:  map[string]string{"ENABLE_SQS_TERMINATION_DRAINING": "false", "NODE_NAME": "ip-10-0-0-1.ec2.internal", "INSTANCE_METADATA_URL": "http://127.0.0.1:1338"},
			check: func(t *testing.T, c Config) {
				got := []any{c.Mode, c.NodeName, c.IMDSEndpoint}
				want := []any{ModeIMDS, "ip-10-0-0-1.ec2.internal", "http://127.0.0.1:1338"}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("(-want +got):\n%s", d)
				}
			},
			warnings: []string{"ENABLE_SQS_TERMINATION_DRAINING is a deprecated", "NODE_NAME is a deprecated", "INSTANCE_METADATA_URL is a deprecated"},
		},
		{
			name: "queue-only aliases are ignored in imds mode, not an error",
			args: []string{"--mode", "imds", "--node-name", "n"},
			env:  map[string]string{"WORKERS": "10", "DELETE_SQS_MSG_IF_NODE_NOT_FOUND": "false", "HEARTBEAT_INTERVAL": "30"},
			check: func(t *testing.T, c Config) {
				if c.Mode != ModeIMDS {
					t.Errorf("mode = %s", c.Mode)
				}
			},
			warnings: []string{"WORKERS (a deprecated aws-node-termination-handler variable) is ignored: --workers does not apply in imds mode",
				"DELETE_SQS_MSG_IF_NODE_NOT_FOUND (a deprecated aws-node-termination-handler variable) is ignored: --unknown-instance does not apply in imds mode",
				"HEARTBEAT_INTERVAL (a deprecated aws-node-termination-handler variable) is ignored: --heartbeat-interval does not apply in imds mode"},
		},
		{
			name: "node name is ignored in queue mode",
			env:  map[string]string{"QUEUE_URL": testQueue, "NAMESPACE": "ns", "NODE_NAME": "n"},
			check: func(t *testing.T, c Config) {
				if c.NodeName != "" {
					t.Errorf("node name %q set in queue mode", c.NodeName)
				}
			},
			warnings: []string{"NODE_NAME (a deprecated aws-node-termination-handler variable) is ignored: --node-name does not apply in queue mode", "NAMESPACE is", "QUEUE_URL is"},
		},
		{
			name: "delete message if node not found",
			env:  map[string]string{"QUEUE_URL": testQueue, "NAMESPACE": "ns", "DELETE_SQS_MSG_IF_NODE_NOT_FOUND": "true"},
			check: func(t *testing.T, c Config) {
				if c.UnknownInstance != UnknownDelete {
					t.Errorf("unknown instance = %q, want delete", c.UnknownInstance)
				}
			},
			warnings: []string{"NAMESPACE is", "QUEUE_URL is", "DELETE_SQS_MSG_IF_NODE_NOT_FOUND is a deprecated aws-node-termination-handler variable: read as --unknown-instance=delete"},
		},
		{
			name: "heartbeat interval in seconds",
			env:  map[string]string{"QUEUE_URL": testQueue, "NAMESPACE": "ns", "HEARTBEAT_INTERVAL": "30"},
			check: func(t *testing.T, c Config) {
				if c.HeartbeatInterval != 30*time.Second {
					t.Errorf("heartbeat interval = %v, want 30s", c.HeartbeatInterval)
				}
			},
			warnings: []string{"NAMESPACE is", "QUEUE_URL is", "HEARTBEAT_INTERVAL is a deprecated aws-node-termination-handler variable: read as --heartbeat-interval=30s"},
		},
		{
			name: "rebalance draining adds the kind to the defaults",
			env:  map[string]string{"QUEUE_URL": testQueue, "NAMESPACE": "ns", "ENABLE_REBALANCE_DRAINING": "true"},
			check: func(t *testing.T, c Config) {
				if d := cmp.Diff(append(defaultKinds, event.RebalanceRecommendation), c.DrainKinds); d != "" {
					t.Errorf("drain kinds (-want +got):\n%s", d)
				}
			},
			warnings: []string{"NAMESPACE is", "QUEUE_URL is", "ENABLE_REBALANCE_DRAINING is a deprecated"},
		},
		{
			name: "rebalance draining false keeps the default",
			env:  map[string]string{"QUEUE_URL": testQueue, "NAMESPACE": "ns", "ENABLE_REBALANCE_DRAINING": "false"},
			check: func(t *testing.T, c Config) {
				if d := cmp.Diff(defaultKinds, c.DrainKinds); d != "" {
					t.Errorf("drain kinds (-want +got):\n%s", d)
				}
			},
			warnings: []string{"NAMESPACE is", "QUEUE_URL is", "ENABLE_REBALANCE_DRAINING is a deprecated aws-node-termination-handler variable: read into --drain-on=spot-interruption,scheduled-change,state-change,capacity-reservation-interruption,lifecycle-terminate;"},
		},
		{
			name: "cordon only drains nothing and wins over rebalance draining",
			env:  map[string]string{"QUEUE_URL": testQueue, "NAMESPACE": "ns", "CORDON_ONLY": "true", "ENABLE_REBALANCE_DRAINING": "true"},
			check: func(t *testing.T, c Config) {
				if len(c.DrainKinds) != 0 {
					t.Errorf("drain kinds = %v, want none", c.DrainKinds)
				}
			},
			warnings: []string{"NAMESPACE is", "QUEUE_URL is", "CORDON_ONLY is a deprecated aws-node-termination-handler variable: read into --drain-on=;", "ENABLE_REBALANCE_DRAINING is a deprecated aws-node-termination-handler variable: read into --drain-on=;"},
		},
		{
			name: "--drain-on wins over cordon only",
			args: []string{"--drain-on", "spot-interruption"},
			env:  map[string]string{"QUEUE_URL": testQueue, "NAMESPACE": "ns", "CORDON_ONLY": "true"},
			check: func(t *testing.T, c Config) {
				if d := cmp.Diff([]event.Kind{event.SpotInterruption}, c.DrainKinds); d != "" {
					t.Errorf("drain kinds (-want +got):\n%s", d)
				}
			},
			warnings: []string{"NAMESPACE is", "QUEUE_URL is", "CORDON_ONLY (a deprecated aws-node-termination-handler variable) is ignored: --drain-on is already set by the command line"},
		},
		{
			name: "json logging false means text, log level lower-cased",
			env:  map[string]string{"QUEUE_URL": testQueue, "NAMESPACE": "ns", "JSON_LOGGING": "false", "LOG_LEVEL": "DEBUG"},
			check: func(t *testing.T, c Config) {
				if c.LogFormat != "text" || c.LogLevel != "debug" {
					t.Errorf("log format %q level %q, want text debug", c.LogFormat, c.LogLevel)
				}
			},
			warnings: []string{"NAMESPACE is", "QUEUE_URL is", "JSON_LOGGING is", "LOG_LEVEL is"},
		},
		{
			name: "aws endpoint applies to every service",
			env:  map[string]string{"QUEUE_URL": testQueue, "NAMESPACE": "ns", "AWS_ENDPOINT": "http://127.0.0.1:4566"},
			check: func(t *testing.T, c Config) {
				want := map[string]string{"sqs": "http://127.0.0.1:4566", "autoscaling": "http://127.0.0.1:4566", "ec2": "http://127.0.0.1:4566",
					"eventbridge": "http://127.0.0.1:4566", "sts": "http://127.0.0.1:4566", "elasticloadbalancing": "http://127.0.0.1:4566"}
				if d := cmp.Diff(want, c.Endpoints); d != "" {
					t.Errorf("endpoints (-want +got):\n%s", d)
				}
			},
			warnings: []string{"NAMESPACE is", "QUEUE_URL is", "AWS_ENDPOINT is"},
		},
		{
			name:  "NTH variables honoured with a difference are reported, AWS_REGION says what wins",
			env:   map[string]string{"QUEUE_URL": testQueue, "NAMESPACE": "ns", "AWS_REGION": "us-east-1", "TAINT_NODE": "true"},
			check: func(t *testing.T, c Config) {},
			warnings: []string{"NAMESPACE is", "QUEUE_URL is",
				"AWS_REGION (an aws-node-termination-handler variable) is read with a difference: read by the AWS SDK",
				"TAINT_NODE (an aws-node-termination-handler variable) is read with a difference: lifeboat always taints"},
		},
		{
			name:     "no NTH variable, no warning",
			args:     []string{"--queue-url", testQueue, "--pod-namespace", "ns"},
			check:    func(t *testing.T, c Config) {},
			warnings: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(tt.args, env(tt.env))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			tt.check(t, c)
			if len(c.Warnings) != len(tt.warnings) {
				t.Fatalf("got %d warnings, want %d:\n%s", len(c.Warnings), len(tt.warnings), strings.Join(c.Warnings, "\n"))
			}
			for i, w := range tt.warnings {
				if !strings.Contains(c.Warnings[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, c.Warnings[i], w)
				}
			}
		})
	}
}

func TestNTHAliasErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"bad boolean", map[string]string{"QUEUE_URL": testQueue, "NAMESPACE": "ns", "DRY_RUN": "yes please"}, []string{`DRY_RUN="yes please" (alias of --dry-run)`}},
		{"bad mode boolean", map[string]string{"ENABLE_SQS_TERMINATION_DRAINING": "maybe"}, []string{`ENABLE_SQS_TERMINATION_DRAINING="maybe"`, "not a boolean"}},
		{"bad heartbeat", map[string]string{"QUEUE_URL": testQueue, "NAMESPACE": "ns", "HEARTBEAT_INTERVAL": "often"}, []string{`HEARTBEAT_INTERVAL="often"`, "neither whole seconds nor a duration"}},
		{"heartbeat out of range", map[string]string{"QUEUE_URL": testQueue, "NAMESPACE": "ns", "HEARTBEAT_INTERVAL": "7200"}, []string{"--heartbeat-interval 2h0m0s: must be 0 (automatic) or 1s..1h"}},
		{"bad workers and bad log level together", map[string]string{"QUEUE_URL": testQueue, "NAMESPACE": "ns", "WORKERS": "ten", "LOG_LEVEL": "loud"},
			[]string{`WORKERS="ten"`, `--log-level "loud"`}},
		{"bad queue url", map[string]string{"QUEUE_URL": "not a url", "NAMESPACE": "ns"}, []string{`--queue-url "not a url" is not a URL`}},
		{"refused", map[string]string{"QUEUE_URL": testQueue, "NAMESPACE": "ns", "MANAGED_ASG_TAG": "team"}, []string{"MANAGED_ASG_TAG (an aws-node-termination-handler variable) is not supported: NTH's older name of MANAGED_TAG"}},
		{"secret header value not echoed", map[string]string{"QUEUE_URL": testQueue, "NAMESPACE": "ns", "WEBHOOK_HEADERS": "Authorization: Bearer s3cret"}, []string{"WEBHOOK_HEADERS=[redacted]", "not a JSON object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(nil, env(tt.env))
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

// Every alias names a real option, and no variable is both aliased and
// ignored.
func TestNTHTables(t *testing.T) {
	seen := map[string]bool{}
	for _, a := range nthAliases {
		if seen[a.env] {
			t.Errorf("%s aliased twice", a.env)
		}
		seen[a.env] = true
		if _, ok := optionNamed(a.flag); !ok {
			t.Errorf("%s: alias of --%s, which does not exist", a.env, a.flag)
		}
		if strings.HasPrefix(a.env, "LIFEBOAT_") {
			t.Errorf("%s: aliases are NTH names", a.env)
		}
	}
	for _, ig := range nthIgnored {
		if seen[ig.env] {
			t.Errorf("%s is both aliased and ignored", ig.env)
		}
		seen[ig.env] = true
	}
}
