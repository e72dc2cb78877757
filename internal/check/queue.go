package check

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// AWS-managed SQS key: EventBridge cannot be allowed to use it.
const awsManagedSQSKey = "alias/aws/sqs"

// minRetention is the shortest useful retention: a Spot notice gives two minutes.
const minRetention = 120

// queue checks the queue: it exists and is readable, keeps messages long
// enough, is encrypted in a way EventBridge can use, and its policy lets the
// services that feed it send.
func (r *run) queue(ctx context.Context) {
	r.perms.need("sqs:GetQueueAttributes", false, "")
	r.queueARN, r.queueRegion = arnFromURL(r.cfg.QueueURL, r.cfg.Region)
	out, err := r.c.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(r.cfg.QueueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if r.perms.record("sqs:GetQueueAttributes", err) {
		r.add("queue", Fail, "not allowed to read the queue's attributes: "+apiMessage(err),
			"allow sqs:GetQueueAttributes (and the other queue actions) on "+r.queueARN)
		return
	}
	if err != nil {
		fix := "check --queue-url and --region; create the queue with deploy/aws/lifeboat.cfn.json"
		r.add("queue", Fail, fmt.Sprintf("cannot read %s: %s", r.cfg.QueueURL, apiMessage(err)), fix)
		return
	}
	a := out.Attributes
	if arn := a["QueueArn"]; arn != "" {
		r.queueARN = arn
		if parts := strings.Split(arn, ":"); len(parts) == 6 {
			r.queueRegion = parts[3]
		}
	}
	found := fmt.Sprintf("%s (%s messages waiting, %s in flight)", r.queueARN, a["ApproximateNumberOfMessages"], a["ApproximateNumberOfMessagesNotVisible"])
	switch {
	case a["FifoQueue"] == "true":
		r.add("queue", Fail, found+"; it is a FIFO queue", "use a standard queue: lifecycle hooks cannot notify FIFO queues")
	case atoi(a["DelaySeconds"]) > 0:
		r.add("queue", Warn, found+fmt.Sprintf("; every message is delayed %s s", a["DelaySeconds"]),
			"set DelaySeconds to 0: a Spot notice gives two minutes")
	default:
		r.add("queue", OK, found, "")
	}

	retention := atoi(a["MessageRetentionPeriod"])
	if retention < minRetention {
		r.add("queue retention", Warn, fmt.Sprintf("%d s", retention),
			fmt.Sprintf("keep messages at least %d s (deploy/aws/lifeboat.cfn.json uses 300 s): a message may expire while lifeboat restarts or changes leader", minRetention))
	} else {
		r.add("queue retention", OK, fmt.Sprintf("%d s", retention), "")
	}

	key := a["KmsMasterKeyId"]
	switch {
	case key == awsManagedSQSKey || strings.HasSuffix(key, ":"+awsManagedSQSKey):
		r.add("queue encryption", Fail, "SSE-KMS with the AWS-managed key "+key+": EventBridge cannot use it, so no rule can deliver",
			fmt.Sprintf("use SSE-SQS (aws sqs set-queue-attributes --queue-url %s --attributes KmsMasterKeyId=,SqsManagedSseEnabled=true) or a customer-managed key whose policy allows events.amazonaws.com kms:GenerateDataKey and kms:Decrypt", r.cfg.QueueURL))
	case key != "":
		r.add("queue encryption", Warn, "SSE-KMS with the customer-managed key "+key+" (its key policy is not checked)",
			"make sure the key policy allows events.amazonaws.com (and sns.amazonaws.com if SNS feeds the queue) kms:GenerateDataKey and kms:Decrypt")
	case a["SqsManagedSseEnabled"] == "true":
		r.add("queue encryption", OK, "SSE-SQS", "")
	default:
		r.add("queue encryption", OK, "not encrypted (EventBridge can deliver; SSE-SQS is recommended)", "")
	}
	r.queuePolicyDoc = a["Policy"]
	r.queuePolicy(a["Policy"])
}

// queuePolicy checks that events.amazonaws.com (and SNS, when a hook
// notifies an SNS topic) may send to the queue.
func (r *run) queuePolicy(doc string) {
	fix := fmt.Sprintf(`allow the service to send: aws sqs set-queue-attributes --queue-url %s --attributes Policy='{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":["events.amazonaws.com"]},"Action":"sqs:SendMessage","Resource":"%s"}]}' (or deploy/aws/lifeboat.cfn.json's QueuePolicy). moto does not enforce queue policies; AWS does`, r.cfg.QueueURL, r.queueARN)
	if doc == "" {
		r.add("queue policy", Fail, "the queue has no policy: EventBridge cannot send to it", fix)
		return
	}
	p, err := parsePolicy(doc)
	if err != nil {
		r.add("queue policy", Fail, "the queue policy cannot be read: "+err.Error(), fix)
		return
	}
	var found, missing []string
	for _, svc := range []string{"events.amazonaws.com"} {
		ok, cond, deny := p.allowsSend(svc, r.queueARN)
		switch {
		case deny:
			missing = append(missing, svc+" (denied by a Deny statement)")
		case !ok:
			missing = append(missing, svc)
		case cond != "":
			found = append(found, fmt.Sprintf("%s may send (if %s)", svc, cond))
		default:
			found = append(found, svc+" may send")
		}
	}
	if len(missing) > 0 {
		r.add("queue policy", Fail, "the policy does not let "+strings.Join(missing, ", ")+" send to the queue", fix)
		return
	}
	r.add("queue policy", OK, strings.Join(found, "; "), "")
}

// checkSNSPolicy adds a result when hooks notify SNS topics: SNS needs the
// queue policy too.
func (r *run) checkSNSPolicy(topics []string, doc string) {
	if len(topics) == 0 || doc == "" {
		return
	}
	p, err := parsePolicy(doc)
	if err != nil {
		return
	}
	if ok, _, deny := p.allowsSend("sns.amazonaws.com", r.queueARN); !ok || deny {
		r.add("queue policy for sns", Fail, "hooks notify "+strings.Join(topics, ", ")+" but the queue policy does not let sns.amazonaws.com send",
			"add a statement allowing Principal {\"Service\":\"sns.amazonaws.com\"} sqs:SendMessage on "+r.queueARN+" with Condition ArnEquals aws:SourceArn = the topic")
	}
}

type policy struct {
	Statement []statement
}

type statement struct {
	Effect    string
	Principal any
	Action    any
	Resource  any
	Condition map[string]any
}

func parsePolicy(doc string) (*policy, error) {
	var raw struct {
		Statement json.RawMessage
	}
	if err := json.Unmarshal([]byte(doc), &raw); err != nil {
		return nil, err
	}
	var p policy
	if err := json.Unmarshal(raw.Statement, &p.Statement); err != nil {
		var one statement // a single statement need not be in an array
		if err2 := json.Unmarshal(raw.Statement, &one); err2 != nil {
			return nil, err
		}
		p.Statement = []statement{one}
	}
	return &p, nil
}

// allowsSend reports whether service may sqs:SendMessage to arn: allowed by
// a statement (with the condition keys that restrict it, not evaluated),
// or denied by one without conditions.
func (p *policy) allowsSend(service, arn string) (ok bool, conditions string, deny bool) {
	unconditional := false
	var keys []string
	for _, s := range p.Statement {
		if !principalHas(s.Principal, service) || !anyGlob(strs(s.Action), "sqs:SendMessage", true) {
			continue
		}
		if res := strs(s.Resource); len(res) > 0 && !anyGlob(res, arn, false) {
			continue
		}
		switch {
		case strings.EqualFold(s.Effect, "Deny") && len(s.Condition) == 0:
			deny = true
		case strings.EqualFold(s.Effect, "Allow") && len(s.Condition) == 0:
			unconditional = true
		case strings.EqualFold(s.Effect, "Allow"):
			for _, c := range s.Condition {
				if m, isMap := c.(map[string]any); isMap {
					for k := range m {
						keys = append(keys, k)
					}
				}
			}
		}
	}
	if unconditional {
		return true, "", deny
	}
	slices.Sort(keys)
	return len(keys) > 0, strings.Join(slices.Compact(keys), ", "), deny
}

func principalHas(p any, service string) bool {
	switch x := p.(type) {
	case string:
		return x == "*"
	case map[string]any:
		return slices.Contains(strs(x["AWS"]), "*") || slices.Contains(strs(x["Service"]), service)
	}
	return false
}

// strs reads a policy value that is a string or a list of strings.
func strs(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// anyGlob reports whether one of the IAM patterns (* and ?) matches s.
func anyGlob(patterns []string, s string, fold bool) bool {
	for _, p := range patterns {
		if fold {
			p, s = strings.ToLower(p), strings.ToLower(s)
		}
		if ok, err := path.Match(strings.ReplaceAll(p, "/", "\x00"), strings.ReplaceAll(s, "/", "\x00")); err == nil && ok {
			return true
		}
	}
	return false
}

// arnFromURL derives a queue's ARN from its URL (used until
// GetQueueAttributes tells the real one): https://sqs.REGION.amazonaws.com/ACCOUNT/NAME.
func arnFromURL(queueURL, region string) (arn, queueRegion string) {
	u, err := url.Parse(queueURL)
	if err != nil {
		return "", region
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) != 2 {
		return "", region
	}
	host := strings.Split(u.Hostname(), ".")
	if len(host) >= 3 && host[0] == "sqs" {
		region = host[1]
	}
	return fmt.Sprintf("arn:aws:sqs:%s:%s:%s", region, parts[0], parts[1]), region
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
