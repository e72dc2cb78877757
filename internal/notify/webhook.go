package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/metrics"
)

// Defaults of Options.
const (
	DefaultDedupeWindow = 30 * time.Minute
	DefaultQueueSize    = 64
	DefaultAttempts     = 5
	DefaultBackoff      = time.Second
	DefaultTimeout      = 10 * time.Second
	maxBackoff          = time.Minute
	flushTimeout        = 5 * time.Second
)

// Options configure a Webhook. URL and Headers are secrets: the Webhook
// never logs them and keeps them out of the errors it returns.
type Options struct {
	URL     string
	Headers http.Header
	// Template is slack, teams, json, or the path of a text/template file
	// that renders the JSON body from a Notification.
	Template string
	// Proxy is an HTTP(S) proxy URL; empty means the environment's
	// HTTPS_PROXY / HTTP_PROXY / NO_PROXY.
	Proxy string
	// DedupeWindow: a node's notification of one phase is sent at most once
	// per window, however many signals arrive.
	DedupeWindow time.Duration
	// QueueSize bounds the notifications waiting to be sent; Notify drops
	// what does not fit.
	QueueSize int
	// Attempts is how many times a delivery is tried; Backoff is the first
	// delay between tries (doubled each time, at most a minute).
	Attempts int
	Backoff  time.Duration
	// Timeout bounds one HTTP request.
	Timeout time.Duration
}

// Webhook sends notifications to one HTTP endpoint. Notify never blocks;
// Run delivers, one notification at a time, with retries.
type Webhook struct {
	o       Options
	tmpl    *template
	client  *http.Client
	clock   clock.WithTicker
	log     *slog.Logger
	metrics *metrics.Metrics
	redact  *strings.Replacer
	queue   chan Notification

	mu   sync.Mutex
	seen map[string]time.Time // node + phase -> when sent
}

// New validates the options, parses and tries the template, and returns a
// Webhook. Run must run for anything to be sent.
func New(o Options, clk clock.WithTicker, log *slog.Logger, m *metrics.Metrics) (*Webhook, error) {
	if o.DedupeWindow <= 0 {
		o.DedupeWindow = DefaultDedupeWindow
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.Attempts <= 0 {
		o.Attempts = DefaultAttempts
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL is a secret: never echo it.
		return nil, errors.New("webhook URL is not an http(s) URL (value not shown: it is a secret)")
	}
	tmpl, err := loadTemplate(o.Template)
	if err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = http.ProxyFromEnvironment
	secrets := []string{o.URL}
	if o.Proxy != "" {
		pu, err := url.Parse(o.Proxy)
		if err != nil || pu.Host == "" || (pu.Scheme != "http" && pu.Scheme != "https") {
			return nil, errors.New("webhook proxy is not an http(s) URL")
		}
		transport.Proxy = http.ProxyURL(pu)
		if pu.User != nil {
			secrets = append(secrets, o.Proxy, pu.User.String())
		}
	}
	if p := u.EscapedPath(); len(p) > 1 {
		secrets = append(secrets, p)
	}
	if u.RawQuery != "" {
		secrets = append(secrets, u.RawQuery)
	}
	var pairs []string
	for _, s := range secrets {
		pairs = append(pairs, s, "[redacted]")
	}
	return &Webhook{
		o: o, tmpl: tmpl, clock: clk, log: log, metrics: m,
		client: &http.Client{Transport: transport, Timeout: o.Timeout,
			// A redirect would send the body elsewhere: refuse it.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		redact: strings.NewReplacer(pairs...),
		queue:  make(chan Notification, o.QueueSize),
		seen:   map[string]time.Time{},
	}, nil
}

// Notify queues n for delivery without blocking. A notification for a node
// and phase already sent within the dedupe window is dropped, as is one
// that finds the queue full.
func (w *Webhook) Notify(n Notification) {
	key := n.Node + "\x00" + string(n.Phase)
	now := w.clock.Now()
	w.mu.Lock()
	for k, t := range w.seen {
		if now.Sub(t) >= w.o.DedupeWindow {
			delete(w.seen, k)
		}
	}
	if _, dup := w.seen[key]; dup {
		w.mu.Unlock()
		w.metrics.Notifications.WithLabelValues("deduplicated").Inc()
		return
	}
	w.seen[key] = now
	w.mu.Unlock()
	select {
	case w.queue <- n:
	default:
		w.mu.Lock()
		delete(w.seen, key) // a later signal may try again
		w.mu.Unlock()
		w.metrics.Notifications.WithLabelValues("dropped").Inc()
		w.log.Warn("webhook queue full; notification dropped", "node", n.Node, "phase", n.Phase)
	}
}

// Run delivers queued notifications until ctx ends, then tries once more,
// briefly, to send what is still queued.
func (w *Webhook) Run(ctx context.Context) error {
	for {
		select {
		case n := <-w.queue:
			w.deliver(ctx, n, w.o.Attempts)
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
			defer cancel()
			for {
				select {
				case n := <-w.queue:
					w.deliver(fctx, n, 1)
				default:
					return nil
				}
			}
		}
	}
}

// deliver renders and sends n, retrying network errors, 429 and 5xx.
func (w *Webhook) deliver(ctx context.Context, n Notification, attempts int) {
	body, err := w.tmpl.render(n)
	if err != nil { // validated at start; only a data-dependent template error gets here
		w.metrics.Notifications.WithLabelValues("failed").Inc()
		w.log.Warn("rendering webhook notification failed", "node", n.Node, "phase", n.Phase, "error", err.Error())
		return
	}
	delay := w.o.Backoff
	for attempt := 1; ; attempt++ {
		retryAfter, err := w.post(ctx, body)
		if err == nil {
			w.metrics.Notifications.WithLabelValues("sent").Inc()
			w.log.Debug("webhook notification sent", "node", n.Node, "phase", n.Phase, "attempts", attempt)
			return
		}
		var final finalError
		if attempt >= attempts || errors.As(err, &final) || ctx.Err() != nil {
			w.metrics.Notifications.WithLabelValues("failed").Inc()
			w.log.Warn("webhook notification failed", "node", n.Node, "phase", n.Phase, "attempts", attempt, "error", w.redact.Replace(err.Error()))
			return
		}
		w.metrics.NotifyRetries.Inc()
		wait := delay
		if retryAfter > 0 {
			wait = min(retryAfter, maxBackoff)
		}
		select {
		case <-ctx.Done():
			w.metrics.Notifications.WithLabelValues("failed").Inc()
			w.log.Warn("webhook notification abandoned at shutdown", "node", n.Node, "phase", n.Phase, "attempts", attempt)
			return
		case <-w.clock.After(wait):
		}
		delay = min(2*delay, maxBackoff)
	}
}

// finalError is a failure that retrying cannot fix (HTTP 4xx but 429).
type finalError struct{ error }

// post sends one request. It returns the server's Retry-After, if any.
func (w *Webhook) post(ctx context.Context, body []byte) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.o.URL, bytes.NewReader(body))
	if err != nil {
		return 0, finalError{errors.New("building webhook request failed")}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "lifeboat")
	for k, vs := range w.o.Headers {
		req.Header.Del(k)
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := w.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, a secret
		}
		return 0, fmt.Errorf("posting to the webhook: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return 0, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		var ra time.Duration
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			ra = time.Duration(s) * time.Second
		}
		return ra, fmt.Errorf("webhook answered HTTP %d", resp.StatusCode)
	default:
		return 0, finalError{fmt.Errorf("webhook answered HTTP %d", resp.StatusCode)}
	}
}

// ReadSecretFile returns the trimmed content of a file holding a secret
// (a mounted Secret key). Errors never contain the content.
func ReadSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading secret file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// ParseHeaders parses HTTP headers, one "Name: value" a line; blank lines
// and lines starting with # are ignored. Errors name the line, never the value.
func ParseHeaders(text string) (http.Header, error) {
	h := http.Header{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, fmt.Errorf("webhook headers line %d: want \"Name: value\"", i+1)
		}
		h.Add(name, strings.TrimSpace(value))
	}
	return h, nil
}

// marshalJSON is the template function json.
func marshalJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
