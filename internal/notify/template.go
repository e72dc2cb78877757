package notify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	texttemplate "text/template"
	"time"

	"lifeboat.dev/lifeboat/internal/event"
)

// Built-in templates.
const (
	TemplateSlack = "slack"
	TemplateTeams = "teams"
	TemplateJSON  = "json"
)

// builtin are the built-in templates, by name.
var builtin = map[string]string{
	// Slack incoming webhooks (and the Slack-compatible endpoints of
	// Mattermost, Rocket.Chat, Discord's /slack) take {"text": ...}.
	TemplateSlack: `{"text": {{json (summary .)}}}`,
	// Microsoft Teams Workflows ("When a Teams webhook request is
	// received") take a message with an Adaptive Card attachment.
	TemplateTeams: `{"type": "message", "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": null,
  "content": {"$schema": "http://adaptivecards.io/schemas/adaptive-card.json", "type": "AdaptiveCard", "version": "1.4",
    "body": [
      {"type": "TextBlock", "size": "Medium", "weight": "Bolder", "wrap": true, "text": {{json (title .)}}},
      {"type": "TextBlock", "wrap": true, "text": {{json (summary .)}}},
      {"type": "FactSet", "facts": [
        {"title": "Node", "value": {{json .Node}}},
        {"title": "Instance", "value": {{json .InstanceID}}},
        {"title": "Kind", "value": {{json .Kind}}}{{if .Action}},
        {"title": "Action", "value": {{json .Action}}}{{end}}{{if not .Deadline.IsZero}},
        {"title": "Deadline", "value": {{json (rfc3339 .Deadline)}}}{{end}}
      ]}
    ]}}]}`,
	// The notification itself, for any receiver.
	TemplateJSON: `{{json .}}`,
}

// funcs are the only functions a template can call: none reaches the
// filesystem, the environment or the network.
var funcs = texttemplate.FuncMap{
	"json":    marshalJSON,
	"summary": summary,
	"title":   title,
	"rfc3339": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"upper":   strings.ToUpper,
	"lower":   strings.ToLower,
}

type template struct {
	name string
	t    *texttemplate.Template
}

// loadTemplate parses a built-in template or a template file and renders it
// for a sample of every phase, so that a broken template fails at start.
func loadTemplate(nameOrPath string) (*template, error) {
	if nameOrPath == "" {
		nameOrPath = TemplateSlack
	}
	text, ok := builtin[nameOrPath]
	if !ok && strings.Contains(nameOrPath, "{{") {
		// The template text itself (aws-node-termination-handler's
		// WEBHOOK_TEMPLATE); a file path never holds "{{".
		text, ok, nameOrPath = nameOrPath, true, "(inline)"
	}
	if !ok {
		b, err := os.ReadFile(nameOrPath)
		if err != nil {
			return nil, fmt.Errorf("webhook template %q is neither slack, teams nor json, and not a readable file: %w", nameOrPath, err)
		}
		text = string(b)
	}
	t, err := texttemplate.New(nameOrPath).Option("missingkey=error").Funcs(funcs).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("parsing webhook template %s: %w", nameOrPath, err)
	}
	tm := &template{name: nameOrPath, t: t}
	for _, n := range samples() {
		if _, err := tm.render(n); err != nil {
			return nil, fmt.Errorf("webhook template %s, %s notification: %w", nameOrPath, n.Phase, err)
		}
	}
	return tm, nil
}

// render executes the template; the result must be JSON.
func (t *template) render(n Notification) ([]byte, error) {
	var b bytes.Buffer
	if err := t.t.Execute(&b, n); err != nil {
		return nil, fmt.Errorf("executing: %w", err)
	}
	if !json.Valid(b.Bytes()) {
		return nil, fmt.Errorf("the rendered body is not JSON: %.200s", b.String())
	}
	return b.Bytes(), nil
}

// samples are notifications of every phase, with and without the optional
// fields, for validating templates.
func samples() []Notification {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	full := Notification{Node: "ip-10-0-1-23.ec2.internal", InstanceID: "i-0123456789abcdef0", Kind: event.SpotInterruption,
		Action: "terminate", Deadline: at.Add(2 * time.Minute), Detail: "sample \"detail\" <with> characters to escape", Time: at,
		Pods: []string{"shop/cart-7d9f8-abcde", "shop/web-0"}, CutOff: []string{"shop/web-0: mid-shutdown (evicted with a grace period of 30 s, still terminating)"}}
	var out []Notification
	for _, p := range []Phase{PhaseReceived, PhaseFinished, PhaseFailed, PhaseForecastMiss} {
		n := full
		n.Phase = p
		out = append(out, n)
		out = append(out, Notification{Phase: p, Node: full.Node, Kind: event.LifecycleTerminate, Time: at})
	}
	return out
}

// title is a short heading for a notification.
func title(n Notification) string {
	switch n.Phase {
	case PhaseReceived:
		return "Interruption received: " + n.Node
	case PhaseFinished:
		return "Interruption handled: " + n.Node
	case PhaseFailed:
		return "Interruption handling failing: " + n.Node
	case PhaseForecastMiss:
		return "Drain will miss AWS's deadline: " + n.Node
	}
	return string(n.Phase) + ": " + n.Node
}

// summary is one sentence about a notification.
func summary(n Notification) string {
	var b strings.Builder
	what := string(n.Kind)
	if n.Action != "" {
		what += " (" + n.Action + ")"
	}
	node := n.Node
	if n.InstanceID != "" {
		node += " (" + n.InstanceID + ")"
	}
	switch n.Phase {
	case PhaseReceived:
		fmt.Fprintf(&b, "lifeboat: %s for node %s", what, node)
		if !n.Deadline.IsZero() {
			fmt.Fprintf(&b, ", AWS acts at %s", n.Deadline.UTC().Format(time.RFC3339))
		}
		b.WriteString("; cordoning and draining it.")
	case PhaseFinished:
		fmt.Fprintf(&b, "lifeboat: done with node %s (%s).", node, what)
		if len(n.Pods) > 0 {
			fmt.Fprintf(&b, " Evicted %d pods: %s.", len(n.Pods), ListPods(n.Pods))
		}
		if len(n.CutOff) > 0 {
			fmt.Fprintf(&b, " Cut off %d pods (still on the node when its drain ended): %s.", len(n.CutOff), listCutOff(n.CutOff))
		}
	case PhaseFailed:
		fmt.Fprintf(&b, "lifeboat: handling %s for node %s is failing; lifeboat keeps retrying.", what, node)
	case PhaseForecastMiss:
		fmt.Fprintf(&b, "lifeboat: %s for node %s: the drain is expected to miss AWS's deadline", what, node)
		if !n.Deadline.IsZero() {
			fmt.Fprintf(&b, " (%s)", n.Deadline.UTC().Format(time.RFC3339))
		}
		b.WriteString(".")
	default:
		fmt.Fprintf(&b, "lifeboat: %s: %s for node %s.", n.Phase, what, node)
	}
	if n.Detail != "" {
		b.WriteString(" " + n.Detail)
	}
	return b.String()
}

// mostPods bounds the pod names a message lists (a node may run hundreds).
const mostPods = 10

// ListPods lists up to mostPods pod names, then how many more there are.
func ListPods(pods []string) string {
	if len(pods) <= mostPods {
		return strings.Join(pods, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(pods[:mostPods], ", "), len(pods)-mostPods)
}

// listCutOff lists up to mostPods cut-off pods ("namespace/name: why"),
// then how many more there are.
func listCutOff(pods []string) string {
	if len(pods) <= mostPods {
		return strings.Join(pods, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(pods[:mostPods], "; "), len(pods)-mostPods)
}
