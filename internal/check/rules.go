package check

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"lifeboat.dev/lifeboat/internal/check/pattern"
	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/route"
)

// samples are real events published by AWS (copies of the shared
// fixtures): a rule is judged by the events it matches, never by its text.
//
//go:embed samples/*.json
var sampleFS embed.FS

// sample is one real event, decoded, ready to be adapted.
type sample struct {
	name string
	body map[string]any
}

func (s sample) bytes() []byte {
	b, _ := json.Marshal(s.body) // a decoded JSON object always encodes
	return b
}

// clone deep-copies s (through JSON) so that it can be changed.
func (s sample) clone(name string) sample {
	var body map[string]any
	_ = json.Unmarshal(s.bytes(), &body)
	return sample{name: name, body: body}
}

// loadSample reads an embedded sample. The files are part of the binary
// and TestSamplesLoad reads every one, so an error here is a build defect;
// it yields an empty event, which no rule matches.
func loadSample(file string) sample {
	body := map[string]any{}
	if b, err := sampleFS.ReadFile("samples/" + file); err == nil {
		_ = json.Unmarshal(b, &body)
	}
	return sample{name: file, body: body}
}

// sampleRef names a sample file and, optionally, a change to it (for
// values AWS documents but publishes no whole sample of).
type sampleRef struct {
	name, file string
	detail     map[string]any
}

func (ref sampleRef) load() sample {
	s := loadSample(ref.file).clone(ref.name)
	if d, ok := s.body["detail"].(map[string]any); ok {
		for k, v := range ref.detail {
			d[k] = v
		}
	}
	return s
}

// kindSpec is what lifeboat needs from EventBridge for one kind: the real
// samples a rule must deliver. The source, detail-types and the rule's
// pattern come from the route table (internal/route).
type kindSpec struct {
	kind    event.Kind
	samples []sampleRef
	// warm are the extra samples of a group with a warm pool.
	warm []sampleRef
	// pattern is the rule deploy/aws/lifeboat.cfn.json creates for the
	// kind (route.Pattern).
	pattern string
}

// withPatterns fills in each spec's pattern from the route table.
func withPatterns(specs []kindSpec) []kindSpec {
	for i := range specs {
		specs[i].pattern = route.Pattern(specs[i].kind)
	}
	return specs
}

// mentions reports whether a hint names one of the kind's detail-types.
func (s kindSpec) mentions(hint string) bool {
	for _, r := range route.Of(s.kind) {
		if strings.Contains(hint, jsonString(r.DetailType)) {
			return true
		}
	}
	return false
}

// hasDetailType reports whether dts holds one of the kind's detail-types.
func (s kindSpec) hasDetailType(dts []string) bool {
	for _, r := range route.Of(s.kind) {
		if slices.Contains(dts, r.DetailType) {
			return true
		}
	}
	return false
}

var kindSpecs = withPatterns([]kindSpec{
	{kind: event.SpotInterruption,
		samples: []sampleRef{
			{name: "terminate", file: "aws-doc-current.spot-interruption-warning-terminate.filled.json"},
			{name: "stop", file: "aws-doc-current.spot-interruption-warning-stop.filled.json"},
			{name: "hibernate", file: "aws-doc-current.spot-interruption-warning-hibernate.filled.json"},
		}},
	{kind: event.RebalanceRecommendation,
		samples: []sampleRef{{name: "recommendation", file: "aws-doc.rebalance-recommendation.filled.json"}}},
	{kind: event.ScheduledChange,
		samples: []sampleRef{
			{name: "instance retirement", file: "aws-doc-health-guide.health-ec2-instance-retirement-scheduled-single-entity.json"},
			{name: "host maintenance", file: "nth-e2e.health-ec2-dedicated-host-network-maintenance-scheduled.filled.json"},
		}},
	{kind: event.StateChange,
		samples: []sampleRef{
			{name: "stopping", file: "nth-e2e.state-change-stopping.filled.json"},
			{name: "stopped", file: "aws-doc-eventbridge-guide.state-change-terminated.json", detail: map[string]any{"state": "stopped"}},
			{name: "shutting-down", file: "aws-doc-eventbridge-guide.state-change-terminated.json", detail: map[string]any{"state": "shutting-down"}},
			{name: "terminated", file: "aws-doc-eventbridge-guide.state-change-terminated.json"},
		}},
	{kind: event.CapacityReservationInterruption,
		samples: []sampleRef{
			{name: "documented detail-type", file: "aws-doc.cr-instance-interruption-warning.filled.json"},
			{name: "detail-type of AWS's HTML docs", file: "aws-doc-html-variant.cr-instance-interruption-warning-ALT-DETAIL-TYPE.published.json"},
		}},
	{kind: event.LifecycleTerminate,
		samples: []sampleRef{{name: "AutoScalingGroup → EC2", file: "aws-doc-current.terminate-lifecycle-action.filled.json"}},
		warm:    []sampleRef{{name: "AutoScalingGroup → WarmPool", file: "aws-doc-current.warmpool-terminate-autoscalinggroup-to-warmpool.published.json"}}},
	{kind: event.LifecycleLaunch,
		samples: []sampleRef{{name: "EC2 → AutoScalingGroup", file: "aws-doc-current.launch-lifecycle-action.filled.json"}},
		warm: []sampleRef{
			{name: "EC2 → WarmPool", file: "aws-doc-current.warmpool-launch-ec2-to-warmpool.published.json"},
			{name: "WarmPool → AutoScalingGroup", file: "aws-doc-current.warmpool-launch-warmpool-to-autoscalinggroup.published.json"},
		}},
})

// knownDetailTypes and knownSources are those lifeboat acts on.
var (
	knownDetailTypes = route.DetailTypes()
	knownSources     = route.Sources()
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

// adapt fills a sample's envelope with this account and region, so that
// rules filtering on them are judged fairly.
func (r *run) adapt(s sample) sample {
	s = s.clone(s.name)
	if r.account != "" {
		s.body["account"] = r.account
	}
	if r.queueRegion != "" {
		s.body["region"] = r.queueRegion
	}
	return s
}

// kindSamples are the samples of a kind. Lifecycle kinds get one set per
// group of the cluster (its name and hook filled in), with the warm-pool
// transitions for groups that have a warm pool.
func (r *run) kindSamples(spec kindSpec) []sample {
	transition := map[event.Kind]string{event.LifecycleTerminate: event.TransitionTerminating, event.LifecycleLaunch: event.TransitionLaunching}[spec.kind]
	if transition == "" || len(r.groups) == 0 {
		var out []sample
		for _, ref := range spec.samples {
			out = append(out, r.adapt(ref.load()))
		}
		return out
	}
	var out []sample
	for _, g := range r.groups {
		hook := ""
		for _, h := range g.hooks {
			if aws.ToString(h.LifecycleTransition) == transition {
				hook = aws.ToString(h.LifecycleHookName)
				break
			}
		}
		out = append(out, r.groupSamples(spec, g, hook)...)
	}
	return out
}

// groupSamples are the lifecycle samples of one group and hook.
func (r *run) groupSamples(spec kindSpec, g group, hook string) []sample {
	refs := spec.samples
	if g.warm != nil {
		refs = append(slices.Clone(refs), spec.warm...)
	}
	var out []sample
	for _, ref := range refs {
		s := r.adapt(ref.load())
		s.name = g.name + ": " + ref.name
		if d, ok := s.body["detail"].(map[string]any); ok {
			d["AutoScalingGroupName"] = g.name
			if hook != "" {
				d["LifecycleHookName"] = hook
			}
		}
		if g.arn != "" {
			s.body["resources"] = []any{g.arn}
		}
		out = append(out, s)
	}
	return out
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

// corrected is the rule's pattern with every near-miss detail-type and
// source replaced by the real one.
func corrected(ru rule) string {
	fixed := ru.text
	for _, c := range corrections(ru.p) {
		fixed = strings.ReplaceAll(fixed, jsonString(c[0]), jsonString(c[1]))
	}
	return fixed
}

func onlyIgnored(p *pattern.Pattern) bool {
	dts := p.Values("detail-type")
	if len(dts) == 0 {
		return false
	}
	for _, d := range dts {
		if !route.IsIgnored(d) {
			return false
		}
	}
	return true
}

// hints explain why a pattern matches nothing: detail-types and sources
// that AWS never sends, with the closest real one.
func hints(p *pattern.Pattern) []string {
	if p == nil {
		return nil
	}
	var out []string
	for _, c := range corrections(p) {
		out = append(out, fmt.Sprintf("%s %q is not one AWS sends; did you mean %q?", c[2], c[0], c[1]))
	}
	for _, f := range []struct {
		field string
		known []string
	}{{"detail-type", knownDetailTypes}, {"source", knownSources}} {
		for _, v := range p.Values(f.field) {
			if slices.Contains(f.known, v) || route.IsIgnored(v) {
				continue
			}
			if _, ok := closest(v, f.known); !ok {
				out = append(out, fmt.Sprintf("%s %q is not one AWS sends to lifeboat", f.field, v))
			}
		}
	}
	return out
}

// corrections returns [wrong, right, field] for every value of the pattern's
// detail-type and source that is close to, but not, a real one.
func corrections(p *pattern.Pattern) [][3]string {
	if p == nil {
		return nil
	}
	var out [][3]string
	for _, f := range []struct {
		field string
		known []string
	}{{"detail-type", knownDetailTypes}, {"source", knownSources}} {
		for _, v := range p.Values(f.field) {
			if slices.Contains(f.known, v) || route.IsIgnored(v) {
				continue
			}
			if c, ok := closest(v, f.known); ok {
				out = append(out, [3]string{v, c, f.field})
			}
		}
	}
	return out
}

// closest returns the known string nearest to s by edit distance, if it is
// near enough to be what was meant.
func closest(s string, known []string) (string, bool) {
	best, bestD := "", -1
	for _, k := range known {
		if d := levenshtein(strings.ToLower(s), strings.ToLower(k)); bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	return best, bestD >= 0 && bestD <= max(3, len(best)/3)
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
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
