package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// CFNPath is the CloudFormation template operators deploy (deploy/aws).
func CFNPath() string { return filepath.Join(RepoRoot(), "deploy", "aws", "lifeboat.cfn.json") }

// Template is the part of the CloudFormation template the testbed reads.
type Template struct {
	Resources map[string]struct {
		Type       string          `json:"Type"`
		Properties json.RawMessage `json:"Properties"`
	} `json:"Resources"`
}

// Rule is an EventBridge rule of the template.
type Rule struct {
	Name    string
	State   string
	Pattern string // JSON
}

// LoadTemplate reads deploy/aws/lifeboat.cfn.json.
func LoadTemplate() (*Template, error) {
	b, err := os.ReadFile(CFNPath())
	if err != nil {
		return nil, fmt.Errorf("reading the CloudFormation template: %w", err)
	}
	var t Template
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", CFNPath(), err)
	}
	return &t, nil
}

// Rules returns the template's EventBridge rules, sorted by name.
func (t *Template) Rules() ([]Rule, error) {
	var rules []Rule
	for name, r := range t.Resources {
		if r.Type != "AWS::Events::Rule" {
			continue
		}
		var p struct {
			State        string          `json:"State"`
			EventPattern json.RawMessage `json:"EventPattern"`
		}
		if err := json.Unmarshal(r.Properties, &p); err != nil {
			return nil, fmt.Errorf("rule %s: %w", name, err)
		}
		rules = append(rules, Rule{Name: name, State: p.State, Pattern: string(p.EventPattern)})
	}
	slices.SortFunc(rules, func(a, b Rule) int {
		if a.Name < b.Name {
			return -1
		}
		return 1
	})
	return rules, nil
}

// QueueStack is the AWS side of queue mode, created in moto from the template.
type QueueStack struct {
	QueueURL string
	QueueARN string
	Rules    []string // rule names as created (prefixed)
}

// CreateQueueStack creates in moto what deploy/aws/lifeboat.cfn.json
// creates in AWS: the queue, its policy and every rule targeting it. Rule
// names get prefix so that several stacks can coexist on the default bus.
func CreateQueueStack(ctx context.Context, motoEndpoint, prefix string) (*QueueStack, error) {
	t, err := LoadTemplate()
	if err != nil {
		return nil, err
	}
	rules, err := t.Rules()
	if err != nil {
		return nil, err
	}
	cfg := MotoAWSConfig()
	q := sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(motoEndpoint) })
	eb := eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(motoEndpoint) })
	out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(prefix + "-queue"), Attributes: map[string]string{
		"MessageRetentionPeriod": "300", "SqsManagedSseEnabled": "true",
	}})
	if err != nil {
		return nil, fmt.Errorf("creating queue: %w", err)
	}
	attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return nil, fmt.Errorf("reading queue ARN: %w", err)
	}
	st := &QueueStack{QueueURL: aws.ToString(out.QueueUrl), QueueARN: attrs.Attributes["QueueArn"]}
	var ruleARNs []string
	for _, r := range rules {
		name := prefix + "-" + r.Name
		rule, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(name), EventPattern: aws.String(r.Pattern), State: ebtypes.RuleState(r.State)})
		if err != nil {
			return nil, fmt.Errorf("creating rule %s: %w", name, err)
		}
		ruleARNs = append(ruleARNs, aws.ToString(rule.RuleArn))
		if _, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(name), Targets: []ebtypes.Target{{Id: aws.String("lifeboat"), Arn: aws.String(st.QueueARN)}}}); err != nil {
			return nil, fmt.Errorf("targeting rule %s: %w", name, err)
		}
		st.Rules = append(st.Rules, name)
	}
	policy, err := queuePolicy(st.QueueARN, ruleARNs)
	if err != nil {
		return nil, err
	}
	if _, err := q.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: out.QueueUrl, Attributes: map[string]string{"Policy": policy}}); err != nil {
		return nil, fmt.Errorf("setting queue policy: %w", err)
	}
	return st, nil
}

// queuePolicy is the template's QueuePolicy with its references resolved:
// only the stack's rules, in the queue's account, may send (moto does not
// enforce it; lifeboat check reads it).
func queuePolicy(queueARN string, ruleARNs []string) (string, error) {
	parts := strings.Split(queueARN, ":") // arn:aws:sqs:REGION:ACCOUNT:NAME
	if len(parts) != 6 {
		return "", fmt.Errorf("queue ARN %q has not 6 parts", queueARN)
	}
	b, err := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": []any{map[string]any{
		"Sid": "LifeboatRulesSend", "Effect": "Allow", "Principal": map[string]any{"Service": "events.amazonaws.com"},
		"Action": "sqs:SendMessage", "Resource": queueARN,
		"Condition": map[string]any{
			"ArnEquals":    map[string]any{"aws:SourceArn": ruleARNs},
			"StringEquals": map[string]any{"aws:SourceAccount": parts[4]},
		},
	}}})
	return string(b), err
}
