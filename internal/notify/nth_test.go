package notify

import (
	"encoding/json"
	"strings"
	"testing"
)

// NTH's default webhook template, as its users have it in WEBHOOK_TEMPLATE.
const nthDefaultTemplate = `{"text":"[NTH][Instance Interruption] EventID: {{ .EventID }} - Kind: {{ .Kind }} - Instance: {{ .InstanceID }} - Node: {{ .NodeName }} - Description: {{ .Description }} - Start Time: {{ .StartTime }}"}`

func TestNTHTemplateInline(t *testing.T) {
	tm, err := loadTemplate(nthDefaultTemplate)
	if err != nil {
		t.Fatal(err)
	}
	n := samples()[0]
	n.Detail = "plain detail"
	b, err := tm.render(n)
	if err != nil {
		t.Fatal(err)
	}
	var body struct{ Text string }
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"EventID: spot-interruption-i-0123456789abcdef0", "Node: ip-10-0-1-23.ec2.internal", "Description: plain detail", "Start Time: 2026-01-02 03:06:05"} {
		if !strings.Contains(body.Text, want) {
			t.Errorf("body %q lacks %q", body.Text, want)
		}
	}
	// NTH's instance metadata fields are refused at start.
	if _, err := loadTemplate(`{"text":"{{ .InstanceType }}"}`); err == nil || !strings.Contains(err.Error(), "InstanceType") {
		t.Errorf("template with .InstanceType: err = %v, want a start-time error naming it", err)
	}
}
