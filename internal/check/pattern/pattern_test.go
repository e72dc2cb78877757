package pattern

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fixtures returns the real EventBridge events of testdata/eventbridge (a
// copy of the shared fixtures), by path relative to that directory.
func fixtures(t *testing.T) map[string][]byte {
	t.Helper()
	root := filepath.Join("testdata", "eventbridge")
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 70 {
		t.Fatalf("only %d fixtures under %s; the copy of the shared fixtures is incomplete", len(out), root)
	}
	return out
}

// TestRealPatternsAgainstRealEvents evaluates every pattern found in the
// wild (testdata/patterns) against every real event and compares the set of
// matching events with the set EventBridge would deliver.
func TestRealPatternsAgainstRealEvents(t *testing.T) {
	events := fixtures(t)
	launch := []string{
		"autoscaling-lifecycle/*launch-lifecycle-action*",
		"autoscaling-warm-pool/*warmpool-launch-*",
	}
	terminate := []string{
		"autoscaling-lifecycle/*terminate-lifecycle-action*",
		"autoscaling-warm-pool/*warmpool-terminate-*",
	}
	scheduledEC2 := []string{
		"health/aws-doc-health-guide.health-ec2-instance-retirement-scheduled-single-entity.json",
		"health/nth-e2e.health-ec2-dedicated-host-network-maintenance-scheduled.filled.json",
		"health/nth-v2-test.health-service-EC2-category-scheduledChange-two-entities.partial.filled.json",
		"health/nth.health-ec2-dedicated-host-network-maintenance-scheduled.json",
	}
	spot := []string{"spot-interruption/*"}
	stateChange := []string{"state-change/*"}
	rebalance := []string{"rebalance-recommendation/*"}
	tests := []struct {
		pattern string
		want    []string // globs over fixture paths; every other fixture must not match
	}{
		{"aws-doc-asg-2023-archive.asg-launch-lifecycle-any-origin.json", launch},
		{"aws-doc-asg-2023-archive.launch-lifecycle-by-asg-name.json", launch}, // every launch sample is my-asg
		{"aws-doc-asg-2023-archive.warmpool-launch-ec2-to-autoscalinggroup.json", []string{
			"autoscaling-lifecycle/aws-doc-current.launch-lifecycle-action.*",
			"autoscaling-warm-pool/aws-doc-2023-archive.warmpool-launch-ec2-to-autoscalinggroup.json",
		}},
		{"aws-doc-asg-2023-archive.warmpool-launch-ec2-to-warmpool.json", []string{"autoscaling-warm-pool/*warmpool-launch-ec2-to-warmpool*"}},
		{"aws-doc-asg-2023-archive.warmpool-launch-warmpool-to-autoscalinggroup.json", []string{"autoscaling-warm-pool/*warmpool-launch-warmpool-to-autoscalinggroup*"}},
		{"aws-doc-asg-2023-archive.warmpool-terminate-autoscalinggroup-to-warmpool.json", []string{"autoscaling-warm-pool/*warmpool-terminate-autoscalinggroup-to-warmpool*"}},
		{"aws-doc-ec2.rebalance-recommendation.json", rebalance},
		{"aws-doc-eventbridge.state-change-terminated.json", []string{"state-change/*terminated*"}},
		{"karpenter-cfn-preview.CapacityReservationInterruptionRule.json", []string{"capacity-reservation/aws-doc.cr-instance-interruption-warning.*"}},
		{"karpenter-cfn-preview.InstanceStateChangeRule.json", stateChange},
		{"karpenter-cfn-preview.RebalanceRule.json", rebalance},
		{"karpenter-cfn-preview.ScheduledChangeRule.json", []string{"health/*"}},
		{"karpenter-cfn-preview.SpotInterruptionRule.json", spot},
		{"kops.ASGLifecycle.json", terminate},
		{"kops.InstanceScheduledChange.json", scheduledEC2},
		{"kops.InstanceStateChange.json", stateChange},
		{"kops.RebalanceRecommendation.json", rebalance},
		{"kops.SpotInterruption.json", spot},
		{"nth-cfn-template.ASGTermRule.json", terminate},
		{"nth-cfn-template.InstanceStateChangeRule.json", stateChange},
		{"nth-cfn-template.RebalanceRule.json", rebalance},
		{"nth-cfn-template.ScheduledChangeRule.json", scheduledEC2},
		{"nth-cfn-template.SpotTermRule.json", spot},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			covered[tt.pattern] = true
			raw, err := os.ReadFile(filepath.Join("testdata", "patterns", tt.pattern))
			if err != nil {
				t.Fatal(err)
			}
			p, err := Parse(raw)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var want, got []string
			for name, ev := range events {
				if globAny(tt.want, name) {
					want = append(want, name)
				}
				ok, err := p.Match(ev)
				if err != nil {
					t.Fatalf("Match(%s): %v", name, err)
				}
				if ok {
					got = append(got, name)
				}
			}
			slices.Sort(want)
			slices.Sort(got)
			if len(want) == 0 {
				t.Fatal("the expectation matches no fixture")
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("matching events (-want +got):\n%s", d)
			}
		})
	}
	entries, err := os.ReadDir(filepath.Join("testdata", "patterns"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !covered[e.Name()] {
			t.Errorf("pattern fixture %s has no row in this table", e.Name())
		}
	}
}

func globAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := filepath.Match(g, name); ok {
			return true
		}
	}
	return false
}

// TestTypoMatchesNothing is failure F3: "EC2 Spot Interruption Warning"
// (no "Instance") matches no real event.
func TestTypoMatchesNothing(t *testing.T) {
	p, err := Parse([]byte(`{"source":["aws.ec2"],"detail-type":["EC2 Spot Interruption Warning"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for name, ev := range fixtures(t) {
		if ok, _ := p.Match(ev); ok {
			t.Errorf("typo pattern matches %s", name)
		}
	}
	if d := cmp.Diff([]string{"EC2 Spot Interruption Warning"}, p.Values("detail-type")); d != "" {
		t.Errorf("Values (-want +got):\n%s", d)
	}
}

// TestFilters covers each content filter on small events.
func TestFilters(t *testing.T) {
	const ev = `{"source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","account":"123456789012",
		"resources":["arn:aws:ec2:us-east-1a:instance/i-1234567890abcdef0"],
		"detail":{"instance-id":"i-1234567890abcdef0","instance-action":"terminate","count":5,"ratio":0.5,"flag":true,"none":null,"empty":"",
		"ip":"10.0.1.7","entities":[{"v":"a"},{"v":"b","w":"x"}],"nested":{"k":"v"}}}`
	tests := []struct {
		name, pattern string
		want          bool
	}{
		{"exact", `{"source":["aws.ec2"]}`, true},
		{"exact is case sensitive", `{"source":["AWS.EC2"]}`, false},
		{"one of several values", `{"detail":{"instance-action":["stop","terminate"]}}`, true},
		{"missing field", `{"detail":{"state":["terminated"]}}`, false},
		{"number equals numerically", `{"detail":{"count":[5.0]}}`, true},
		{"number is not a string", `{"detail":{"count":["5"]}}`, false},
		{"string is not a number", `{"detail":{"instance-action":[5]}}`, false},
		{"boolean", `{"detail":{"flag":[true]}}`, true},
		{"null", `{"detail":{"none":[null]}}`, true},
		{"null does not match absent", `{"detail":{"absent":[null]}}`, false},
		{"empty string", `{"detail":{"empty":[""]}}`, true},
		{"array intersects", `{"resources":["x","arn:aws:ec2:us-east-1a:instance/i-1234567890abcdef0"]}`, true},
		{"prefix", `{"detail-type":[{"prefix":"EC2 Spot"}]}`, true},
		{"prefix miss", `{"detail-type":[{"prefix":"EC2 Instance"}]}`, false},
		{"prefix ignoring case", `{"detail-type":[{"prefix":{"equals-ignore-case":"ec2 spot"}}]}`, true},
		{"suffix", `{"detail-type":[{"suffix":"Warning"}]}`, true},
		{"suffix ignoring case", `{"detail-type":[{"suffix":{"equals-ignore-case":"WARNING"}}]}`, true},
		{"equals-ignore-case", `{"detail":{"instance-action":[{"equals-ignore-case":"TERMINATE"}]}}`, true},
		{"wildcard", `{"detail-type":[{"wildcard":"EC2 * Warning"}]}`, true},
		{"wildcard miss", `{"detail-type":[{"wildcard":"EC2 * Notification"}]}`, false},
		{"wildcard escaped star", `{"detail-type":[{"wildcard":"EC2 \\* Warning"}]}`, false},
		{"anything-but value", `{"detail":{"instance-action":[{"anything-but":"stop"}]}}`, true},
		{"anything-but list", `{"detail":{"instance-action":[{"anything-but":["stop","terminate"]}]}}`, false},
		{"anything-but prefix", `{"detail-type":[{"anything-but":{"prefix":"EC2 Spot"}}]}`, false},
		{"anything-but suffix", `{"detail-type":[{"anything-but":{"suffix":"Notification"}}]}`, true},
		{"anything-but needs the field", `{"detail":{"state":[{"anything-but":"running"}]}}`, false},
		{"anything-but number", `{"detail":{"count":[{"anything-but":[4, 6]}]}}`, true},
		{"numeric range", `{"detail":{"count":[{"numeric":[">",0,"<=",5]}]}}`, true},
		{"numeric out of range", `{"detail":{"ratio":[{"numeric":[">=",1]}]}}`, false},
		{"numeric equals", `{"detail":{"count":[{"numeric":["=",5]}]}}`, true},
		{"numeric on a string", `{"detail":{"instance-action":[{"numeric":[">",0]}]}}`, false},
		{"exists", `{"detail":{"instance-id":[{"exists":true}]}}`, true},
		{"exists on absent", `{"detail":{"state":[{"exists":true}]}}`, false},
		{"not exists", `{"detail":{"state":[{"exists":false}]}}`, true},
		{"not exists on present", `{"detail":{"instance-id":[{"exists":false}]}}`, false},
		{"exists is for leaves", `{"detail":{"nested":[{"exists":true}]}}`, false},
		{"cidr", `{"detail":{"ip":[{"cidr":"10.0.0.0/16"}]}}`, true},
		{"cidr miss", `{"detail":{"ip":[{"cidr":"10.1.0.0/16"}]}}`, false},
		{"array of objects flattened", `{"detail":{"entities":{"v":["b"]}}}`, true},
		{"array of objects, other element", `{"detail":{"entities":{"v":["a"],"w":["x"]}}}`, true},
		{"nested object", `{"detail":{"nested":{"k":["v"]}}}`, true},
		{"object pattern on a leaf", `{"source":{"k":["v"]}}`, false},
		{"$or first", `{"$or":[{"source":["aws.ec2"]},{"source":["aws.health"]}]}`, true},
		{"$or none", `{"$or":[{"source":["aws.autoscaling"]},{"detail":{"count":[6]}}]}`, false},
		{"$or nested", `{"detail":{"$or":[{"count":[6]},{"flag":[true]}]}}`, true},
		{"every field must match", `{"source":["aws.ec2"],"detail-type":["EC2 Spot Interruption Warning"]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(tt.pattern))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got, err := p.Match([]byte(ev))
			if err != nil {
				t.Fatalf("Match: %v", err)
			}
			if got != tt.want {
				t.Errorf("Match = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ name, pattern, want string }{
		{"not JSON", `{"source":`, "not JSON"},
		{"not an object", `["aws.ec2"]`, "must be a JSON object"},
		{"empty", `{}`, "empty"},
		{"scalar leaf", `{"source":"aws.ec2"}`, "source: must be an array"},
		{"unknown filter", `{"source":[{"startswith":"aws"}]}`, `unknown filter "startswith"`},
		{"two keys in a filter", `{"source":[{"prefix":"a","suffix":"b"}]}`, "exactly one key"},
		{"numeric operator", `{"detail":{"n":[{"numeric":["!=",1]}]}}`, "numeric operator"},
		{"numeric odd", `{"detail":{"n":[{"numeric":[">"]}]}}`, "pairs"},
		{"exists not boolean", `{"detail":{"n":[{"exists":"yes"}]}}`, "exists needs"},
		{"bad cidr", `{"detail":{"ip":[{"cidr":"10.0.0.0/99"}]}}`, "cidr"},
		{"or with one", `{"$or":[{"source":["a"]}]}`, "two alternatives"},
		{"nested array", `{"source":[["a"]]}`, "must be a value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.pattern))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestWildcard(t *testing.T) {
	tests := []struct {
		p, s string
		want bool
	}{
		{"*", "", true},
		{"a*", "abc", true},
		{"*c", "abc", true},
		{"a*c", "ac", true},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZ", false},
		{`a\*c`, "a*c", true},
		{`a\*c`, "abc", false},
		{"abc", "abcd", false},
	}
	for _, tt := range tests {
		if got := wildcard(tt.p, tt.s); got != tt.want {
			t.Errorf("wildcard(%q, %q) = %v, want %v", tt.p, tt.s, got, tt.want)
		}
	}
}
