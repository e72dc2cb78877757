package main

import (
	"fmt"
	"log/slog"

	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/notify"
)

// newNotifier returns the configured webhook, or nil when there is none.
// The URL and headers come from the environment or from files (a mounted
// Secret); errors never show them.
func newNotifier(cfg config.Config, clk clock.WithTicker, log *slog.Logger, m *metrics.Metrics) (*notify.Webhook, error) {
	if !cfg.Webhooks() {
		return nil, nil
	}
	url, headers := string(cfg.WebhookURL), string(cfg.WebhookHeaders)
	var err error
	if cfg.WebhookURLFile != "" {
		if url, err = notify.ReadSecretFile(cfg.WebhookURLFile); err != nil {
			return nil, fmt.Errorf("--webhook-url-file: %w", err)
		}
	}
	if cfg.WebhookHeadersFile != "" {
		if headers, err = notify.ReadSecretFile(cfg.WebhookHeadersFile); err != nil {
			return nil, fmt.Errorf("--webhook-headers-file: %w", err)
		}
	}
	h, err := notify.ParseHeaders(headers)
	if err != nil {
		return nil, err
	}
	w, err := notify.New(notify.Options{URL: url, Headers: h, Template: cfg.WebhookTemplate, Proxy: cfg.WebhookProxy,
		DedupeWindow: cfg.WebhookDedupeWindow}, clk, log, m)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	return w, nil
}
