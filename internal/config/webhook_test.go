package config

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestWebhookOptions(t *testing.T) {
	const secret = "https://hooks.slack.com/services/T000/B000/XXXXsecretXXXX"
	base := []string{"--queue-url", "https://sqs.us-east-1.amazonaws.com/123456789012/q", "--pod-namespace", "kube-system"}
	c, err := Load(base, env(map[string]string{"LIFEBOAT_WEBHOOK_URL": secret, "LIFEBOAT_WEBHOOK_HEADERS": "Authorization: Bearer x"}))
	if err != nil {
		t.Fatal(err)
	}
	if string(c.WebhookURL) != secret || !c.Webhooks() || c.WebhookTemplate != "slack" || c.WebhookDedupeWindow != 30*time.Minute {
		t.Errorf("webhook config: template %q, window %s, enabled %v", c.WebhookTemplate, c.WebhookDedupeWindow, c.Webhooks())
	}
	for _, s := range []string{fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c)} {
		if strings.Contains(s, "XXXXsecretXXXX") || strings.Contains(s, "Bearer x") {
			t.Fatalf("a formatted Config shows a secret: %s", s)
		}
	}

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"url and file", []string{"--webhook-url", secret, "--webhook-url-file", "/secret/url"}, "exclusive"},
		{"headers and file", []string{"--webhook-headers", "A: b", "--webhook-headers-file", "/secret/h"}, "exclusive"},
		{"not a URL", []string{"--webhook-url", "hooks.slack.com/services/XXXXsecretXXXX"}, "--webhook-url is not an http(s) URL"},
		{"bad proxy", []string{"--webhook-proxy", "proxy:3128"}, "--webhook-proxy"},
		{"short window", []string{"--webhook-dedupe-window", "10s"}, "--webhook-dedupe-window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(append(append([]string{}, base...), tt.args...), env(nil))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "XXXXsecretXXXX") {
				t.Errorf("error shows the secret: %v", err)
			}
		})
	}
}
