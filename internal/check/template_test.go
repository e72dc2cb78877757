package check

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTemplateQueuePolicyIsScoped (issue 22, defect 14): the queue policy of
// deploy/aws/lifeboat.cfn.json lets only the template's own EventBridge
// rules send, in the stack's own account. Without aws:SourceArn and
// aws:SourceAccount any rule of any account could put messages in the queue
// (the confused deputy), and lifeboat would drain nodes on them. No other
// service principal may send.
func TestTemplateQueuePolicyIsScoped(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "aws", "lifeboat.cfn.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tmpl struct {
		Resources map[string]struct {
			Type       string
			Properties json.RawMessage
		}
	}
	if err := json.Unmarshal(raw, &tmpl); err != nil {
		t.Fatal(err)
	}
	// The ARN of every rule, as the template names it.
	var wantRules []any
	for name, res := range tmpl.Resources {
		if res.Type == "AWS::Events::Rule" {
			wantRules = append(wantRules, map[string]any{"Fn::GetAtt": []any{name, "Arn"}})
		}
	}
	byName := func(a, b any) int { return strings.Compare(ruleName(a), ruleName(b)) }
	slices.SortFunc(wantRules, byName)
	if len(wantRules) == 0 {
		t.Fatal("the template has no AWS::Events::Rule")
	}

	var statements []struct {
		Effect    string
		Principal map[string]any
		Action    any
		Condition map[string]map[string]any
	}
	n := 0
	for name, res := range tmpl.Resources {
		if res.Type != "AWS::SQS::QueuePolicy" {
			continue
		}
		n++
		var p struct {
			PolicyDocument struct {
				Statement json.RawMessage
			}
		}
		if err := json.Unmarshal(res.Properties, &p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := json.Unmarshal(p.PolicyDocument.Statement, &statements); err != nil {
			t.Fatalf("%s: statements: %v", name, err)
		}
	}
	if n != 1 || len(statements) == 0 {
		t.Fatalf("want one AWS::SQS::QueuePolicy with statements, found %d policies and %d statements", n, len(statements))
	}
	for i, s := range statements {
		if s.Effect != "Allow" {
			continue
		}
		if d := cmp.Diff(map[string]any{"Service": "events.amazonaws.com"}, s.Principal); d != "" {
			t.Errorf("statement %d: only EventBridge may send (-want +got principal):\n%s", i, d)
		}
		srcArn, ok := s.Condition["ArnEquals"]["aws:SourceArn"].([]any)
		if !ok {
			t.Errorf("statement %d: no Condition ArnEquals aws:SourceArn listing the template's rules: %v", i, s.Condition)
		} else {
			got := slices.Clone(srcArn)
			slices.SortFunc(got, byName)
			if d := cmp.Diff(wantRules, got); d != "" {
				t.Errorf("statement %d: aws:SourceArn must list exactly the template's rules (-want +got):\n%s", i, d)
			}
		}
		if d := cmp.Diff(map[string]any{"Ref": "AWS::AccountId"}, s.Condition["StringEquals"]["aws:SourceAccount"]); d != "" {
			t.Errorf("statement %d: Condition StringEquals aws:SourceAccount must be the stack's account (-want +got):\n%s", i, d)
		}
	}
}

// ruleName is the resource name of {"Fn::GetAtt": [name, "Arn"]}, or "".
func ruleName(v any) string {
	m, _ := v.(map[string]any)
	ga, _ := m["Fn::GetAtt"].([]any)
	if len(ga) == 0 {
		return ""
	}
	s, _ := ga[0].(string)
	return s
}
