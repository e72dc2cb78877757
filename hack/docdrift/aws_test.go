package docdrift

import (
	"encoding/json"
	"go/types"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sdkService is the import path of aws-sdk-go-v2's service clients.
const sdkService = "github.com/aws/aws-sdk-go-v2/service/"

// iamPrefix is the IAM service prefix of each aws-sdk-go-v2 service
// package. A service missing here fails the test: add it.
var iamPrefix = map[string]string{
	"autoscaling":            "autoscaling",
	"ec2":                    "ec2",
	"elasticloadbalancingv2": "elasticloadbalancing",
	"eventbridge":            "events",
	"sqs":                    "sqs",
	"sts":                    "sts",
}

// authorizedAs are calls IAM authorizes with another action's permission:
// SQS's batch calls ("the permission for ChangeMessageVisibilityBatch is
// sqs:ChangeMessageVisibility", the SQS API reference's batch actions).
var authorizedAs = map[string]string{
	"sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
	"sqs:DeleteMessageBatch":           "sqs:DeleteMessage",
	"sqs:SendMessageBatch":             "sqs:SendMessage",
}

// needNoPermission are calls no IAM policy can allow or deny.
var needNoPermission = map[string]string{
	"sts:GetCallerIdentity": "STS answers it for any credentials (lifeboat check's aws identity)",
}

// calledActions returns the IAM action of every AWS call in lifeboat's
// code, with where it is made: each call that passes an aws-sdk-go-v2
// operation input (*<service>.<Operation>Input) to anything (a client, one
// of lifeboat's narrow interfaces, a paginator).
func calledActions(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, c := range productCalls(t) {
		for _, arg := range c.expr.Args {
			ptr, ok := c.pkg.TypesInfo.TypeOf(arg).(*types.Pointer)
			if !ok {
				continue
			}
			named, ok := ptr.Elem().(*types.Named)
			if !ok || named.Obj().Pkg() == nil || !strings.HasPrefix(named.Obj().Pkg().Path(), sdkService) {
				continue
			}
			op, isInput := strings.CutSuffix(named.Obj().Name(), "Input")
			if !isInput {
				continue
			}
			svc := path.Base(named.Obj().Pkg().Path())
			prefix, ok := iamPrefix[svc]
			if !ok {
				t.Errorf("%s: a call of %s.%s: add the IAM prefix of %s to iamPrefix", c.where(), svc, op, svc)
				continue
			}
			action := prefix + ":" + op
			if a, ok := authorizedAs[action]; ok {
				action = a
			}
			if _, ok := needNoPermission[action]; ok {
				continue
			}
			out[action] = append(out[action], c.where())
		}
	}
	if len(out) < 10 {
		t.Fatalf("found only %d AWS actions: the scan is broken: %v", len(out), out)
	}
	return out
}

func sortedKeys(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// policyActions returns the actions of the IAM policies of
// deploy/aws/lifeboat.cfn.json.
func policyActions(t *testing.T) []string {
	t.Helper()
	var tmpl struct {
		Resources map[string]struct {
			Type       string
			Properties struct {
				PolicyDocument struct {
					Statement []struct {
						Effect string
						Action json.RawMessage
					}
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(readRepo(t, "deploy/aws/lifeboat.cfn.json")), &tmpl); err != nil {
		t.Fatal(err)
	}
	var out []string
	for name, r := range tmpl.Resources {
		if r.Type != "AWS::IAM::ManagedPolicy" {
			continue
		}
		for _, st := range r.Properties.PolicyDocument.Statement {
			if st.Effect != "Allow" {
				t.Errorf("%s: a statement with effect %q: this test reads only Allow", name, st.Effect)
			}
			var actions []string
			if err := json.Unmarshal(st.Action, &actions); err != nil {
				var one string
				if err := json.Unmarshal(st.Action, &one); err != nil {
					t.Fatalf("%s: Action %s: %v", name, st.Action, err)
				}
				actions = []string{one}
			}
			out = append(out, actions...)
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		t.Fatal("deploy/aws/lifeboat.cfn.json has no AWS::IAM::ManagedPolicy actions")
	}
	return out
}

var iamAction = regexp.MustCompile(`^[a-z0-9-]+:[A-Z][A-Za-z]+$`)

// documentedActions returns the IAM actions named in the first column of
// the first table of a section of a Markdown file.
func documentedActions(t *testing.T, file, heading string) []string {
	t.Helper()
	var out []string
	for _, row := range tableRows(section(t, file, heading)) {
		for _, s := range codeSpans(row[0]) {
			if iamAction.MatchString(s) {
				out = append(out, s)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no IAM action in the table of %s %q", file, heading)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// TestAWSActionsInPolicy: the CloudFormation template's IAM policy allows
// exactly the AWS calls lifeboat makes (run and check): none missing, none
// more (least privilege).
func TestAWSActionsInPolicy(t *testing.T) {
	called := calledActions(t)
	for _, a := range sortedKeys(called) {
		t.Logf("%s: %s", a, strings.Join(called[a], ", "))
	}
	if d := cmp.Diff(sortedKeys(called), policyActions(t)); d != "" {
		t.Errorf("the AWS actions lifeboat calls (-) and those deploy/aws/lifeboat.cfn.json's policy allows (+) differ:\n%s", d)
	}
}

// TestAWSActionsDocumented: docs/aws.md's permissions table names exactly
// the AWS calls lifeboat makes; docs/imds.md's instance-role table names
// only calls lifeboat makes.
func TestAWSActionsDocumented(t *testing.T) {
	called := calledActions(t)
	if d := cmp.Diff(sortedKeys(called), documentedActions(t, "docs/aws.md", "## Permissions used")); d != "" {
		t.Errorf("the AWS actions lifeboat calls (-) and docs/aws.md's permissions table (+) differ:\n%s", d)
	}
	for _, a := range documentedActions(t, "docs/imds.md", "## Completing the terminate lifecycle action") {
		if _, ok := called[a]; !ok {
			t.Errorf("docs/imds.md names %s for the instance role, which lifeboat never calls", a)
		}
	}
}
