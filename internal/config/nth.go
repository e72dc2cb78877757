package config

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"lifeboat.dev/lifeboat/internal/event"
)

// nthAlias is an environment variable of aws-node-termination-handler
// (NTH) that lifeboat reads as a deprecated alias of one of its flags,
// because it means the same thing. Variables whose meaning differs are not
// aliased (see nthIgnored).
type nthAlias struct {
	env  string // NTH's variable
	flag string // lifeboat's flag it sets
	// value converts NTH's value to the flag's; ok false means the value
	// asks for lifeboat's default (nothing is set).
	value func(v string) (flagValue string, ok bool, err error)
	note  string // how the value maps, for the docs
}

// same passes the value through unchanged.
func same(v string) (string, bool, error) { return v, true, nil }

// nthBool parses a boolean as NTH does (strconv.ParseBool).
func nthBool(v string) (bool, error) {
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return false, fmt.Errorf("%q is not a boolean", v)
	}
	return b, nil
}

// nthAliases is ordered: when two aliases set the same flag, the first one
// present wins and the later one is reported as ignored.
var nthAliases = []nthAlias{
	{env: "ENABLE_SQS_TERMINATION_DRAINING", flag: "mode", note: "`true` → `queue`, `false` → `imds`",
		value: func(v string) (string, bool, error) {
			b, err := nthBool(v)
			if err != nil {
				return "", false, err
			}
			if b {
				return string(ModeQueue), true, nil
			}
			return string(ModeIMDS), true, nil
		}},
	{env: "DRY_RUN", flag: "dry-run", value: same},
	{env: "NODE_NAME", flag: "node-name", value: same},
	{env: "POD_NAME", flag: "pod-name", value: same},
	{env: "NAMESPACE", flag: "pod-namespace", value: same},
	{env: "QUEUE_URL", flag: "queue-url", value: same},
	{env: "AWS_ENDPOINT", flag: "aws-endpoint", note: "one URL for every AWS service", value: same},
	{env: "WORKERS", flag: "workers", value: same},
	{env: "DELETE_SQS_MSG_IF_NODE_NOT_FOUND", flag: "unknown-instance", note: "`true` → `delete`, `false` → `leave`",
		value: func(v string) (string, bool, error) {
			b, err := nthBool(v)
			if err != nil {
				return "", false, err
			}
			if b {
				return string(UnknownDelete), true, nil
			}
			return string(UnknownLeave), true, nil
		}},
	{env: "CORDON_ONLY", flag: "drain-on", note: "`true` → empty (no event kind drains; nodes are only cordoned and tainted)",
		value: func(v string) (string, bool, error) {
			b, err := nthBool(v)
			if err != nil || !b {
				return "", false, err
			}
			return "", true, nil
		}},
	{env: "ENABLE_REBALANCE_DRAINING", flag: "drain-on", note: "`true` → the default kinds plus `rebalance-recommendation`",
		value: func(v string) (string, bool, error) {
			b, err := nthBool(v)
			if err != nil || !b {
				return "", false, err
			}
			o, ok := optionNamed("drain-on")
			if !ok {
				return "", false, errors.New("no option --drain-on") // TestNTHTables
			}
			return o.def + "," + string(event.RebalanceRecommendation), true, nil
		}},
	{env: "HEARTBEAT_INTERVAL", flag: "heartbeat-interval", note: "whole seconds (`30`) or a duration (`30s`); `-1` → automatic",
		value: func(v string) (string, bool, error) {
			v = strings.TrimSpace(v)
			if n, err := strconv.Atoi(v); err == nil {
				if n < 0 {
					return "", false, nil // NTH's -1: not set
				}
				return (time.Duration(n) * time.Second).String(), true, nil
			}
			if _, err := time.ParseDuration(v); err != nil {
				return "", false, fmt.Errorf("%q is neither whole seconds nor a duration", v)
			}
			return v, true, nil
		}},
	{env: "POD_TERMINATION_GRACE_PERIOD", flag: "pod-grace-period", note: "seconds; `-1` → the pod's own (default), `0` → `1s`", value: nthPodGrace},
	{env: "GRACE_PERIOD", flag: "pod-grace-period", note: "NTH's older name of POD_TERMINATION_GRACE_PERIOD", value: nthPodGrace},
	{env: "NODE_TERMINATION_GRACE_PERIOD", flag: "node-grace-period", note: "seconds; `0` or `-1` → no cap but AWS's deadline; NTH's default 120 applies only when set", value: nthSeconds(true)},
	{env: "EXCLUDE_FROM_LOAD_BALANCERS", flag: "exclude-from-load-balancers", value: nthBoolFlag},
	{env: "ENABLE_OUT_OF_SERVICE_TAINT", flag: "out-of-service-taint", value: nthBoolFlag},
	{env: "HEARTBEAT_UNTIL", flag: "heartbeat-until", note: "seconds; `-1` → until the drain ends or the hook's global timeout", value: nthSeconds(true)},
	{env: "COMPLETE_LIFECYCLE_ACTION_DELAY_SECONDS", flag: "complete-lifecycle-action-delay", note: "seconds; `-1` → none", value: nthSeconds(true)},
	{env: "INSTANCE_METADATA_URL", flag: "imds-endpoint", value: same},
	{env: "JSON_LOGGING", flag: "log-format", note: "`true` → `json`, `false` → `text`",
		value: func(v string) (string, bool, error) {
			b, err := nthBool(v)
			if err != nil {
				return "", false, err
			}
			if b {
				return "json", true, nil
			}
			return "text", true, nil
		}},
	{env: "LOG_LEVEL", flag: "log-level", note: "lower-cased",
		value: func(v string) (string, bool, error) { return strings.ToLower(strings.TrimSpace(v)), true, nil }},
}

// nthIgnored are NTH variables with no lifeboat equivalent of the same
// meaning. Setting one is not an error (a migrated manifest may keep it),
// but lifeboat says that it has no effect and why.
var nthIgnored = []struct{ env, why string }{
	{"CHECK_ASG_TAG_BEFORE_DRAINING", "lifeboat acts on every instance that is a node of this cluster; use --cluster-name / --managed-asg for launch actions"},
	{"MANAGED_ASG_TAG", "see CHECK_ASG_TAG_BEFORE_DRAINING"},
	{"USE_PROVIDER_ID", "lifeboat always matches spec.providerID; --private-dns-lookup adds the private DNS name fallback"},
	{"ENABLE_SPOT_INTERRUPTION_DRAINING", "lifeboat always cordons on a Spot interruption; choose what drains with --drain-on"},
	{"ENABLE_SCHEDULED_EVENT_DRAINING", "lifeboat always handles scheduled changes; choose what drains with --drain-on"},
	{"ENABLE_REBALANCE_MONITORING", "lifeboat always cordons on a rebalance recommendation"},
	{"ENABLE_ASG_LIFECYCLE_DRAINING", "lifeboat always handles lifecycle actions; choose what drains with --drain-on"},
	{"TAINT_NODE", "lifeboat always taints the nodes it cordons (lifeboat.io/<kind>)"},
	{"IGNORE_DAEMON_SETS", "lifeboat never evicts DaemonSet pods"},
	{"DELETE_LOCAL_DATA", "lifeboat evicts pods with emptyDir volumes (their data goes with the instance anyway)"},
	{"METADATA_TRIES", "lifeboat polls instance metadata continuously (--imds-poll-interval)"},
	{"ENABLE_PROMETHEUS_SERVER", "lifeboat always serves /metrics on --listen"},
	{"PROMETHEUS_SERVER_PORT", "lifeboat serves /metrics, /healthz and /readyz on one address: --listen"},
	{"ENABLE_PROBES_SERVER", "lifeboat always serves /healthz and /readyz on --listen"},
	{"PROBES_SERVER_PORT", "lifeboat serves /metrics, /healthz and /readyz on one address: --listen"},
	{"PROBES_SERVER_ENDPOINT", "lifeboat's probes are /healthz and /readyz"},
	{"WEBHOOK_URL", "lifeboat's webhooks are configured differently"},
	{"WEBHOOK_HEADERS", "lifeboat's webhooks are configured differently"},
	{"WEBHOOK_TEMPLATE", "lifeboat's webhooks are configured differently"},
	{"WEBHOOK_PROXY", "lifeboat's webhooks are configured differently"},
	{"EMIT_KUBERNETES_EVENTS", "lifeboat always records Kubernetes Events on the node"},
	{"KUBERNETES_EVENTS_EXTRA_ANNOTATIONS", "lifeboat's Events carry no extra annotations"},
	{"LOG_FORMAT_VERSION", "lifeboat's log format is --log-format json or text"},
	{"USE_APISERVER_CACHE", "lifeboat always uses an informer cache for nodes"},
}

// applyNTH reads the NTH variables after lifeboat's own flags and LIFEBOAT_*
// variables, which win. It sets the flags in fs and set, and returns the
// warnings (every NTH variable present is deprecated or ignored) and the
// errors (unreadable values).
func applyNTH(getenv func(string) string, setFlag func(name, value string) error, set map[string]bool, setBy map[string]string, mode func() Mode) (warnings []string, errs []error) {
	// ENABLE_SQS_TERMINATION_DRAINING decides the mode, which decides
	// whether the other aliases apply: handle it first.
	for _, a := range nthAliases {
		v := getenv(a.env)
		if v == "" {
			continue
		}
		if a.flag != "mode" {
			continue
		}
		warnings, errs = applyOne(a, v, setFlag, set, setBy, nil, warnings, errs)
	}
	m := mode()
	for _, a := range nthAliases {
		v := getenv(a.env)
		if v == "" || a.flag == "mode" {
			continue
		}
		warnings, errs = applyOne(a, v, setFlag, set, setBy, &m, warnings, errs)
	}
	warnings, errs = applyNTHManagedTag(getenv, setFlag, set, setBy, m, warnings, errs)
	warnings, errs = applyNTHTaintEffect(getenv, setFlag, set, setBy, m, warnings, errs)
	for _, ig := range nthIgnored {
		if getenv(ig.env) != "" {
			warnings = append(warnings, fmt.Sprintf("%s (an aws-node-termination-handler variable) has no effect: %s", ig.env, ig.why))
		}
	}
	return warnings, errs
}

func applyOne(a nthAlias, v string, setFlag func(name, value string) error, set map[string]bool, setBy map[string]string, mode *Mode, warnings []string, errs []error) ([]string, []error) {
	if set[a.flag] {
		by := setBy[a.flag]
		warnings = append(warnings, fmt.Sprintf("%s (a deprecated aws-node-termination-handler variable) is ignored: --%s is already set by %s", a.env, a.flag, by))
		return warnings, errs
	}
	o, ok := optionNamed(a.flag)
	if !ok {
		return warnings, append(errs, fmt.Errorf("%s: alias of --%s, which does not exist", a.env, a.flag)) // TestNTHTables
	}
	if mode != nil {
		if len(o.modes) > 0 && !slices.Contains(o.modes, *mode) {
			warnings = append(warnings, fmt.Sprintf("%s (a deprecated aws-node-termination-handler variable) is ignored: --%s does not apply in %s mode", a.env, a.flag, *mode))
			return warnings, errs
		}
	}
	fv, ok, err := a.value(v)
	if err != nil {
		return warnings, append(errs, fmt.Errorf("%s=%q (alias of --%s): %w", a.env, v, a.flag, err))
	}
	if !ok {
		warnings = append(warnings, fmt.Sprintf("%s=%s (a deprecated aws-node-termination-handler variable) keeps lifeboat's default for --%s; remove it", a.env, v, a.flag))
		return warnings, errs
	}
	if err := setFlag(a.flag, fv); err != nil {
		return warnings, append(errs, fmt.Errorf("%s=%q (alias of --%s): %w", a.env, v, a.flag, err))
	}
	set[a.flag] = true
	setBy[a.flag] = a.env
	warnings = append(warnings, fmt.Sprintf("%s is a deprecated aws-node-termination-handler variable: read as --%s=%s; use %s instead", a.env, a.flag, fv, EnvName(a.flag)))
	return warnings, errs
}

// optionNamed returns the option called name; ok is false when there is
// none (a defect of the alias table, which TestNTHTables catches).
func optionNamed(name string) (option, bool) {
	for _, o := range options {
		if o.name == name {
			return o, true
		}
	}
	return option{}, false
}
