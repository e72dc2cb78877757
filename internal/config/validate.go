package config

import (
	"errors"
	"fmt"
	"lifeboat.dev/lifeboat/internal/window"
	"net/url"
	"slices"
	"time"

	"lifeboat.dev/lifeboat/internal/lifecycle"
)

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
		if o.why != "" {
			errs = append(errs, fmt.Errorf("--%s is refused with --mode %s: %s", o.name, c.Mode, o.why))
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
		if c.QueueReceivers < 1 || c.QueueReceivers > 100 {
			errs = append(errs, fmt.Errorf("--queue-receivers %d: must be 1..100", c.QueueReceivers))
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
		for _, r := range []struct {
			flag string
			v    lifecycle.Result
		}{{"lifecycle-timeout-result", c.LifecycleTimeoutResult}, {"launch-timeout-result", c.LaunchTimeoutResult}} {
			if r.v != lifecycle.Continue && r.v != lifecycle.Abandon {
				errs = append(errs, fmt.Errorf("--%s %q: must be CONTINUE or ABANDON", r.flag, r.v))
			}
		}
		if c.ScaleInProtectionInterval < time.Second {
			errs = append(errs, fmt.Errorf("--scale-in-protection-interval %s: must be at least 1s", c.ScaleInProtectionInterval))
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
		// In IMDS mode there is no token: the node completes only its own
		// terminate action, by instance ID, and only when asked (it needs
		// Auto Scaling permissions on the instance role); the default of
		// --complete-lifecycle does not apply.
		c.CompleteLifecycle = c.IMDSCompleteLifecycle
	}
	if c.ScheduledChangeLead < 0 || c.DeadlineMargin < 0 || c.EvictionBackoff < 100*time.Millisecond {
		errs = append(errs, errors.New("--scheduled-change-lead and --deadline-margin must be ≥ 0 and --eviction-backoff ≥ 100ms"))
	}
	if ws, err := window.Parse(c.MaintenanceWindowsSpec); err != nil {
		errs = append(errs, fmt.Errorf("--maintenance-windows: %w", err))
	} else {
		c.MaintenanceWindows = ws
	}
	if c.KubeQPS <= 0 || c.KubeBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-qps %v and --kube-burst %d must be positive", c.KubeQPS, c.KubeBurst))
	}
	errs = append(errs, c.validateWebhook()...)
	errs = append(errs, c.validateScope()...)
	errs = append(errs, c.validateNodeActions()...)
	if c.StopDaemonSetPods && !c.CompleteLifecycle {
		errs = append(errs, fmt.Errorf("--stop-daemonset-pods: DaemonSet pods are stopped only before a terminate lifecycle action lifeboat completes: in %s mode it needs %s", c.Mode, map[Mode]string{ModeQueue: "--complete-lifecycle", ModeIMDS: "--imds-complete-lifecycle"}[c.Mode]))
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		errs = append(errs, fmt.Errorf("--log-format %q: must be json or text", c.LogFormat))
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.LogLevel) {
		errs = append(errs, fmt.Errorf("--log-level %q: must be debug, info, warn or error", c.LogLevel))
	}
	return errs
}

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
