package check

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"lifeboat.dev/lifeboat/internal/check/pattern"
	"lifeboat.dev/lifeboat/internal/event"
)

// rule is an EventBridge rule on the default bus with its targets.
type rule struct {
	name, state, text string
	p                 *pattern.Pattern
	perr              error
	targets           []ebtypes.Target
	targetsErr        error
}

func (ru rule) enabled() bool { return strings.HasPrefix(ru.state, string(ebtypes.RuleStateEnabled)) }

// target returns the rule's target that is arn.
func (ru rule) target(arn string) (ebtypes.Target, bool) {
	for _, t := range ru.targets {
		if aws.ToString(t.Arn) == arn {
			return t, true
		}
	}
	return ebtypes.Target{}, false
}

// delivers reports whether the rule sends whole events to the queue.
func (ru rule) delivers(queueARN string) bool {
	t, ok := ru.target(queueARN)
	return ok && ru.enabled() && !transforms(t)
}

// transforms reports whether a target changes the event before delivery
// (lifeboat needs the whole event).
func transforms(t ebtypes.Target) bool {
	return t.Input != nil || t.InputPath != nil || t.InputTransformer != nil
}

func (ru rule) matches(s sample) bool {
	if ru.p == nil {
		return false
	}
	ok, err := ru.p.Match(s.bytes())
	return err == nil && ok
}

func (ru rule) otherTargets(queueARN string) []string {
	var out []string
	for _, t := range ru.targets {
		if a := aws.ToString(t.Arn); a != queueARN {
			out = append(out, a)
		}
	}
	return out
}

// loadRules lists the default bus's rules and their targets.
func (r *run) loadRules(ctx context.Context) {
	r.perms.need("events:ListRules", false, "")
	r.perms.need("events:ListTargetsByRule", false, "")
	var next *string
	for {
		out, err := r.c.Events.ListRules(ctx, &eventbridge.ListRulesInput{NextToken: next})
		r.perms.record("events:ListRules", err)
		if err != nil {
			r.rulesErr = fmt.Errorf("listing EventBridge rules: %s", apiMessage(err))
			return
		}
		for _, x := range out.Rules {
			if aws.ToString(x.EventPattern) == "" {
				continue // a scheduled rule
			}
			ru := rule{name: aws.ToString(x.Name), state: string(x.State), text: aws.ToString(x.EventPattern)}
			ru.p, ru.perr = pattern.Parse([]byte(ru.text))
			r.rules = append(r.rules, ru)
		}
		if next = out.NextToken; next == nil {
			break
		}
	}
	for i := range r.rules {
		ru := &r.rules[i]
		var tnext *string
		for {
			out, err := r.c.Events.ListTargetsByRule(ctx, &eventbridge.ListTargetsByRuleInput{Rule: aws.String(ru.name), NextToken: tnext})
			r.perms.record("events:ListTargetsByRule", err)
			if err != nil {
				ru.targetsErr = fmt.Errorf("listing targets of rule %s: %s", ru.name, apiMessage(err))
				break
			}
			ru.targets = append(ru.targets, out.Targets...)
			if tnext = out.NextToken; tnext == nil {
				break
			}
		}
	}
}

// coverage returns, for samples, the rules that deliver each to the queue.
func (r *run) coverage(samples []sample) (by map[string][]string, missed []string) {
	by = map[string][]string{}
	for _, s := range samples {
		for _, ru := range r.rules {
			if ru.delivers(r.queueARN) && ru.matches(s) {
				by[s.name] = append(by[s.name], ru.name)
			}
		}
		if len(by[s.name]) == 0 {
			missed = append(missed, s.name)
		}
	}
	return by, missed
}

// eventRules checks, for every kind lifeboat handles, that an enabled rule
// delivers real events of that kind to the queue, and that no rule sending
// to the queue matches nothing real.
func (r *run) eventRules() {
	if r.rulesErr != nil {
		r.add("eventbridge rules", Fail, r.rulesErr.Error(), "allow events:ListRules and events:ListTargetsByRule to lifeboat's role so that check can verify the rules")
		return
	}
	for _, spec := range kindSpecs {
		r.kindRule(spec)
	}
	r.ruleTypos()
}

func (r *run) kindRule(spec kindSpec) {
	name := "rule for " + string(spec.kind)
	severity, needed := r.ruleSeverity(spec.kind)
	samples := r.kindSamples(spec)
	by, missed := r.coverage(samples)
	var rules []string
	for _, s := range samples {
		for _, n := range by[s.name] {
			if !slices.Contains(rules, n) {
				rules = append(rules, n)
			}
		}
	}
	switch {
	case len(missed) == 0:
		r.add(name, OK, fmt.Sprintf("%s delivers every real sample (%s) to the queue", plural("rule", rules), sampleNames(samples)), "")
		return
	case len(rules) > 0:
		r.add(name, Warn, fmt.Sprintf("%s delivers %s but not %s", plural("rule", rules), sampleNames(except(samples, missed)), strings.Join(missed, ", ")),
			fmt.Sprintf("widen the pattern to the rule of deploy/aws/lifeboat.cfn.json: %s", spec.pattern))
		return
	}
	// Nothing delivers: say why.
	var why []string
	fix := r.ruleFix(spec)
	for _, ru := range r.rules {
		matched := slices.ContainsFunc(samples, ru.matches)
		_, toQueue := ru.target(r.queueARN)
		switch {
		case matched && toQueue && !ru.enabled():
			why = append(why, fmt.Sprintf("rule %s matches but is %s", ru.name, ru.state))
		case matched && toQueue:
			why = append(why, fmt.Sprintf("rule %s matches but its target transforms the event (Input, InputPath or InputTransformer)", ru.name))
		case matched && ru.enabled() && len(ru.targets) > 0:
			why = append(why, fmt.Sprintf("rule %s matches but sends to %s, not to this queue (%s)", ru.name, strings.Join(ru.otherTargets(r.queueARN), ", "), r.queueARN))
		case toQueue && ru.p != nil && spec.hasDetailType(ru.p.Values("detail-type")):
			why = append(why, fmt.Sprintf("rule %s has the detail-type but its other filters exclude these events (pattern %s)", ru.name, ru.text))
		case toQueue:
			for _, h := range hints(ru.p) {
				if spec.mentions(h) {
					why = append(why, fmt.Sprintf("rule %s: %s", ru.name, h))
					fix = fmt.Sprintf("aws events put-rule --name %s --event-pattern '%s'", ru.name, corrected(ru))
				}
			}
		}
	}
	found := fmt.Sprintf("no enabled rule delivers a real %s event (%s) to the queue", spec.kind, sampleNames(samples))
	if len(why) > 0 {
		found += ": " + strings.Join(why, "; ")
	}
	if !needed {
		found += " (" + severityWhy(spec.kind) + ")"
	}
	r.add(name, severity, found, fix)
}

// ruleSeverity says how bad a missing rule is, and whether lifeboat needs it now.
func (r *run) ruleSeverity(k event.Kind) (Status, bool) {
	switch k {
	case event.LifecycleLaunch:
		if r.cfg.CompleteLifecycle && r.groupsNeedRule(event.TransitionLaunching) {
			return Fail, true
		}
		return Warn, false
	case event.LifecycleTerminate:
		if r.allDirect(event.TransitionTerminating) {
			return OK, false
		}
	}
	if r.cfg.Drains(k) {
		return Fail, true
	}
	return Warn, false
}

func severityWhy(k event.Kind) string {
	switch k {
	case event.LifecycleLaunch:
		return "needed once a group of this cluster has a launch hook, e.g. for a warm pool"
	case event.LifecycleTerminate:
		return "not needed now: the terminate hooks of this cluster's groups notify the queue directly"
	}
	return "lifeboat only cordons on this kind (--drain-on)"
}

// allDirect reports whether every group of the cluster has a hook of this
// transition and every such hook notifies the queue directly.
func (r *run) allDirect(transition string) bool {
	if len(r.groups) == 0 {
		return false
	}
	for _, g := range r.groups {
		has := false
		for _, h := range g.hooks {
			if aws.ToString(h.LifecycleTransition) == transition {
				has = true
			}
		}
		if !has {
			return false
		}
	}
	return !r.groupsNeedRule(transition)
}

// groupsNeedRule reports whether a hook of this transition on a group of
// the cluster notifies something other than the queue.
func (r *run) groupsNeedRule(transition string) bool {
	for _, g := range r.groups {
		for _, h := range g.hooks {
			if aws.ToString(h.LifecycleTransition) == transition && aws.ToString(h.NotificationTargetARN) != r.queueARN {
				return true
			}
		}
	}
	return false
}

func (r *run) ruleFix(spec kindSpec) string {
	n := "lifeboat-" + string(spec.kind)
	return fmt.Sprintf("aws events put-rule --name %s --event-pattern '%s' && aws events put-targets --rule %s --targets Id=lifeboat,Arn=%s (deploy/aws/lifeboat.cfn.json creates every rule)",
		n, spec.pattern, n, r.queueARN)
}

// ruleTypos names the rules sending to the queue that match nothing real.
func (r *run) ruleTypos() {
	var all []sample
	for _, spec := range kindSpecs {
		all = append(all, r.kindSamples(spec)...)
		for _, ref := range append(slices.Clone(spec.samples), spec.warm...) {
			all = append(all, r.adapt(ref.load()))
		}
	}
	for _, ru := range r.rules {
		if _, toQueue := ru.target(r.queueARN); !toQueue {
			continue
		}
		name := "rule " + ru.name
		if ru.perr != nil {
			r.add(name, Fail, "its event pattern is not valid: "+ru.perr.Error(), "fix the pattern: "+ru.text)
			continue
		}
		if slices.ContainsFunc(all, ru.matches) {
			continue
		}
		h := hints(ru.p)
		fixed := corrected(ru)
		found := "matches no real event lifeboat handles"
		if len(h) > 0 {
			found += ": " + strings.Join(h, "; ")
		} else {
			found += ": its filters exclude every real sample (pattern " + ru.text + ")"
		}
		fix := "correct the pattern or delete the rule"
		if fixed != ru.text {
			fix = fmt.Sprintf("aws events put-rule --name %s --event-pattern '%s'", ru.name, fixed)
		}
		if onlyIgnored(ru.p) {
			r.add(name, Warn, "sends only events lifeboat ignores ("+strings.Join(ru.p.Values("detail-type"), ", ")+")", "delete the rule or stop targeting lifeboat's queue")
			continue
		}
		r.add(name, Fail, found, fix)
	}
}

func plural(noun string, names []string) string {
	if len(names) == 1 {
		return noun + " " + names[0]
	}
	return noun + "s " + strings.Join(names, ", ")
}

func sampleNames(samples []sample) string {
	var names []string
	for _, s := range samples {
		names = append(names, s.name)
	}
	return strings.Join(names, ", ")
}

func except(samples []sample, names []string) []sample {
	var out []sample
	for _, s := range samples {
		if !slices.Contains(names, s.name) {
			out = append(out, s)
		}
	}
	return out
}
