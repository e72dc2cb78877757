package config

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/event"
)

// nthReference is the directory of the facts about aws-node-termination-handler.
var nthReference = filepath.Join("..", "..", "..", "shared", "reference", "nth")

// readTSV returns the rows of a reference file, without comments and header.
func readTSV(t *testing.T, name string) [][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(nthReference, name))
	if err != nil {
		t.Fatalf("the NTH reference file is missing: %v", err)
	}
	defer f.Close()
	var rows [][]string
	sc := bufio.NewScanner(f)
	header := true
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if header {
			header = false
			continue
		}
		rows = append(rows, strings.Split(line, "\t"))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no rows", name)
	}
	return rows
}

// nthCase sets one NTH variable (with env, the others it needs) and checks
// that the setting took effect in the Config.
type nthCase struct {
	value string
	env   map[string]string
	check func(c Config) error
}

func want[T comparable](what string, got, want T) error {
	if got != want {
		return fmt.Errorf("%s = %v, want %v", what, got, want)
	}
	return nil
}

func drains(c Config, k event.Kind, want bool) error {
	if c.Drains(k) != want {
		return fmt.Errorf("drains %s = %v, want %v (drain kinds %v)", k, !want, want, c.DrainKinds)
	}
	return nil
}

var imdsEnv = map[string]string{"ENABLE_SQS_TERMINATION_DRAINING": "false", "NODE_NAME": "ip-10-0-0-1.ec2.internal"}

// nthCases has one case for every honoured variable.
var nthCases = map[string]nthCase{
	"POD_TERMINATION_GRACE_PERIOD":  {value: "45", check: func(c Config) error { return want("pod grace", c.PodGracePeriod, 45*time.Second) }},
	"GRACE_PERIOD":                  {value: "20", check: func(c Config) error { return want("pod grace", c.PodGracePeriod, 20*time.Second) }},
	"NODE_TERMINATION_GRACE_PERIOD": {value: "120", check: func(c Config) error { return want("node grace", c.NodeGracePeriod, 120*time.Second) }},
	"CHECK_TAG_BEFORE_DRAINING":     {value: "true", check: func(c Config) error { return want("managed tag", c.ManagedTag, "aws-node-termination-handler/managed") }},
	"MANAGED_TAG":                   {value: "team/owned", check: func(c Config) error { return want("managed tag", c.ManagedTag, "team/owned") }},
	"TAINT_EFFECT": {value: "PreferNoSchedule", env: map[string]string{"TAINT_NODE": "true"},
		check: func(c Config) error { return want("taint effect", c.TaintEffect, "PreferNoSchedule") }},
	"ENABLE_OUT_OF_SERVICE_TAINT":             {value: "true", check: func(c Config) error { return want("out-of-service taint", c.OutOfServiceTaint, true) }},
	"EXCLUDE_FROM_LOAD_BALANCERS":             {value: "true", check: func(c Config) error { return want("exclude from load balancers", c.ExcludeFromLB, true) }},
	"COMPLETE_LIFECYCLE_ACTION_DELAY_SECONDS": {value: "5", check: func(c Config) error { return want("lifecycle delay", c.CompleteLifecycleDelay, 5*time.Second) }},
	"HEARTBEAT_UNTIL":                         {value: "600", check: func(c Config) error { return want("heartbeat until", c.HeartbeatUntil, 600*time.Second) }},
	"AWS_ENDPOINT":                            {value: "http://127.0.0.1:4566", check: func(c Config) error { return want("sqs endpoint", c.Endpoints["sqs"], "http://127.0.0.1:4566") }},
	"AWS_REGION":                              {value: "us-west-2", check: func(c Config) error { return want("--region (the SDK reads AWS_REGION itself)", c.Region, "") }},
	"CORDON_ONLY":                             {value: "true", check: func(c Config) error { return want("drain kinds", len(c.DrainKinds), 0) }},
	"DELETE_LOCAL_DATA":                       {value: "true", check: func(Config) error { return nil }},
	"DELETE_SQS_MSG_IF_NODE_NOT_FOUND":        {value: "true", check: func(c Config) error { return want("unknown instance", c.UnknownInstance, UnknownDelete) }},
	"DRY_RUN":                                 {value: "true", check: func(c Config) error { return want("dry run", c.DryRun, true) }},
	"EMIT_KUBERNETES_EVENTS":                  {value: "false", check: func(Config) error { return nil }},
	"ENABLE_ASG_LIFECYCLE_DRAINING": {value: "false", env: imdsEnv, check: func(c Config) error {
		return errorsOf(drains(c, event.LifecycleTerminate, false), drains(c, event.SpotInterruption, true))
	}},
	"ENABLE_PROBES_SERVER":     {value: "true", check: func(c Config) error { return want("listen", c.ListenAddr, ":8080") }},
	"PROBES_SERVER_PORT":       {value: "8081", env: map[string]string{"ENABLE_PROBES_SERVER": "true"}, check: func(c Config) error { return want("listen", c.ListenAddr, ":8081") }},
	"ENABLE_PROMETHEUS_SERVER": {value: "true", check: func(c Config) error { return want("listen", c.ListenAddr, ":9092") }},
	"PROMETHEUS_SERVER_PORT": {value: "9100", env: map[string]string{"ENABLE_PROMETHEUS_SERVER": "true", "ENABLE_PROBES_SERVER": "true", "PROBES_SERVER_PORT": "9100"},
		check: func(c Config) error { return want("listen", c.ListenAddr, ":9100") }},
	"ENABLE_REBALANCE_DRAINING":   {value: "true", check: func(c Config) error { return drains(c, event.RebalanceRecommendation, true) }},
	"ENABLE_REBALANCE_MONITORING": {value: "false", env: imdsEnv, check: func(c Config) error { return drains(c, event.RebalanceRecommendation, false) }},
	"ENABLE_SCHEDULED_EVENT_DRAINING": {value: "false", env: imdsEnv, check: func(c Config) error {
		return errorsOf(drains(c, event.ScheduledChange, false), drains(c, event.SpotInterruption, true))
	}},
	"ENABLE_SPOT_INTERRUPTION_DRAINING": {value: "false", env: imdsEnv, check: func(c Config) error {
		return errorsOf(drains(c, event.SpotInterruption, false), drains(c, event.LifecycleTerminate, true))
	}},
	"ENABLE_SQS_TERMINATION_DRAINING": {value: "false", env: map[string]string{"NODE_NAME": "n"}, check: func(c Config) error { return want("mode", c.Mode, ModeIMDS) }},
	"HEARTBEAT_INTERVAL":              {value: "30", check: func(c Config) error { return want("heartbeat interval", c.HeartbeatInterval, 30*time.Second) }},
	"IGNORE_DAEMON_SETS":              {value: "true", check: func(Config) error { return nil }},
	"INSTANCE_METADATA_URL":           {value: "http://127.0.0.1:1338", env: imdsEnv, check: func(c Config) error { return want("imds endpoint", c.IMDSEndpoint, "http://127.0.0.1:1338") }},
	"JSON_LOGGING":                    {value: "false", check: func(c Config) error { return want("log format", c.LogFormat, "text") }},
	"KUBERNETES_SERVICE_HOST":         {value: "10.0.0.1", check: func(Config) error { return nil }},
	"KUBERNETES_SERVICE_PORT":         {value: "443", check: func(Config) error { return nil }},
	"KUBE_API_QPS":                    {value: "5", check: func(c Config) error { return want("kube qps", c.KubeQPS, 5) }},
	"KUBERNETES_EVENTS_EXTRA_ANNOTATIONS": {value: "first=annotation,sample.annotation/number=two", check: func(c Config) error {
		return errorsOf(want("annotation first", c.EventAnnotations["first"], "annotation"), want("annotation sample", c.EventAnnotations["sample.annotation/number"], "two"))
	}},
	"KUBE_API_BURST":         {value: "10", check: func(c Config) error { return want("kube burst", c.KubeBurst, 10) }},
	"LOG_FORMAT_VERSION":     {value: "2", check: func(Config) error { return nil }},
	"LOG_LEVEL":              {value: "DEBUG", check: func(c Config) error { return want("log level", c.LogLevel, "debug") }},
	"METADATA_TRIES":         {value: "3", check: func(Config) error { return nil }},
	"NAMESPACE":              {value: "kube-system", check: func(c Config) error { return want("pod namespace", c.PodNamespace, "kube-system") }},
	"NODE_NAME":              {value: "ip-10-0-0-9.ec2.internal", env: map[string]string{"ENABLE_SQS_TERMINATION_DRAINING": "false"}, check: func(c Config) error { return want("node name", c.NodeName, "ip-10-0-0-9.ec2.internal") }},
	"POD_NAME":               {value: "nth-abc", check: func(c Config) error { return want("pod name", c.PodName, "nth-abc") }},
	"PROBES_SERVER_ENDPOINT": {value: "/healthz", check: func(Config) error { return nil }},
	"QUEUE_URL": {value: "https://sqs.eu-west-1.amazonaws.com/1/other", check: func(c Config) error {
		return want("queue url", c.QueueURL, "https://sqs.eu-west-1.amazonaws.com/1/other")
	}},
	"SQS_MSG_VISIBILITY_TIMEOUT_SEC": {value: "20", check: func(c Config) error { return want("visibility timeout", c.VisibilityTimeout, 20*time.Second) }},
	"TAINT_NODE":                     {value: "false", check: func(Config) error { return nil }},
	"UPTIME_FROM_FILE":               {value: "/proc/uptime", check: func(Config) error { return nil }},
	"USE_APISERVER_CACHE":            {value: "true", check: func(Config) error { return nil }},
	"USE_PROVIDER_ID":                {value: "false", check: func(c Config) error { return want("private dns lookup", c.PrivateDNSLookup, true) }},
	"WEBHOOK_HEADERS": {value: `{"Content-type":"application/json","Authorization":"Bearer x"}`, check: func(c Config) error {
		return want("webhook headers", string(c.WebhookHeaders), "Authorization: Bearer x\nContent-type: application/json")
	}},
	"WEBHOOK_PROXY":         {value: "http://proxy.internal:3128", check: func(c Config) error { return want("webhook proxy", c.WebhookProxy, "http://proxy.internal:3128") }},
	"WEBHOOK_TEMPLATE":      {value: `{"text":"{{ .EventID }}"}`, check: func(c Config) error { return want("webhook template", c.WebhookTemplate, `{"text":"{{ .EventID }}"}`) }},
	"WEBHOOK_TEMPLATE_FILE": {value: "/etc/nth/template.json", check: func(c Config) error { return want("webhook template", c.WebhookTemplate, "/etc/nth/template.json") }},
	"WEBHOOK_URL":           {value: "https://hooks.example/x", check: func(c Config) error { return want("webhook url", string(c.WebhookURL), "https://hooks.example/x") }},
	"WORKERS":               {value: "4", check: func(c Config) error { return want("workers", c.Workers, 4) }},
}

func errorsOf(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// nthBase is what every case needs to load in queue mode.
var nthBase = map[string]string{"QUEUE_URL": testQueue, "NAMESPACE": "ns"}

func nthLoad(env ...map[string]string) (Config, error) {
	all := map[string]string{}
	for _, e := range env {
		for k, v := range e {
			all[k] = v
		}
	}
	return Load(nil, func(k string) string { return all[k] })
}

// TestNTHDecisions: every row of NTH's options.tsv has a decision, each
// honoured one takes effect in the Config, each refused one stops the load
// with an error naming it.
func TestNTHDecisions(t *testing.T) {
	rows := map[string]nthRow{}
	for _, r := range nthRows() {
		if _, dup := rows[r.env]; dup {
			t.Errorf("%s has two decisions", r.env)
		}
		rows[r.env] = r
	}
	var tsv []string
	for _, rec := range readTSV(t, "options.tsv") {
		env, def := rec[0], strings.Trim(rec[3], "\"`")
		tsv = append(tsv, env)
		r, ok := rows[env]
		if !ok {
			t.Errorf("%s (options.tsv) has no decision: add it to internal/config/nthtable.go", env)
			continue
		}
		t.Run(env, func(t *testing.T) {
			switch r.decision {
			case nthSame, nthDiffers:
				tc, ok := nthCases[env]
				if !ok {
					t.Fatalf("honoured %s has no case in nthCases", env)
				}
				c, err := nthLoad(nthBase, tc.env, map[string]string{env: tc.value})
				if err != nil {
					t.Fatalf("Load with %s=%s: %v", env, tc.value, err)
				}
				if err := tc.check(c); err != nil {
					t.Errorf("%s=%s: %v", env, tc.value, err)
				}
				// Every alias and difference is logged; a fixed behaviour
				// asked for as is (IGNORE_DAEMON_SETS=true) needs no word.
				silent := r.decision == nthSame && !strings.HasPrefix(r.lifeboat, "`--")
				if !silent && !slices.ContainsFunc(c.Warnings, func(w string) bool { return strings.HasPrefix(w, env+" ") }) {
					t.Errorf("no warning says %s was read: %q", env, c.Warnings)
				}
			case nthRefused, nthPending:
				v := def
				if v == "" {
					v = "x"
				}
				_, err := nthLoad(nthBase, map[string]string{env: v})
				if err == nil || !strings.Contains(err.Error(), env) {
					t.Errorf("Load with %s=%s: err = %v, want an error naming it", env, v, err)
				}
			default:
				t.Errorf("%s: unknown decision %q", env, r.decision)
			}
		})
	}
	for env := range rows {
		if !slices.Contains(tsv, env) {
			t.Errorf("%s has a decision but is not in options.tsv", env)
		}
	}
	// A value other than the one honoured is refused, naming the variable.
	for _, f := range nthFixed {
		if f.only == "" {
			continue
		}
		_, err := nthLoad(nthBase, map[string]string{f.env: "other"})
		if err == nil || !strings.Contains(err.Error(), f.env) {
			t.Errorf("Load with %s=other: err = %v, want an error naming it", f.env, err)
		}
	}
}

// Two NTH servers on different ports cannot both be served: refused.
func TestNTHListenConflict(t *testing.T) {
	_, err := nthLoad(nthBase, map[string]string{"ENABLE_PROMETHEUS_SERVER": "true", "ENABLE_PROBES_SERVER": "true"})
	if err == nil || !strings.Contains(err.Error(), "ENABLE_PROMETHEUS_SERVER (port 9092) and ENABLE_PROBES_SERVER (port 8080)") {
		t.Errorf("err = %v, want the port conflict named", err)
	}
	// NTH's chart renders both ports with the servers off: lifeboat keeps --listen.
	c, err := nthLoad(nthBase, map[string]string{"ENABLE_PROMETHEUS_SERVER": "false", "PROMETHEUS_SERVER_PORT": "9092", "ENABLE_PROBES_SERVER": "false", "PROBES_SERVER_PORT": "8080"})
	if err != nil || c.ListenAddr != ":8080" {
		t.Errorf("servers off: listen %q, err %v; want :8080", c.ListenAddr, err)
	}
}

// The generated table in docs/migration-from-nth.md is up to date.
func TestMigrationDocUpToDate(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "migration-from-nth.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := MigrationDoc(string(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if doc != string(b) {
		t.Errorf("docs/migration-from-nth.md's generated table is stale: run `make docs`")
	}
}

// NTH's webhook secrets are never echoed in warnings or errors.
func TestNTHSecretsNotEchoed(t *testing.T) {
	const url, auth = "https://hooks.example/T0/B0/nthSECRET", "Bearer nthHEADER"
	c, err := nthLoad(nthBase, map[string]string{"WEBHOOK_URL": url, "WEBHOOK_HEADERS": `{"Authorization":"` + auth + `"}`, "WEBHOOK_PROXY": "http://user:pw0rd@proxy:3128"})
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(c.Warnings, "\n")
	for _, s := range []string{"nthSECRET", "nthHEADER", "pw0rd"} {
		if strings.Contains(all, s) {
			t.Errorf("a warning shows the secret %q:\n%s", s, all)
		}
	}
	_, err = nthLoad(nthBase, map[string]string{"WEBHOOK_HEADERS": "Authorization: " + auth})
	if err == nil || strings.Contains(err.Error(), "nthHEADER") {
		t.Errorf("bad WEBHOOK_HEADERS: err %v, want an error without the secret", err)
	}
}

// NTH's queue-mode manifest sets the IMDS switches to false and still
// drains on every notice from the queue: lifeboat ignores them there too.
func TestNTHQueueModeDrainSwitches(t *testing.T) {
	c, err := nthLoad(nthBase, map[string]string{"ENABLE_SQS_TERMINATION_DRAINING": "true",
		"ENABLE_SPOT_INTERRUPTION_DRAINING": "false", "ENABLE_SCHEDULED_EVENT_DRAINING": "false",
		"ENABLE_REBALANCE_MONITORING": "false", "ENABLE_REBALANCE_DRAINING": "false", "ENABLE_ASG_LIFECYCLE_DRAINING": "false"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []event.Kind{event.SpotInterruption, event.ScheduledChange, event.LifecycleTerminate} {
		if err := drains(c, k, true); err != nil {
			t.Error(err)
		}
	}
	if err := drains(c, event.RebalanceRecommendation, false); err != nil {
		t.Error(err)
	}
	if !slices.ContainsFunc(c.Warnings, func(w string) bool {
		return strings.HasPrefix(w, "ENABLE_SPOT_INTERRUPTION_DRAINING (an aws-node-termination-handler variable) is ignored in queue mode")
	}) {
		t.Errorf("no warning that ENABLE_SPOT_INTERRUPTION_DRAINING is ignored in queue mode: %q", c.Warnings)
	}
}
