package deploy

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// call is one request a lifeboat process made through a proxy.
type call struct {
	at                time.Time // when the request arrived
	answered          time.Time // when the upstream's answer came back
	method            string
	path              string
	action            string // AWS API action (SQS X-Amz-Target, Auto Scaling Action), or ""
	status            int
	reqBody, respBody []byte // AWS requests only
}

// proxy records every request of one lifeboat process to one upstream
// (the kube-apiserver, moto's SQS or the Auto Scaling simulator), so a test
// knows which replica did what and when.
type proxy struct {
	URL string
	// CA is the PEM certificate of a TLS proxy (kubeconfig clients send
	// credentials only over TLS).
	CA []byte

	mu    sync.Mutex
	calls []*call
	// before, if set, runs before a request is forwarded.
	before func(r *http.Request)
}

func startProxy(t testing.TB, upstream string, transport http.RoundTripper, useTLS bool) *proxy {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = u.Host
		},
		Transport:     transport,
		FlushInterval: -1, // watches stream
		ModifyResponse: func(resp *http.Response) error {
			c, _ := resp.Request.Context().Value(callKey{}).(*call)
			if c == nil {
				return nil
			}
			p.mu.Lock()
			c.status = resp.StatusCode
			c.answered = time.Now()
			p.mu.Unlock()
			if c.action != "" {
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					return err
				}
				resp.Body = io.NopCloser(bytes.NewReader(b))
				p.mu.Lock()
				c.respBody = b
				p.mu.Unlock()
			}
			return nil
		},
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := &call{at: time.Now(), method: r.Method, path: r.URL.Path}
		if target := r.Header.Get("X-Amz-Target"); target != "" {
			c.action = target[strings.LastIndex(target, ".")+1:]
		}
		if r.Body != nil && (c.action != "" || strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded")) {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
			c.reqBody = b
			if c.action == "" {
				if v, err := url.ParseQuery(string(b)); err == nil {
					c.action = v.Get("Action")
				}
			}
		}
		p.mu.Lock()
		p.calls = append(p.calls, c)
		before := p.before
		p.mu.Unlock()
		if before != nil {
			before(r)
		}
		rp.ServeHTTP(w, r.WithContext(contextWithCall(r, c)))
	}))
	if useTLS {
		srv.EnableHTTP2 = true
		srv.StartTLS()
		p.CA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	} else {
		srv.Start()
	}
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	p.URL = srv.URL
	return p
}

// setBefore sets a hook run before each request is forwarded.
func (p *proxy) setBefore(f func(r *http.Request)) {
	p.mu.Lock()
	p.before = f
	p.mu.Unlock()
}

// kubeTransport reaches the testbed's kube-apiserver over TLS.
func kubeTransport() http.RoundTripper {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(kube.CA)
	return &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
}

// snapshot returns a copy of the calls so far.
func (p *proxy) snapshot() []call {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]call, len(p.calls))
	for i, c := range p.calls {
		out[i] = *c
	}
	return out
}

// writes are the calls that change something: for the Kubernetes API every
// method but GET; for AWS the actions named.
func (p *proxy) writes(awsActions ...string) []call {
	var out []call
	for _, c := range p.snapshot() {
		if c.action != "" {
			for _, a := range awsActions {
				if c.action == a {
					out = append(out, c)
				}
			}
			continue
		}
		if len(awsActions) == 0 && c.method != http.MethodGet {
			out = append(out, c)
		}
	}
	return out
}

// deletedMessages maps the SQS message IDs deleted successfully through p to
// how many times each was deleted, using the receipt handles p saw received.
func deletedMessages(ps ...*proxy) map[string]int {
	receipts := map[string]string{} // receipt handle -> message ID
	var deletes []string
	for _, p := range ps {
		for _, c := range p.snapshot() {
			switch c.action {
			case "ReceiveMessage":
				var out struct {
					Messages []struct{ MessageId, ReceiptHandle string }
				}
				if json.Unmarshal(c.respBody, &out) == nil {
					for _, m := range out.Messages {
						receipts[m.ReceiptHandle] = m.MessageId
					}
				}
			case "DeleteMessage":
				var in struct{ ReceiptHandle string }
				if c.status == http.StatusOK && json.Unmarshal(c.reqBody, &in) == nil {
					deletes = append(deletes, in.ReceiptHandle)
				}
			}
		}
	}
	out := map[string]int{}
	for _, h := range deletes {
		out[receipts[h]]++
	}
	return out
}

type callKey struct{}

func contextWithCall(r *http.Request, c *call) context.Context {
	return context.WithValue(r.Context(), callKey{}, c)
}
