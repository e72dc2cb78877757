package lbdrain

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const (
	tgA = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/web/0123456789abcdef"
	tgB = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/api/fedcba9876543210"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	node := Node{InstanceID: "i-0aaa", IPs: []string{"10.0.1.5", "10.0.1.9"}}
	inst := func(id, state string) Registration {
		return Registration{TargetGroup: tgA, Type: Instance, ID: id, Port: 30080, State: state}
	}
	ip := func(id, state string) Registration {
		return Registration{TargetGroup: tgB, Type: IP, ID: id, Port: 8080, State: state}
	}
	tests := []struct {
		name  string
		node  Node
		regs  []Registration
		until time.Time
		want  Decision
	}{
		{name: "no target groups", node: node, until: now.Add(time.Minute), want: Decision{Verdict: Release}},
		{name: "instance healthy", node: node, regs: []Registration{inst("i-0aaa", "healthy")}, until: now.Add(time.Minute),
			want: Decision{Verdict: Hold, Held: []Registration{inst("i-0aaa", "healthy")}}},
		{name: "instance draining", node: node, regs: []Registration{inst("i-0aaa", "draining")}, until: now.Add(time.Minute),
			want: Decision{Verdict: Hold, Held: []Registration{inst("i-0aaa", "draining")}}},
		{name: "instance unhealthy still takes traffic when all are (fail open)", node: node, regs: []Registration{inst("i-0aaa", "unhealthy")}, until: now.Add(time.Minute),
			want: Decision{Verdict: Hold, Held: []Registration{inst("i-0aaa", "unhealthy")}}},
		{name: "instance unused", node: node, regs: []Registration{inst("i-0aaa", "unused")}, until: now.Add(time.Minute), want: Decision{Verdict: Release}},
		{name: "another instance", node: node, regs: []Registration{inst("i-0bbb", "healthy")}, until: now.Add(time.Minute), want: Decision{Verdict: Release}},
		{name: "pod IP draining", node: node, regs: []Registration{ip("10.0.1.9", "draining"), ip("10.0.2.7", "healthy")}, until: now.Add(time.Minute),
			want: Decision{Verdict: Hold, Held: []Registration{ip("10.0.1.9", "draining")}}},
		{name: "another node's pod IP", node: node, regs: []Registration{ip("10.0.2.7", "healthy")}, until: now.Add(time.Minute), want: Decision{Verdict: Release}},
		{name: "an IP in an instance target group is no match", node: node, regs: []Registration{inst("10.0.1.5", "healthy")}, until: now.Add(time.Minute), want: Decision{Verdict: Release}},
		{name: "no instance ID matches nothing", node: Node{IPs: node.IPs}, regs: []Registration{inst("", "healthy")}, until: now.Add(time.Minute), want: Decision{Verdict: Release}},
		{name: "bound reached while held", node: node, regs: []Registration{inst("i-0aaa", "draining"), ip("10.0.1.5", "healthy")}, until: now,
			want: Decision{Verdict: CutShort, Held: []Registration{inst("i-0aaa", "draining"), ip("10.0.1.5", "healthy")}}},
		{name: "bound passed, nothing held", node: node, regs: []Registration{inst("i-0aaa", "unused")}, until: now.Add(-time.Second), want: Decision{Verdict: Release}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, Decide(tt.node, tt.regs, now, tt.until)); d != "" {
				t.Errorf("Decide (-want +got):\n%s", d)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	regs := []Registration{
		{TargetGroup: tgA, Type: Instance, ID: "i-0aaa", Port: 30080, State: "draining"},
		{TargetGroup: tgB, Type: IP, ID: "10.0.1.5", Port: 8080, State: "healthy"},
		{TargetGroup: tgB, Type: IP, ID: "10.0.1.9", Port: 8080, State: "healthy"},
	}
	if got, want := Describe(regs, 2), "web i-0aaa:30080 draining, api 10.0.1.5:8080 healthy, and 1 more"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	if d := cmp.Diff([]string{"api", "web"}, Groups(regs)); d != "" {
		t.Errorf("Groups (-want +got):\n%s", d)
	}
	if got := groupName("not-an-arn"); got != "not-an-arn" {
		t.Errorf("groupName of a non-ARN = %q", got)
	}
}
