package imds

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Client reads the instance metadata service: IMDSv2 session tokens
// (fetched, cached until shortly before they expire, renewed after a 401),
// a 250 ms dial timeout, 500 ms for the request and the answer's headers,
// 5 s per read, and up to 3 attempts with a backoff of at most 1 s when the
// service does not answer or answers 5xx — the behaviour of aws-sdk-go-v2's
// feature/ec2/imds client, which lifeboat used before (whose 500 ms count
// from the request written: a request of ~200 bytes is written at once).
//
// lifeboat does not use the SDK's client here because IMDS mode reads a few
// fixed paths every second on every node: the SDK's middleware stack (about
// 200 allocations a GET) was most of an idle node's CPU, and the SDK's
// packages most of what the DaemonSet's binary links besides Kubernetes'
// (docs/benchmarks.md). This client is one kept-alive connection, a token
// and a GET.
type Client struct {
	endpoint string
	target   target
	badURL   error // the endpoint is not one lifeboat can read: every Get fails with it
	allowV1  bool
	dialer   *net.Dialer
	now      func() time.Time

	// connMu serialises requests on the one connection.
	connMu sync.Mutex
	conn   net.Conn // nil: dial at the next request
	br     *bufio.Reader
	bw     *bufio.Writer

	mu      sync.Mutex
	token   string
	expires time.Time
	v1      bool // reading without tokens (IMDSv1): see sessionToken
	lastV1  bool // the last read went without a token
}

// Defaults of the metadata client (the SDK's).
const (
	tokenTTL = 6 * time.Hour
	// tokenMargin: a cached token is renewed this long before it expires.
	tokenMargin = time.Minute
	readTimeout = 5 * time.Second
	// headerTimeout bounds the wait for an answer's headers.
	headerTimeout = 500 * time.Millisecond
	attempts      = 3
	maxRetryGap   = time.Second
	// tokenPath and the headers of IMDSv2.
	tokenPath      = "/latest/api/token"
	metadataPrefix = "/latest/meta-data/"
	headerTTL      = "X-aws-ec2-metadata-token-ttl-seconds"
	headerToken    = "X-aws-ec2-metadata-token"
)

// NewClient returns a metadata client of endpoint ("": the IPv4 default;
// ResolveEndpoint finds it as run and check do). allowV1 lets the client
// read without a token when none can be had, as the SDK's EnableFallback
// does (see sessionToken); without it a token failure is an error.
// AWS_EC2_METADATA_DISABLED is ignored: in IMDS mode the metadata service
// is the whole point.
func NewClient(endpoint string, allowV1 bool) *Client {
	if endpoint == "" {
		endpoint = DefaultIPv4Endpoint
	}
	t, err := parseEndpoint(endpoint)
	return &Client{
		endpoint: endpoint,
		target:   t,
		badURL:   err,
		allowV1:  allowV1,
		// The metadata service is link-local: never through a proxy.
		dialer: &net.Dialer{Timeout: 250 * time.Millisecond, KeepAlive: 30 * time.Second},
		now:    time.Now,
	}
}

// Endpoint is the URL the client reads.
func (c *Client) Endpoint() string { return c.endpoint }

// ReadWithoutToken reports whether the last read went without a session
// token (IMDSv1, with allowV1 only).
func (c *Client) ReadWithoutToken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastV1
}

// HTTPError is an answer other than 200 to a metadata read.
type HTTPError struct {
	Path string
	Code int
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("instance metadata %s: HTTP %d %s", e.Path, e.Code, http.StatusText(e.Code))
}

// HTTPStatusCode is the answer's status (404: the path does not exist).
func (e *HTTPError) HTTPStatusCode() int { return e.Code }

// TokenError is the failure to get an IMDSv2 session token: the service
// did not give one, so no path could be read, whatever status the token
// endpoint answered.
type TokenError struct{ Err error }

func (e *TokenError) Error() string { return "failed to get API token: " + e.Err.Error() }
func (e *TokenError) Unwrap() error { return e.Err }

// Get reads one metadata path (relative to /latest/meta-data/) and returns
// its body, at most maxBody bytes. A 404 is an *HTTPError with Code 404; a
// token failure a *TokenError.
func (c *Client) Get(ctx context.Context, path string) ([]byte, error) {
	if c.badURL != nil {
		return nil, c.badURL
	}
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	var err error
	for attempt := range attempts {
		if attempt > 0 {
			if werr := sleep(ctx, backoff(attempt)); werr != nil {
				return nil, err
			}
		}
		var body []byte
		var retry bool
		body, retry, err = c.getOnce(ctx, path)
		if err == nil || !retry {
			return body, err
		}
	}
	return nil, err
}

// GetWithoutToken reads path once without a session token (IMDSv1),
// whatever allowV1 says: `lifeboat check` asks it after a token failure
// to tell the hop limit (the token's answer dies one hop short of a pod
// while GETs still answer) from an outage.
func (c *Client) GetWithoutToken(ctx context.Context, path string) ([]byte, error) {
	if c.badURL != nil {
		return nil, c.badURL
	}
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	code, body, _, err := c.do(ctx, http.MethodGet, metadataPrefix+path, "", "")
	if err == nil && code != http.StatusOK {
		err = &HTTPError{path, code}
	}
	return body, err
}

// getOnce is one attempt; retry says whether another may succeed.
func (c *Client) getOnce(ctx context.Context, path string) (body []byte, retry bool, err error) {
	token, err := c.sessionToken(ctx)
	if err != nil {
		// sessionToken made its attempts, as the SDK's token operation
		// does: the read is not tried again.
		return nil, false, &TokenError{err}
	}
	code, body, _, err := c.do(ctx, http.MethodGet, metadataPrefix+path, headerToken, token)
	if err != nil {
		return nil, true, err
	}
	switch {
	case code == http.StatusOK:
		return body, false, nil
	case code == http.StatusUnauthorized:
		// The token expired early or the service restarted: get a new one
		// (after IMDSv1 was refused, try tokens again).
		c.dropToken()
		return nil, true, &HTTPError{path, code}
	default:
		return nil, retryStatus(code), &HTTPError{path, code}
	}
}

// sessionToken returns the cached token, a new one, or "" to read without
// one (IMDSv1). With allowV1 that is the SDK's EnableFallback: after the
// token endpoint refused (403, 404, 405) or did not answer, every read
// goes without a token until a 401; after another answer (5xx), this read
// does and the next asks for a token again; a 400 is an error.
func (c *Client) sessionToken(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastV1 = c.v1
	if c.v1 {
		return "", nil
	}
	if c.token != "" && c.now().Before(c.expires) {
		return c.token, nil
	}
	token, ttl, err := c.newToken(ctx)
	if err == nil {
		c.token = token
		c.expires = c.now().Add(ttl - min(tokenMargin, ttl/4))
		return token, nil
	}
	var herr *HTTPError
	answered := errors.As(err, &herr)
	if !c.allowV1 || answered && herr.Code == http.StatusBadRequest {
		return "", err
	}
	if !answered || herr.Code == http.StatusForbidden || herr.Code == http.StatusNotFound || herr.Code == http.StatusMethodNotAllowed {
		c.v1 = true
	}
	c.lastV1 = true
	return "", nil
}

// newToken asks for a session token, up to attempts times while the
// service does not answer or answers 5xx, and returns it with its time to
// live: what the service granted, at most tokenTTL.
func (c *Client) newToken(ctx context.Context) (string, time.Duration, error) {
	var err error
	for attempt := range attempts {
		if attempt > 0 {
			if werr := sleep(ctx, backoff(attempt)); werr != nil {
				return "", 0, err
			}
		}
		code, body, header, derr := c.do(ctx, http.MethodPut, tokenPath, headerTTL, strconv.Itoa(int(tokenTTL.Seconds())))
		switch {
		case derr != nil:
			err = derr
			continue
		case code == http.StatusOK:
			ttl := tokenTTL
			if s, perr := strconv.Atoi(header.Get(headerTTL)); perr == nil && s > 0 && time.Duration(s)*time.Second < ttl {
				ttl = time.Duration(s) * time.Second
			}
			return string(body), ttl, nil
		}
		err = &HTTPError{strings.TrimPrefix(tokenPath, "/"), code}
		if !retryStatus(code) {
			break
		}
	}
	return "", 0, err
}

// dropToken forgets the token (and IMDSv1 mode) after a 401.
func (c *Client) dropToken() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.token, c.v1 = "", false
}

// do sends one request with one header over the kept-alive connection
// and reads the whole answer.
//
// It writes the request and reads the answer itself (net/http's
// Request.Write and ReadResponse over one net.Conn) rather than through an
// http.Transport: the Transport hands every request to two goroutines of
// its own (writeLoop, readLoop), and such thread wake-ups, not the HTTP
// work, are most of what an idle node's polling costs in CPU
// (docs/benchmarks.md, "Where an idle second's CPU goes").
func (c *Client) do(ctx context.Context, method, path, header, value string) (int, []byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.target.scheme+"://"+c.target.host+path, nil)
	if err != nil {
		return 0, nil, nil, err
	}
	if value != "" {
		req.Header.Set(header, value)
	}
	c.connMu.Lock()
	defer c.connMu.Unlock()
	for {
		reused := c.conn != nil
		code, body, respHeader, err := c.exchange(ctx, req)
		// A kept-alive connection the service closed meanwhile fails at
		// once: that is not an answer, so one fresh connection is tried.
		if err != nil && reused && ctx.Err() == nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
			continue
		}
		return code, body, respHeader, err
	}
}

// exchange is one request and its answer on c.conn, dialed if needed. The
// connection is closed after an error or when the answer says so.
func (c *Client) exchange(ctx context.Context, req *http.Request) (code int, body []byte, header http.Header, err error) {
	if c.conn == nil {
		conn, err := c.dial(ctx)
		if err != nil {
			return 0, nil, nil, err
		}
		c.conn, c.br, c.bw = conn, bufio.NewReader(conn), bufio.NewWriter(conn)
	}
	conn := c.conn
	defer func() {
		if err != nil {
			_ = conn.Close()
			c.conn, c.br, c.bw = nil, nil, nil
		}
	}()
	// A canceled ctx ends a blocked read or write at once.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	// The request and the answer's headers within headerTimeout (or less
	// if the read's time runs out sooner), the body by the read's
	// deadline. One deadline for both directions is one runtime timer, and
	// the connection is left with none: a deadline left armed, or moved
	// later, still wakes the idle process when it was first due, between
	// two polls (docs/benchmarks.md, issue 28 item 3).
	deadline, _ := ctx.Deadline() // Get always sets one
	if err := conn.SetDeadline(minTime(deadline, time.Now().Add(headerTimeout))); err != nil {
		return 0, nil, nil, err
	}
	defer func() { _ = conn.SetDeadline(time.Time{}) }()
	if err := req.Write(c.bw); err != nil {
		return 0, nil, nil, err
	}
	if err := c.bw.Flush(); err != nil {
		return 0, nil, nil, err
	}
	resp, err := http.ReadResponse(c.br, req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.ContentLength < 0 || int64(c.br.Buffered()) < resp.ContentLength {
		// Not all of the body came with the headers (it does from the
		// metadata service): the rest by the read's deadline.
		if err := conn.SetReadDeadline(deadline); err != nil {
			return 0, nil, nil, err
		}
	}
	body, err = io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return 0, nil, nil, err
	}
	if resp.Close {
		// The service ends the connection (Connection: close, or a body
		// that ends when the connection does).
		_ = conn.Close()
		c.conn, c.br, c.bw = nil, nil, nil
	}
	return resp.StatusCode, body, resp.Header, nil
}

// dial connects to the endpoint's host and port (the scheme's default
// when the URL has none), over TLS for https.
func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	conn, err := c.dialer.DialContext(ctx, "tcp", c.target.addr)
	if err != nil || c.target.tls == nil {
		return conn, err
	}
	tc := tls.Client(conn, c.target.tls)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return tc, nil
}

func minTime(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// retryStatus: the SDK's standard retryer tries these answers again.
func retryStatus(code int) bool {
	switch code {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// backoff is the wait before attempt (1, 2): 200 ms, 400 ms, at most 1 s.
func backoff(attempt int) time.Duration {
	return min(maxRetryGap, 100*time.Millisecond<<attempt)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
