package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// taintEffects are the effects --taint-effect accepts (Kubernetes' own).
var taintEffects = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}

// validateNodeActions checks the node action options.
func (c *Config) validateNodeActions() []error {
	var errs []error
	if !slices.Contains(taintEffects, c.TaintEffect) {
		errs = append(errs, fmt.Errorf("--taint-effect %q: must be %s", c.TaintEffect, strings.Join(taintEffects, ", ")))
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"pod-grace-period", c.PodGracePeriod}, {"node-grace-period", c.NodeGracePeriod}, {"heartbeat-until", c.HeartbeatUntil}, {"complete-lifecycle-action-delay", c.CompleteLifecycleDelay}, {"rebalance-cordon-expiry", c.RebalanceCordonExpiry}} {
		// -1 is NTH's "the pod's own" / "none": accepted as 0.
		if d.v < 0 && d.v != -time.Second {
			errs = append(errs, fmt.Errorf("--%s %s: must be ≥ 0 (0: off)", d.flag, d.v))
		}
	}
	if c.PodGracePeriod > 0 && c.PodGracePeriod < time.Second {
		errs = append(errs, fmt.Errorf("--pod-grace-period %s: must be 0 (the pod's own) or at least 1s", c.PodGracePeriod))
	}
	return errs
}

// nthSeconds converts NTH's whole seconds to a duration flag value; a
// negative number (NTH's -1, "not set") keeps lifeboat's default, and so
// does 0 when zeroIsDefault.
func nthSeconds(zeroIsDefault bool) func(v string) (string, bool, error) {
	return func(v string) (string, bool, error) {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return "", false, fmt.Errorf("%q is not a whole number of seconds", v)
		}
		if n < 0 || (n == 0 && zeroIsDefault) {
			return "", false, nil
		}
		return (time.Duration(n) * time.Second).String(), true, nil
	}
}

// nthPodGrace converts NTH's POD_TERMINATION_GRACE_PERIOD: -1 is the pod's
// own; 0 becomes 1s, because lifeboat never asks for 0 (the API server
// would remove the pod object while its containers still run).
func nthPodGrace(v string) (string, bool, error) {
	fv, ok, err := nthSeconds(false)(v)
	if ok && fv == "0s" {
		fv = "1s"
	}
	return fv, ok, err
}

// nthBoolFlag passes an NTH boolean through as the flag's value.
func nthBoolFlag(v string) (string, bool, error) {
	b, err := nthBool(v)
	if err != nil {
		return "", false, err
	}
	return strconv.FormatBool(b), true, nil
}

// nthManagedTag is NTH's default MANAGED_TAG.
const nthManagedTag = "aws-node-termination-handler/managed"

// applyNTHManagedTag reads NTH's CHECK_TAG_BEFORE_DRAINING and MANAGED_TAG
// together (neither means anything alone): the check is on unless
// CHECK_TAG_BEFORE_DRAINING=false, and the tag is MANAGED_TAG or NTH's
// default. It sets --managed-tag like an alias.
func applyNTHManagedTag(getenv func(string) string, setFlag func(name, value string) error, set map[string]bool, setBy map[string]string, mode Mode, warnings []string, errs []error) ([]string, []error) {
	check, tag := getenv("CHECK_TAG_BEFORE_DRAINING"), strings.TrimSpace(getenv("MANAGED_TAG"))
	if check == "" && tag == "" {
		return warnings, errs
	}
	if check != "" {
		on, err := nthBool(check)
		if err != nil {
			return warnings, append(errs, fmt.Errorf("CHECK_TAG_BEFORE_DRAINING=%q (with MANAGED_TAG, alias of --managed-tag): %w", check, err))
		}
		if !on {
			warnings = append(warnings, "CHECK_TAG_BEFORE_DRAINING=false (a deprecated aws-node-termination-handler variable) keeps lifeboat's default for --managed-tag (every node of this cluster); remove it")
			if tag != "" {
				warnings = append(warnings, "MANAGED_TAG (an aws-node-termination-handler variable) has no effect: CHECK_TAG_BEFORE_DRAINING=false")
			}
			return warnings, errs
		}
	}
	env, v := "CHECK_TAG_BEFORE_DRAINING", nthManagedTag
	if tag != "" {
		env, v = "MANAGED_TAG", tag
	}
	a := nthAlias{env: env, flag: "managed-tag", value: same}
	return applyOne(a, v, setFlag, set, setBy, &mode, warnings, errs)
}

// applyNTHTaintEffect reads NTH's TAINT_EFFECT, which NTH applies only
// with TAINT_NODE=true (its default is false: no taint at all). lifeboat
// always taints; it takes the effect only when NTH would have used it, so
// that a NoExecute left in a manifest that never tainted does not start
// deleting pods past their PodDisruptionBudgets.
func applyNTHTaintEffect(getenv func(string) string, setFlag func(name, value string) error, set map[string]bool, setBy map[string]string, mode Mode, warnings []string, errs []error) ([]string, []error) {
	effect := strings.TrimSpace(getenv("TAINT_EFFECT"))
	if effect == "" {
		return warnings, errs
	}
	on := false
	if v := getenv("TAINT_NODE"); v != "" {
		b, err := nthBool(v)
		if err != nil {
			return warnings, append(errs, fmt.Errorf("TAINT_NODE=%q (with TAINT_EFFECT, alias of --taint-effect): %w", v, err))
		}
		on = b
	}
	if !on {
		return append(warnings, "TAINT_EFFECT (an aws-node-termination-handler variable) has no effect without TAINT_NODE=true, as in NTH: lifeboat's taints keep --taint-effect's default, NoSchedule"), errs
	}
	return applyOne(nthAlias{env: "TAINT_EFFECT", flag: "taint-effect", value: same}, effect, setFlag, set, setBy, &mode, warnings, errs)
}

// nthCombinedRows are the decision table's rows of the NTH variables that
// applyNTHManagedTag and applyNTHTaintEffect read together.
var nthCombinedRows = []nthRow{
	{env: "CHECK_TAG_BEFORE_DRAINING", decision: nthDiffers, lifeboat: "`--managed-tag`",
		note: "read with `MANAGED_TAG` (or NTH's default `" + nthManagedTag + "`) unless `false`; NTH checks the tag by default, lifeboat only when either is set"},
	{env: "MANAGED_TAG", decision: nthDiffers, lifeboat: "`--managed-tag`",
		note: "the tag key; read with `CHECK_TAG_BEFORE_DRAINING` (unless that is `false`)"},
	{env: "TAINT_EFFECT", decision: nthDiffers, lifeboat: "`--taint-effect`",
		note: "only with `TAINT_NODE=true`, as NTH applies it (without it NTH set no taint, and lifeboat keeps `NoSchedule`)"},
}
