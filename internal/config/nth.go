package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
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
	// diff is the documented difference of meaning, if any (the
	// migration table shows the row as honoured with a difference).
	diff string
	// secret values are never echoed in warnings or errors.
	secret bool
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
	{env: "KUBE_API_QPS", flag: "kube-qps", value: same},
	{env: "KUBERNETES_EVENTS_EXTRA_ANNOTATIONS", flag: "events-annotations", value: same},
	{env: "KUBE_API_BURST", flag: "kube-burst", value: same},
	{env: "SQS_MSG_VISIBILITY_TIMEOUT_SEC", flag: "visibility-timeout", note: "whole seconds", value: nthSeconds(false),
		diff: "lifeboat extends a message's visibility while its work runs, so the value only bounds how soon a message whose handler died is seen again (10 s..12 h)"},
	{env: "USE_PROVIDER_ID", flag: "private-dns-lookup", note: "`false` → `true`; `true` keeps the default (`false`)",
		diff: "lifeboat always tries spec.providerID first; `false` adds the private DNS name as a fallback",
		value: func(v string) (string, bool, error) {
			b, err := nthBool(v)
			if err != nil || b {
				return "", false, err
			}
			return "true", true, nil
		}},
	{env: "WEBHOOK_URL", flag: "webhook-url", value: same, secret: true},
	{env: "WEBHOOK_PROXY", flag: "webhook-proxy", value: same, secret: true},
	{env: "WEBHOOK_HEADERS", flag: "webhook-headers", note: "NTH's JSON object → one `Name: value` a line", value: nthHeaders, secret: true},
	// NTH reads the file when both are set: the file comes first.
	{env: "WEBHOOK_TEMPLATE_FILE", flag: "webhook-template", value: same, diff: nthTemplateDiff},
	{env: "WEBHOOK_TEMPLATE", flag: "webhook-template", note: "the template text itself", value: same, diff: nthTemplateDiff},
}

// nthTemplateDiff is the difference of NTH's webhook templates.
const nthTemplateDiff = "the template renders a lifeboat notification, which also answers NTH's fields `.EventID`, `.NodeName`, `.Description`, `.StartTime`, `.State` and `.Monitor` " +
	"(NTH's instance metadata fields such as `.InstanceType` are refused at start); lifeboat posts when an interruption is received and when it is finished or failed, NTH once after the drain"

// nthHeaders converts NTH's JSON object of headers to lifeboat's lines.
func nthHeaders(v string) (string, bool, error) {
	var h map[string]string
	if err := json.Unmarshal([]byte(v), &h); err != nil {
		return "", false, errors.New("not a JSON object of header names to values (value not shown: it may hold a secret)")
	}
	names := slices.Sorted(maps.Keys(h))
	lines := make([]string, 0, len(names))
	for _, n := range names {
		lines = append(lines, n+": "+h[n])
	}
	return strings.Join(lines, "\n"), true, nil
}

// nthIgnored are NTH variables whose equivalent is not built yet: setting
// one stops lifeboat at start with why (the name is historical: they were
// once accepted and ignored). A row leaves this list for nthAliases when its
// flag exists. The other decisions are in nthtable.go.
var nthIgnored = []struct{ env, why string }{
	// None today: every NTH variable is honoured or refused (nthRefusedEnv).
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
			errs = append(errs, fmt.Errorf("%s (an aws-node-termination-handler variable) is not supported yet: %s; remove it", ig.env, ig.why))
		}
	}
	w, e := applyNTHTable(getenv, setFlag, set, setBy, m)
	return append(warnings, w...), append(errs, e...)
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
	shown, shownFlag := strconv.Quote(v), fv
	if a.secret {
		shown, shownFlag = "[redacted]", "[redacted]"
	}
	if err != nil {
		return warnings, append(errs, fmt.Errorf("%s=%s (alias of --%s): %w", a.env, shown, a.flag, err))
	}
	if !ok {
		warnings = append(warnings, fmt.Sprintf("%s=%s (a deprecated aws-node-termination-handler variable) keeps lifeboat's default for --%s; remove it", a.env, v, a.flag))
		return warnings, errs
	}
	if err := setFlag(a.flag, fv); err != nil {
		return warnings, append(errs, fmt.Errorf("%s=%s (alias of --%s): %w", a.env, shown, a.flag, err))
	}
	set[a.flag] = true
	setBy[a.flag] = a.env
	warnings = append(warnings, fmt.Sprintf("%s is a deprecated aws-node-termination-handler variable: read as --%s=%s; use %s instead", a.env, a.flag, shownFlag, EnvName(a.flag)))
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
