// Package config owns lifeboat's configuration: the flags, their environment
// fallbacks, defaults, validation and the mode/feature matrix.
//
// Load returns one immutable Config or every problem at once (errors.Join).
// This package does no I/O beyond reading the arguments and environment it is
// given; it must not create clients.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	"lifeboat.dev/lifeboat/internal/event"
)

// Mode is how lifeboat learns about interruptions.
type Mode string

const (
	ModeQueue Mode = "queue"
	ModeIMDS  Mode = "imds"
)

// Lifecycle results.
const (
	ResultContinue = "CONTINUE"
	ResultAbandon  = "ABANDON"
)

// Unknown-instance policies for messages about instances that are not nodes of this cluster.
const (
	UnknownLeave  = "leave"
	UnknownDelete = "delete"
)

// Config is lifeboat's whole configuration. Treat it as immutable.
type Config struct {
	Mode       Mode
	DryRun     bool
	Kubeconfig string
	// NodeName is this node (IMDS mode).
	NodeName string
	// PodName and PodNamespace identify lifeboat's own pod, never evicted.
	PodName      string
	PodNamespace string
	ClusterName  string

	// Queue mode.
	QueueURL          string
	Region            string
	Endpoints         map[string]string // AWS service ID (sqs, autoscaling, ec2, eventbridge, sts) -> URL
	Workers           int
	VisibilityTimeout time.Duration
	UnknownInstance   string
	PrivateDNSLookup  bool
	ManagedASGs       []string

	// IMDS mode.
	IMDSEndpoint    string
	IMDSPoll        time.Duration
	IMDSAllowV1     bool
	MaintenanceLead time.Duration

	// What to do.
	DrainKinds            []event.Kind
	ScheduledChangeLead   time.Duration
	ForceDeleteAtDeadline bool
	DeadlineMargin        time.Duration
	EvictionBackoff       time.Duration

	// Auto Scaling lifecycle actions.
	CompleteLifecycle      bool
	HeartbeatInterval      time.Duration
	LifecycleTimeoutResult string
	LaunchReadyTimeout     time.Duration
	LaunchTimeoutResult    string

	// Kubernetes client.
	KubeQPS   float32
	KubeBurst int

	// Serving and leader election.
	ListenAddr     string
	LeaderElect    bool
	LeaseName      string
	LeaseNamespace string
	LeaseDuration  time.Duration
	LogFormat      string
	LogLevel       string

	// Webhooks (notifications when an interruption is received and finished).
	// WebhookURL and WebhookHeaders are secrets: never log them.
	WebhookURL          Secret
	WebhookURLFile      string
	WebhookTemplate     string
	WebhookHeaders      Secret
	WebhookHeadersFile  string
	WebhookProxy        string
	WebhookDedupeWindow time.Duration

	// Warnings are problems that do not stop lifeboat, for the caller to
	// log: deprecated aws-node-termination-handler environment variables
	// that were read as aliases, or that have no effect.
	Warnings []string
}

// option describes one flag. The table drives parsing, env fallbacks and
// the generated docs/configuration.md.
type option struct {
	name    string
	usage   string
	modes   []Mode // empty: every mode
	def     string
	bind    func(fs *flag.FlagSet, c *Config, name, def, usage string)
	tokenOp bool // needs a lifecycle action token: refused in IMDS mode
}

func strOpt(p func(*Config) *string) func(*flag.FlagSet, *Config, string, string, string) {
	return func(fs *flag.FlagSet, c *Config, n, d, u string) { fs.StringVar(p(c), n, d, u) }
}

func boolOpt(p func(*Config) *bool) func(*flag.FlagSet, *Config, string, string, string) {
	return func(fs *flag.FlagSet, c *Config, n, d, u string) { fs.BoolVar(p(c), n, d == "true", u) }
}

func durOpt(p func(*Config) *time.Duration) func(*flag.FlagSet, *Config, string, string, string) {
	return func(fs *flag.FlagSet, c *Config, n, d, u string) {
		v, err := time.ParseDuration(d)
		if err != nil {
			panic(fmt.Sprintf("bad default for --%s: %v", n, err)) // programming error in the table
		}
		fs.DurationVar(p(c), n, v, u)
	}
}

func intOpt(p func(*Config) *int) func(*flag.FlagSet, *Config, string, string, string) {
	return func(fs *flag.FlagSet, c *Config, n, d, u string) {
		var v int
		if _, err := fmt.Sscan(d, &v); err != nil {
			panic(fmt.Sprintf("bad default for --%s: %v", n, err))
		}
		fs.IntVar(p(c), n, v, u)
	}
}

// funcOpt binds a flag parsed by set into the config.
func funcOpt(set func(c *Config, v string) error) func(*flag.FlagSet, *Config, string, string, string) {
	return func(fs *flag.FlagSet, c *Config, n, d, u string) {
		if d != "" {
			if err := set(c, d); err != nil {
				panic(fmt.Sprintf("bad default for --%s: %v", n, err))
			}
		}
		fs.Func(n, u, func(v string) error { return set(c, v) })
	}
}

var serviceIDs = []string{"sqs", "autoscaling", "ec2", "eventbridge", "sts"}

var options = []option{
	{name: "mode", def: "queue", usage: "how interruptions are learned: queue (SQS, a leader-elected Deployment) or imds (instance metadata, a DaemonSet)",
		bind: funcOpt(func(c *Config, v string) error { c.Mode = Mode(v); return nil })},
	{name: "dry-run", def: "false", usage: "change nothing anywhere (no cordon, eviction, lifecycle call or message deletion); log and report what would be done",
		bind: boolOpt(func(c *Config) *bool { return &c.DryRun })},
	{name: "kubeconfig", usage: "kubeconfig file; empty means in-cluster configuration",
		bind: strOpt(func(c *Config) *string { return &c.Kubeconfig })},
	{name: "node-name", modes: []Mode{ModeIMDS}, usage: "name of the node lifeboat runs on (IMDS mode; set from the downward API)",
		bind: strOpt(func(c *Config) *string { return &c.NodeName })},
	{name: "pod-name", usage: "lifeboat's own pod name (downward API); it is never evicted",
		bind: strOpt(func(c *Config) *string { return &c.PodName })},
	{name: "pod-namespace", usage: "lifeboat's own namespace (downward API)",
		bind: strOpt(func(c *Config) *string { return &c.PodNamespace })},
	{name: "cluster-name", modes: []Mode{ModeQueue}, usage: "cluster name; an Auto Scaling group tagged kubernetes.io/cluster/<name> is this cluster's (needed to complete launch lifecycle actions)",
		bind: strOpt(func(c *Config) *string { return &c.ClusterName })},
	{name: "queue-url", modes: []Mode{ModeQueue}, usage: "URL of the SQS queue fed by EventBridge or Auto Scaling (required in queue mode)",
		bind: strOpt(func(c *Config) *string { return &c.QueueURL })},
	{name: "region", modes: []Mode{ModeQueue}, usage: "AWS region; empty means the SDK's default chain (AWS_REGION, profile)",
		bind: strOpt(func(c *Config) *string { return &c.Region })},
	{name: "aws-endpoint", modes: []Mode{ModeQueue}, usage: "override an AWS endpoint, as service=URL (services: sqs, autoscaling, ec2, eventbridge, sts), or a bare URL for all; repeatable or comma-separated",
		bind: funcOpt(func(c *Config, v string) error { return parseEndpoints(c, v) })},
	{name: "workers", modes: []Mode{ModeQueue}, def: "10", usage: "messages handled in parallel (drains run outside these slots)",
		bind: intOpt(func(c *Config) *int { return &c.Workers })},
	{name: "visibility-timeout", modes: []Mode{ModeQueue}, def: "2m", usage: "visibility of a received message, extended while its work runs",
		bind: durOpt(func(c *Config) *time.Duration { return &c.VisibilityTimeout })},
	{name: "unknown-instance", modes: []Mode{ModeQueue}, def: UnknownLeave, usage: "what to do with a message about an instance that is not a node of this cluster: leave (for its owner, until retention) or delete",
		bind: strOpt(func(c *Config) *string { return &c.UnknownInstance })},
	{name: "private-dns-lookup", modes: []Mode{ModeQueue}, def: "false", usage: "when no node has the instance's providerID, look the instance's private DNS name up in EC2 and match it to a node name",
		bind: boolOpt(func(c *Config) *bool { return &c.PrivateDNSLookup })},
	{name: "managed-asg", modes: []Mode{ModeQueue}, usage: "Auto Scaling group names whose launch actions this cluster owns (comma-separated), in addition to groups tagged for --cluster-name",
		bind: funcOpt(func(c *Config, v string) error { c.ManagedASGs = appendList(c.ManagedASGs, v); return nil })},
	{name: "imds-endpoint", modes: []Mode{ModeIMDS}, usage: "instance metadata endpoint; empty means the SDK default (http://169.254.169.254)",
		bind: strOpt(func(c *Config) *string { return &c.IMDSEndpoint })},
	{name: "imds-poll-interval", modes: []Mode{ModeIMDS}, def: "1s", usage: "how often instance metadata is read",
		bind: durOpt(func(c *Config) *time.Duration { return &c.IMDSPoll })},
	{name: "imds-allow-v1", modes: []Mode{ModeIMDS}, def: "false", usage: "fall back to IMDSv1 when no IMDSv2 token can be obtained",
		bind: boolOpt(func(c *Config) *bool { return &c.IMDSAllowV1 })},
	{name: "drain-on", def: "spot-interruption,scheduled-change,state-change,capacity-reservation-interruption,lifecycle-terminate", usage: "event kinds that drain the node; the other kinds only cordon and taint it (add rebalance-recommendation to drain on rebalance)",
		bind: funcOpt(func(c *Config, v string) error { return parseKinds(c, v) })},
	{name: "scheduled-change-lead", def: "10m", usage: "act this long before a scheduled change's start time",
		bind: durOpt(func(c *Config) *time.Duration { return &c.ScheduledChangeLead })},
	{name: "force-delete-at-deadline", def: "false", usage: "when AWS's deadline is about to pass, delete the pods still running (they would be killed anyway); needs pods/delete",
		bind: boolOpt(func(c *Config) *bool { return &c.ForceDeleteAtDeadline })},
	{name: "deadline-margin", def: "5s", usage: "time kept in reserve before AWS's deadline when capping grace periods",
		bind: durOpt(func(c *Config) *time.Duration { return &c.DeadlineMargin })},
	{name: "eviction-backoff", def: "5s", usage: "delay before an eviction refused by a PodDisruptionBudget (429) is tried again",
		bind: durOpt(func(c *Config) *time.Duration { return &c.EvictionBackoff })},
	{name: "complete-lifecycle", modes: []Mode{ModeQueue}, def: "true", tokenOp: true, usage: "heartbeat and complete Auto Scaling lifecycle actions",
		bind: boolOpt(func(c *Config) *bool { return &c.CompleteLifecycle })},
	{name: "heartbeat-interval", modes: []Mode{ModeQueue}, def: "0s", tokenOp: true, usage: "interval of lifecycle heartbeats; 0 means half the hook's heartbeat timeout",
		bind: durOpt(func(c *Config) *time.Duration { return &c.HeartbeatInterval })},
	{name: "lifecycle-timeout-result", modes: []Mode{ModeQueue}, def: ResultContinue, tokenOp: true, usage: "result of a terminate action whose drain cannot finish before the hook's global timeout: CONTINUE or ABANDON",
		bind: strOpt(func(c *Config) *string { return &c.LifecycleTimeoutResult })},
	{name: "launch-ready-timeout", modes: []Mode{ModeQueue}, def: "15m", tokenOp: true, usage: "how long a launching instance may take to become a Ready node before its launch action gets --launch-timeout-result",
		bind: durOpt(func(c *Config) *time.Duration { return &c.LaunchReadyTimeout })},
	{name: "launch-timeout-result", modes: []Mode{ModeQueue}, def: ResultAbandon, tokenOp: true, usage: "result of a launch action whose node never became Ready: ABANDON or CONTINUE",
		bind: strOpt(func(c *Config) *string { return &c.LaunchTimeoutResult })},
	{name: "kube-qps", def: "200", usage: "Kubernetes client queries per second (Events have their own 20 QPS); sized so a 200-node burst drains in seconds, see docs/benchmarks.md",
		bind: funcOpt(func(c *Config, v string) error { _, err := fmt.Sscan(v, &c.KubeQPS); return err })},
	{name: "kube-burst", def: "400", usage: "Kubernetes client burst",
		bind: intOpt(func(c *Config) *int { return &c.KubeBurst })},
	{name: "listen", def: ":8080", usage: "address of /metrics, /healthz and /readyz; empty disables",
		bind: strOpt(func(c *Config) *string { return &c.ListenAddr })},
	{name: "leader-elect", modes: []Mode{ModeQueue}, def: "true", usage: "only the holder of a Lease consumes the queue",
		bind: boolOpt(func(c *Config) *bool { return &c.LeaderElect })},
	{name: "lease-name", modes: []Mode{ModeQueue}, def: "lifeboat", usage: "name of the leader-election Lease",
		bind: strOpt(func(c *Config) *string { return &c.LeaseName })},
	{name: "lease-namespace", modes: []Mode{ModeQueue}, usage: "namespace of the Lease; empty means --pod-namespace",
		bind: strOpt(func(c *Config) *string { return &c.LeaseNamespace })},
	{name: "lease-duration", modes: []Mode{ModeQueue}, def: "15s", usage: "leader-election lease duration",
		bind: durOpt(func(c *Config) *time.Duration { return &c.LeaseDuration })},
	{name: "log-format", def: "json", usage: "json or text",
		bind: strOpt(func(c *Config) *string { return &c.LogFormat })},
	{name: "log-level", def: "info", usage: "debug, info, warn or error",
		bind: strOpt(func(c *Config) *string { return &c.LogLevel })},
	{name: "webhook-url", usage: "webhook that is told when an interruption is received and when it is finished; a secret: prefer LIFEBOAT_WEBHOOK_URL from a Secret or --webhook-url-file; empty disables webhooks",
		bind: funcOpt(func(c *Config, v string) error { c.WebhookURL = Secret(v); return nil })},
	{name: "webhook-url-file", usage: "file holding the webhook URL (a mounted Secret)",
		bind: strOpt(func(c *Config) *string { return &c.WebhookURLFile })},
	{name: "webhook-template", def: "slack", usage: "body of webhook requests: slack, teams (Workflows, Adaptive Card), json (the notification itself) or the path of a Go text/template file rendering JSON from a notification",
		bind: strOpt(func(c *Config) *string { return &c.WebhookTemplate })},
	{name: "webhook-headers", usage: "extra HTTP headers of webhook requests, one \"Name: value\" a line (a secret: prefer LIFEBOAT_WEBHOOK_HEADERS from a Secret or --webhook-headers-file)",
		bind: funcOpt(func(c *Config, v string) error { c.WebhookHeaders = Secret(v); return nil })},
	{name: "webhook-headers-file", usage: "file of extra HTTP headers of webhook requests, one \"Name: value\" a line (a mounted Secret)",
		bind: strOpt(func(c *Config) *string { return &c.WebhookHeadersFile })},
	{name: "webhook-proxy", usage: "HTTP(S) proxy for webhook requests; empty means HTTPS_PROXY, HTTP_PROXY and NO_PROXY",
		bind: strOpt(func(c *Config) *string { return &c.WebhookProxy })},
	{name: "webhook-dedupe-window", def: "30m", usage: "a node's notification of one phase (received, finished) is sent at most once in this window, however many signals arrive",
		bind: durOpt(func(c *Config) *time.Duration { return &c.WebhookDedupeWindow })},
}

// EnvName is the environment variable that backs a flag: --queue-url -> LIFEBOAT_QUEUE_URL.
func EnvName(flagName string) string {
	return "LIFEBOAT_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Load parses args (without the program and subcommand names) with
// environment fallbacks from getenv; flags win, then LIFEBOAT_* variables,
// then the aws-node-termination-handler variables read as deprecated
// aliases. It returns every problem at once; what does not stop lifeboat
// (deprecated or ignored variables) is in Config.Warnings, for the caller to
// log.
func Load(args []string, getenv func(string) string) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("lifeboat", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, o := range options {
		o.bind(fs, &c, o.name, o.def, o.usage)
	}
	if err := fs.Parse(args); err != nil {
		return Config{}, fmt.Errorf("parsing flags: %w", err)
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	set := map[string]bool{}
	setBy := map[string]string{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true; setBy[f.Name] = "the command line" })
	var errs []error
	for _, o := range options {
		if set[o.name] {
			continue
		}
		if v := getenv(EnvName(o.name)); v != "" {
			if err := fs.Set(o.name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", EnvName(o.name), v, err))
			} else {
				set[o.name] = true
				setBy[o.name] = EnvName(o.name)
			}
		}
	}
	// aws-node-termination-handler's variables come last: every lifeboat
	// flag and variable wins over them.
	warnings, nthErrs := applyNTH(getenv, fs.Set, set, setBy, func() Mode { return c.Mode })
	errs = append(errs, nthErrs...)
	c.Warnings = warnings
	if c.LeaseNamespace == "" {
		c.LeaseNamespace = c.PodNamespace
	}
	errs = append(errs, c.validate(set)...)
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return c, nil
}

func (c *Config) validate(set map[string]bool) []error {
	var errs []error
	switch c.Mode {
	case ModeQueue, ModeIMDS:
	default:
		return []error{fmt.Errorf("--mode %q: must be queue or imds", c.Mode)}
	}
	// The mode matrix: an option that does not apply to the mode is an
	// error when set explicitly, never a silent no-op.
	for _, o := range options {
		if !set[o.name] || len(o.modes) == 0 || slices.Contains(o.modes, c.Mode) {
			continue
		}
		if o.tokenOp && c.Mode == ModeIMDS {
			errs = append(errs, fmt.Errorf("--%s is not supported in imds mode: instance metadata gives no lifecycle action token, so lifeboat cannot heartbeat or complete the action (use queue mode)", o.name))
			continue
		}
		errs = append(errs, fmt.Errorf("--%s is not supported in %s mode (only in %s mode)", o.name, c.Mode, joinModes(o.modes)))
	}
	if c.Mode == ModeQueue {
		if c.QueueURL == "" {
			errs = append(errs, fmt.Errorf("--queue-url is required in queue mode (or %s)", EnvName("queue-url")))
		} else if u, err := url.Parse(c.QueueURL); err != nil || u.Scheme == "" || u.Host == "" {
			errs = append(errs, fmt.Errorf("--queue-url %q is not a URL", c.QueueURL))
		}
		if c.Workers < 1 || c.Workers > 1000 {
			errs = append(errs, fmt.Errorf("--workers %d: must be 1..1000", c.Workers))
		}
		if c.VisibilityTimeout < 10*time.Second || c.VisibilityTimeout > 12*time.Hour {
			errs = append(errs, fmt.Errorf("--visibility-timeout %s: must be 10s..12h", c.VisibilityTimeout))
		}
		if c.UnknownInstance != UnknownLeave && c.UnknownInstance != UnknownDelete {
			errs = append(errs, fmt.Errorf("--unknown-instance %q: must be leave or delete", c.UnknownInstance))
		}
		if c.HeartbeatInterval != 0 && (c.HeartbeatInterval < time.Second || c.HeartbeatInterval > time.Hour) {
			errs = append(errs, fmt.Errorf("--heartbeat-interval %s: must be 0 (automatic) or 1s..1h", c.HeartbeatInterval))
		}
		for _, r := range []struct{ flag, v string }{{"lifecycle-timeout-result", c.LifecycleTimeoutResult}, {"launch-timeout-result", c.LaunchTimeoutResult}} {
			if r.v != ResultContinue && r.v != ResultAbandon {
				errs = append(errs, fmt.Errorf("--%s %q: must be CONTINUE or ABANDON", r.flag, r.v))
			}
		}
		if c.LeaderElect && c.LeaseNamespace == "" {
			errs = append(errs, errors.New("--leader-elect needs --lease-namespace or --pod-namespace"))
		}
		if c.LeaseDuration < 2*time.Second {
			errs = append(errs, fmt.Errorf("--lease-duration %s: must be at least 2s", c.LeaseDuration))
		}
	}
	if c.Mode == ModeIMDS {
		if c.NodeName == "" {
			errs = append(errs, fmt.Errorf("--node-name is required in imds mode (or %s, from the downward API spec.nodeName)", EnvName("node-name")))
		}
		if c.IMDSPoll < 100*time.Millisecond || c.IMDSPoll > time.Minute {
			errs = append(errs, fmt.Errorf("--imds-poll-interval %s: must be 100ms..1m", c.IMDSPoll))
		}
		if c.IMDSEndpoint != "" {
			if u, err := url.Parse(c.IMDSEndpoint); err != nil || u.Scheme == "" || u.Host == "" {
				errs = append(errs, fmt.Errorf("--imds-endpoint %q is not a URL", c.IMDSEndpoint))
			}
		}
		// In IMDS mode lifecycle actions cannot be completed; the default
		// of --complete-lifecycle does not apply.
		c.CompleteLifecycle = false
	}
	if c.ScheduledChangeLead < 0 || c.DeadlineMargin < 0 || c.EvictionBackoff < 100*time.Millisecond {
		errs = append(errs, errors.New("--scheduled-change-lead and --deadline-margin must be ≥ 0 and --eviction-backoff ≥ 100ms"))
	}
	if c.KubeQPS <= 0 || c.KubeBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-qps %v and --kube-burst %d must be positive", c.KubeQPS, c.KubeBurst))
	}
	errs = append(errs, c.validateWebhook()...)
	if c.LogFormat != "json" && c.LogFormat != "text" {
		errs = append(errs, fmt.Errorf("--log-format %q: must be json or text", c.LogFormat))
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.LogLevel) {
		errs = append(errs, fmt.Errorf("--log-level %q: must be debug, info, warn or error", c.LogLevel))
	}
	return errs
}

// Drains reports whether events of kind k drain the node (else cordon only).
func (c Config) Drains(k event.Kind) bool { return slices.Contains(c.DrainKinds, k) }

func parseEndpoints(c *Config, v string) error {
	if c.Endpoints == nil {
		c.Endpoints = map[string]string{}
	}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		svc, u, found := strings.Cut(item, "=")
		if !found {
			u = item
		}
		if pu, err := url.Parse(u); err != nil || pu.Scheme == "" || pu.Host == "" {
			return fmt.Errorf("%q is not a URL", u)
		}
		if !found {
			for _, s := range serviceIDs {
				c.Endpoints[s] = u
			}
			continue
		}
		if !slices.Contains(serviceIDs, svc) {
			return fmt.Errorf("unknown service %q (known: %s)", svc, strings.Join(serviceIDs, ", "))
		}
		c.Endpoints[svc] = u
	}
	return nil
}

func parseKinds(c *Config, v string) error {
	c.DrainKinds = nil
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		k := event.Kind(s)
		if !slices.Contains(event.Kinds, k) || k == event.ScheduledChangeCanceled || k == event.LifecycleLaunch {
			return fmt.Errorf("unknown or non-draining kind %q", s)
		}
		c.DrainKinds = append(c.DrainKinds, k)
	}
	return nil
}

func appendList(l []string, v string) []string {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			l = append(l, s)
		}
	}
	return l
}

func joinModes(ms []Mode) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}

// Secret is a configuration value that must never be printed: it formats
// as [redacted].
type Secret string

func (Secret) String() string   { return "[redacted]" }
func (Secret) GoString() string { return "[redacted]" }

// Webhooks reports whether a webhook is configured.
func (c Config) Webhooks() bool { return c.WebhookURL != "" || c.WebhookURLFile != "" }

// validateWebhook checks the webhook options without echoing secrets.
func (c *Config) validateWebhook() []error {
	var errs []error
	if c.WebhookURL != "" && c.WebhookURLFile != "" {
		errs = append(errs, errors.New("--webhook-url and --webhook-url-file are exclusive"))
	}
	if c.WebhookHeaders != "" && c.WebhookHeadersFile != "" {
		errs = append(errs, errors.New("--webhook-headers and --webhook-headers-file are exclusive"))
	}
	if c.WebhookURL != "" {
		if u, err := url.Parse(string(c.WebhookURL)); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, errors.New("--webhook-url is not an http(s) URL (value not shown: it is a secret)"))
		}
	}
	if c.WebhookProxy != "" {
		if u, err := url.Parse(c.WebhookProxy); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, errors.New("--webhook-proxy is not an http(s) URL"))
		}
	}
	if c.WebhookDedupeWindow < time.Minute {
		errs = append(errs, fmt.Errorf("--webhook-dedupe-window %s: must be at least 1m", c.WebhookDedupeWindow))
	}
	return errs
}
