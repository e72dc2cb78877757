package check

import (
	"embed"
	"encoding/json"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"

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
