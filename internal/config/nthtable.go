package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"lifeboat.dev/lifeboat/internal/event"
)

// nthDecision is what lifeboat does with one aws-node-termination-handler
// (NTH) setting. Nothing is accepted and ignored: a setting is honoured
// (possibly with a documented difference) or refused at start.
type nthDecision string

const (
	nthSame    nthDecision = "honoured"
	nthDiffers nthDecision = "honoured, with a difference"
	nthRefused nthDecision = "refused"
	// nthPending is refused until lifeboat's equivalent is built.
	nthPending nthDecision = "refused (not built yet)"
)

// nthRow is one NTH environment variable's decision, for the migration
// table and TestNTHDecisions.
type nthRow struct {
	env      string
	decision nthDecision
	lifeboat string // the flag it maps to, or what lifeboat does instead
	note     string
}

// nthDrain are NTH's switches of what drains. They combine into one value
// of --drain-on (the first-wins rule of nthAliases would drop all but one).
// kind is the kind the switch governs; empty for CORDON_ONLY.
var nthDrain = []struct {
	env  string
	kind event.Kind
	note string
	diff string
	// imdsOnly switches are read in IMDS mode only, as NTH reads them: NTH's
	// own queue-mode manifest sets ENABLE_SPOT_INTERRUPTION_DRAINING=false
	// and still drains on every Spot notice from the queue.
	imdsOnly bool
}{
	{env: "CORDON_ONLY", note: "`true` → empty: no kind drains, nodes are only cordoned and tainted"},
	{env: "ENABLE_SPOT_INTERRUPTION_DRAINING", kind: event.SpotInterruption, note: "`false` removes `spot-interruption`", diff: nthDrainDiff, imdsOnly: true},
	{env: "ENABLE_SCHEDULED_EVENT_DRAINING", kind: event.ScheduledChange, note: "`false` removes `scheduled-change`", diff: nthDrainDiff, imdsOnly: true},
	{env: "ENABLE_ASG_LIFECYCLE_DRAINING", kind: event.LifecycleTerminate, note: "`false` removes `lifecycle-terminate`", diff: nthDrainDiff, imdsOnly: true},
	{env: "ENABLE_REBALANCE_DRAINING", kind: event.RebalanceRecommendation, note: "`true` adds `rebalance-recommendation`"},
	{env: "ENABLE_REBALANCE_MONITORING", kind: event.RebalanceRecommendation, note: "`rebalance-recommendation` drains only with `ENABLE_REBALANCE_DRAINING=true`",
		diff: "lifeboat always cordons and taints a node on a rebalance recommendation; NTH with `false` (and no rebalance draining) does not look at them", imdsOnly: true},
}

const nthDrainDiff = "the node is not drained for that kind, but lifeboat still cordons and taints it (NTH does not act on it at all)"

// nthIMDSOnly is the note of the switches read in IMDS mode only.
const nthIMDSOnly = "IMDS mode only, as in NTH (in queue mode it is ignored with a warning: NTH's queue-mode manifest sets it to `false` and NTH still drains; choose with `--drain-on`)"

// nthListen are NTH's two servers, which lifeboat serves on one address.
var nthListen = []struct{ enable, port, def string }{
	{"ENABLE_PROMETHEUS_SERVER", "PROMETHEUS_SERVER_PORT", "9092"},
	{"ENABLE_PROBES_SERVER", "PROBES_SERVER_PORT", "8080"},
}

const nthListenDiff = "lifeboat always serves `/metrics`, `/healthz` and `/readyz`, on one address: an enabled server's port becomes `--listen`; two enabled servers on different ports are refused"

// nthFixed are NTH settings for what lifeboat always does: a value that
// asks for the same is honoured, another is refused (accept says why).
var nthFixed = []struct {
	env      string
	lifeboat string
	accept   func(v string) error // nil: only the value only
	only     string               // the one value honoured; why the others are refused
	why      string
	diff     string
}{
	{env: "IGNORE_DAEMON_SETS", lifeboat: "always", only: "true", why: "lifeboat's drain never evicts DaemonSet pods (their controller recreates them on the cordoned node at once); NTH never stops them at all, lifeboat stops those that opt in after the drain, before a terminate action's CONTINUE (lifeboat.io/stop-before-termination, --stop-daemonset-pods); remove it"},
	{env: "DELETE_LOCAL_DATA", lifeboat: "always", only: "true", why: "lifeboat evicts pods with emptyDir volumes (their data goes with the instance anyway); remove it and protect such pods with a PodDisruptionBudget"},
	{env: "KUBERNETES_SERVICE_HOST", lifeboat: "the Kubernetes client", accept: nthAny},
	{env: "KUBERNETES_SERVICE_PORT", lifeboat: "the Kubernetes client", accept: nthAny},
	{env: "AWS_REGION", lifeboat: "the AWS SDK", accept: nthAny, diff: "read by the AWS SDK as in NTH; `--region` wins over it"},
	{env: "PROBES_SERVER_ENDPOINT", lifeboat: "`/healthz`", only: "/healthz", why: "lifeboat's liveness probe is /healthz and its readiness probe /readyz; point the probes there and remove it"},
	{env: "METADATA_TRIES", lifeboat: "`--imds-poll-interval`", accept: nthPositive, diff: "lifeboat reads instance metadata again every `--imds-poll-interval` for as long as it runs, instead of a number of tries"},
	{env: "TAINT_NODE", lifeboat: "always", accept: nthBoolOnly, diff: "lifeboat always taints the nodes it cordons (`lifeboat.io/<kind>:NoSchedule`); on a cordoned node the taint changes no scheduling"},
	{env: "EMIT_KUBERNETES_EVENTS", lifeboat: "always", accept: nthBoolOnly, diff: "lifeboat always records Kubernetes Events on the node"},
	{env: "USE_APISERVER_CACHE", lifeboat: "always", accept: nthBoolOnly, diff: "lifeboat always reads nodes from an informer cache"},
	{env: "LOG_FORMAT_VERSION", lifeboat: "`--log-format`", accept: nthOnly12, diff: "lifeboat has one log format per `--log-format` (`JSON_LOGGING`); NTH's versions 1 and 2 name its own fields"},
	{env: "UPTIME_FROM_FILE", lifeboat: "the node's boot ID", accept: nthAny, diff: "lifeboat tells that a rebooting maintenance is over by the node's boot ID, which needs no uptime file"},
}

// nthRefusedEnv are NTH settings lifeboat refuses at start, with what to
// use instead.
var nthRefusedEnv = []struct{ env, why string }{
	{"CHECK_ASG_TAG_BEFORE_DRAINING", "NTH's older name of CHECK_TAG_BEFORE_DRAINING: rename it (read with MANAGED_TAG as --managed-tag)"},
	{"MANAGED_ASG_TAG", "NTH's older name of MANAGED_TAG: rename it (read as --managed-tag)"},
}

func nthAny(string) error { return nil }

func nthOnly(want, why string) func(string) error {
	return func(v string) error {
		if strings.EqualFold(strings.TrimSpace(v), want) {
			return nil
		}
		return fmt.Errorf("only %s is supported: %s", want, why)
	}
}

func nthBoolOnly(v string) error { _, err := nthBool(v); return err }

func nthPositive(v string) error {
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err != nil || n < 1 {
		return fmt.Errorf("%q is not a positive whole number", v)
	}
	return nil
}

func nthOnly12(v string) error {
	if s := strings.TrimSpace(v); s != "1" && s != "2" {
		return fmt.Errorf("%q is not 1 or 2", v)
	}
	return nil
}

// applyNTHTable applies the rows of this file (nthAliases and nthIgnored
// are applied by applyNTH).
func applyNTHTable(getenv func(string) string, setFlag func(name, value string) error, set map[string]bool, setBy map[string]string, mode Mode) (warnings []string, errs []error) {
	w, e := applyNTHDrain(getenv, setFlag, set, setBy, mode)
	warnings, errs = append(warnings, w...), append(errs, e...)
	w, e = applyNTHListen(getenv, setFlag, set, setBy)
	warnings, errs = append(warnings, w...), append(errs, e...)
	for _, f := range nthFixed {
		v := getenv(f.env)
		if v == "" {
			continue
		}
		accept := f.accept
		if accept == nil {
			accept = nthOnly(f.only, f.why)
		}
		if err := accept(v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q (an aws-node-termination-handler variable): %w", f.env, v, err))
			continue
		}
		if f.diff != "" {
			warnings = append(warnings, fmt.Sprintf("%s (an aws-node-termination-handler variable) is read with a difference: %s", f.env, f.diff))
		}
	}
	for _, r := range nthRefusedEnv {
		if getenv(r.env) != "" {
			errs = append(errs, fmt.Errorf("%s (an aws-node-termination-handler variable) is not supported: %s", r.env, r.why))
		}
	}
	return warnings, errs
}

// applyNTHDrain turns NTH's drain switches into one --drain-on.
func applyNTHDrain(getenv func(string) string, setFlag func(name, value string) error, set map[string]bool, setBy map[string]string, mode Mode) (warnings []string, errs []error) {
	o, ok := optionNamed("drain-on")
	if !ok {
		return nil, []error{fmt.Errorf("no option --drain-on")} // TestNTHDecisions
	}
	kinds := strings.Split(o.def, ",")
	var used []string
	cordonOnly := false
	drainRebalance := false
	for _, d := range nthDrain {
		v := getenv(d.env)
		if v == "" {
			continue
		}
		b, err := nthBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q (alias of --drain-on): %w", d.env, v, err))
			continue
		}
		if d.imdsOnly && mode != ModeIMDS {
			warnings = append(warnings, fmt.Sprintf("%s (an aws-node-termination-handler variable) is ignored in %s mode, as NTH ignores it there: choose what drains with --drain-on", d.env, mode))
			continue
		}
		used = append(used, d.env)
		switch {
		case d.env == "CORDON_ONLY":
			cordonOnly = b
		case d.env == "ENABLE_REBALANCE_DRAINING":
			drainRebalance = b
		case d.env == "ENABLE_REBALANCE_MONITORING":
			// Rebalance drains only with ENABLE_REBALANCE_DRAINING, either way.
		case !b:
			kinds = slices.DeleteFunc(kinds, func(k string) bool { return k == string(d.kind) })
		}
	}
	if len(used) == 0 || len(errs) > 0 {
		return warnings, errs
	}
	if set["drain-on"] {
		for _, env := range used {
			warnings = append(warnings, fmt.Sprintf("%s (a deprecated aws-node-termination-handler variable) is ignored: --drain-on is already set by %s", env, setBy["drain-on"]))
		}
		return warnings, nil
	}
	if drainRebalance {
		kinds = append(kinds, string(event.RebalanceRecommendation))
	}
	if cordonOnly {
		kinds = nil
	}
	value := strings.Join(kinds, ",")
	if err := setFlag("drain-on", value); err != nil {
		return nil, []error{fmt.Errorf("%s (alias of --drain-on): %w", strings.Join(used, ", "), err)}
	}
	set["drain-on"] = true
	setBy["drain-on"] = strings.Join(used, ", ")
	for _, env := range used {
		warnings = append(warnings, fmt.Sprintf("%s is a deprecated aws-node-termination-handler variable: read into --drain-on=%s; use %s instead", env, value, EnvName("drain-on")))
	}
	return warnings, nil
}

// applyNTHListen turns NTH's metrics and probes servers into --listen.
func applyNTHListen(getenv func(string) string, setFlag func(name, value string) error, set map[string]bool, setBy map[string]string) (warnings []string, errs []error) {
	var used []string
	ports := map[string]string{} // enable variable -> port
	for _, s := range nthListen {
		for _, env := range []string{s.enable, s.port} {
			if getenv(env) != "" {
				used = append(used, env)
			}
		}
		port := s.def
		if v := getenv(s.port); v != "" {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err != nil || n < 1 || n > 65535 {
				errs = append(errs, fmt.Errorf("%s=%q (an aws-node-termination-handler variable): not a port", s.port, v))
				continue
			}
			port = strings.TrimSpace(v)
		}
		v := getenv(s.enable)
		if v == "" {
			continue
		}
		b, err := nthBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q (an aws-node-termination-handler variable): %w", s.enable, v, err))
			continue
		}
		if b {
			ports[s.enable] = port
		}
	}
	if len(used) == 0 || len(errs) > 0 {
		return nil, errs
	}
	distinct := slices.Compact(slices.Sorted(func(yield func(string) bool) {
		for _, p := range ports {
			if !yield(p) {
				return
			}
		}
	}))
	switch {
	case len(distinct) > 1:
		return nil, []error{fmt.Errorf("ENABLE_PROMETHEUS_SERVER (port %s) and ENABLE_PROBES_SERVER (port %s) are aws-node-termination-handler variables: lifeboat serves /metrics, /healthz and /readyz on one address; give both the same port, or remove them and set %s",
			ports["ENABLE_PROMETHEUS_SERVER"], ports["ENABLE_PROBES_SERVER"], EnvName("listen"))}
	case len(distinct) == 0:
		for _, env := range used {
			warnings = append(warnings, fmt.Sprintf("%s (an aws-node-termination-handler variable) is read with a difference: %s", env, nthListenDiff))
		}
		return warnings, nil
	case set["listen"]:
		for _, env := range used {
			warnings = append(warnings, fmt.Sprintf("%s (a deprecated aws-node-termination-handler variable) is ignored: --listen is already set by %s", env, setBy["listen"]))
		}
		return warnings, nil
	}
	value := ":" + distinct[0]
	if err := setFlag("listen", value); err != nil {
		return nil, []error{err}
	}
	set["listen"] = true
	setBy["listen"] = strings.Join(used, ", ")
	for _, env := range used {
		warnings = append(warnings, fmt.Sprintf("%s is a deprecated aws-node-termination-handler variable: read into --listen=%s (%s); use %s instead", env, value, nthListenDiff, EnvName("listen")))
	}
	return warnings, nil
}

// nthRows is every NTH variable lifeboat knows, with its decision.
func nthRows() []nthRow {
	var rows []nthRow
	for _, a := range nthAliases {
		r := nthRow{env: a.env, decision: nthSame, lifeboat: "`--" + a.flag + "`", note: a.note}
		if a.diff != "" {
			r.decision = nthDiffers
			r.note = strings.TrimPrefix(r.note+"; "+a.diff, "; ")
		}
		rows = append(rows, r)
	}
	for _, d := range nthDrain {
		r := nthRow{env: d.env, decision: nthSame, lifeboat: "`--drain-on`", note: d.note}
		if d.diff != "" {
			r.decision, r.note = nthDiffers, d.note+"; "+d.diff
		}
		if d.imdsOnly {
			r.note += "; " + nthIMDSOnly
		}
		rows = append(rows, r)
	}
	for _, s := range nthListen {
		rows = append(rows, nthRow{env: s.enable, decision: nthDiffers, lifeboat: "`--listen`", note: nthListenDiff},
			nthRow{env: s.port, decision: nthDiffers, lifeboat: "`--listen`", note: nthListenDiff})
	}
	for _, f := range nthFixed {
		r := nthRow{env: f.env, decision: nthSame, lifeboat: f.lifeboat}
		if f.diff != "" {
			r.decision, r.note = nthDiffers, f.diff
		}
		if f.only != "" {
			r.note = strings.TrimPrefix(r.note+"; `"+f.only+"` only; another value is refused: "+f.why, "; ")
		}
		rows = append(rows, r)
	}
	rows = append(rows, nthCombinedRows...)
	for _, r := range nthRefusedEnv {
		rows = append(rows, nthRow{env: r.env, decision: nthRefused, lifeboat: "—", note: r.why})
	}
	for _, ig := range nthIgnored {
		rows = append(rows, nthRow{env: ig.env, decision: nthPending, lifeboat: "—", note: ig.why})
	}
	return rows
}
