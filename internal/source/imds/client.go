package imds

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Client reads the instance metadata service: IMDSv2 session tokens
// (fetched, cached until shortly before they expire, renewed after a 401),
// a 250 ms dial and 500 ms response-header timeout, 5 s per read, and up to
// 3 attempts with a backoff of at most 1 s when the service does not answer
// or answers 5xx — the behaviour of aws-sdk-go-v2's feature/ec2/imds
// client, which lifeboat used before.
//
// lifeboat does not use the SDK's client here because IMDS mode reads a few
// fixed paths every second on every node: the SDK's middleware stack (about
// 200 allocations a GET) was most of an idle node's CPU, and the SDK's
// packages most of what the DaemonSet's binary links besides Kubernetes'
// (docs/benchmarks.md). This client is one kept-alive connection, a token
// and a GET.
type Client struct {
	base    string // scheme://host[:port], no trailing slash
	allowV1 bool
	dialer  *net.Dialer
	now     func() time.Time

	// connMu serialises requests on the one connection.
	connMu sync.Mutex
	conn   net.Conn // nil: dial at the next request
	br     *bufio.Reader
	bw     *bufio.Writer

	mu      sync.Mutex
	token   string
	expires time.Time
	v1      bool // the token endpoint refused (403, 404, 405) and IMDSv1 is allowed
}

// Defaults of the metadata client (the SDK's).
const (
	defaultEndpoint = "http://169.254.169.254"
	tokenTTL        = 6 * time.Hour
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

// NewClient returns a metadata client. endpoint "" means
// AWS_EC2_METADATA_SERVICE_ENDPOINT, else http://169.254.169.254. allowV1
// lets the client read without a token when the token endpoint refuses
// (403, 404 or 405: IMDSv1); without it a token failure is an error.
// AWS_EC2_METADATA_DISABLED is ignored: in IMDS mode the metadata service
// is the whole point.
func NewClient(endpoint string, allowV1 bool) *Client {
	if endpoint == "" {
		endpoint = os.Getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT")
	}
	if endpoint == "" {
		endpoint = defaultEndpoint
	}
	return &Client{
		base:    strings.TrimSuffix(endpoint, "/"),
		allowV1: allowV1,
		// The metadata service is link-local: never through a proxy.
		dialer: &net.Dialer{Timeout: 250 * time.Millisecond, KeepAlive: 30 * time.Second},
		now:    time.Now,
	}
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
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	var err error
	for attempt := range attempts {
		if attempt > 0 {
			if werr := sleep(ctx, min(maxRetryGap, 100*time.Millisecond<<attempt)); werr != nil {
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

// getOnce is one attempt; retry says whether another may succeed.
func (c *Client) getOnce(ctx context.Context, path string) (body []byte, retry bool, err error) {
	token, err := c.sessionToken(ctx)
	if err != nil {
		return nil, retryable(err), &TokenError{err}
	}
	code, body, err := c.do(ctx, http.MethodGet, metadataPrefix+path, headerToken, token)
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
		return nil, code >= 500, &HTTPError{path, code}
	}
}

// sessionToken returns the cached token, a new one, or "" in IMDSv1 mode.
func (c *Client) sessionToken(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.v1 {
		return "", nil
	}
	if c.token != "" && c.now().Before(c.expires) {
		return c.token, nil
	}
	code, body, err := c.do(ctx, http.MethodPut, tokenPath, headerTTL, strconv.Itoa(int(tokenTTL.Seconds())))
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		herr := &HTTPError{strings.TrimPrefix(tokenPath, "/"), code}
		if c.allowV1 && (code == http.StatusForbidden || code == http.StatusNotFound || code == http.StatusMethodNotAllowed) {
			c.v1 = true
			return "", nil
		}
		return "", herr
	}
	c.token = string(body)
	c.expires = c.now().Add(tokenTTL - tokenMargin)
	return c.token, nil
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
func (c *Client) do(ctx context.Context, method, path, header, value string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, nil)
	if err != nil {
		return 0, nil, err
	}
	if value != "" {
		req.Header.Set(header, value)
	}
	c.connMu.Lock()
	defer c.connMu.Unlock()
	for {
		reused := c.conn != nil
		code, body, err := c.exchange(ctx, req)
		// A kept-alive connection the service closed meanwhile fails at
		// once: that is not an answer, so one fresh connection is tried.
		if err != nil && reused && ctx.Err() == nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
			continue
		}
		return code, body, err
	}
}

// exchange is one request and its answer on c.conn, dialed if needed. The
// connection is closed after an error or when the answer says so.
func (c *Client) exchange(ctx context.Context, req *http.Request) (code int, body []byte, err error) {
	if c.conn == nil {
		conn, err := c.dialer.DialContext(ctx, "tcp", req.URL.Host)
		if err != nil {
			return 0, nil, err
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
	deadline, _ := ctx.Deadline() // Get always sets one
	if err := conn.SetWriteDeadline(deadline); err != nil {
		return 0, nil, err
	}
	if err := conn.SetReadDeadline(minTime(deadline, time.Now().Add(headerTimeout))); err != nil {
		return 0, nil, err
	}
	if err := req.Write(c.bw); err != nil {
		return 0, nil, err
	}
	if err := c.bw.Flush(); err != nil {
		return 0, nil, err
	}
	resp, err := http.ReadResponse(c.br, req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if err := conn.SetReadDeadline(deadline); err != nil {
		return 0, nil, err
	}
	body, err = io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return 0, nil, err
	}
	if resp.Close {
		// The service ends the connection (Connection: close, or a body
		// that ends when the connection does).
		_ = conn.Close()
		c.conn, c.br, c.bw = nil, nil, nil
	}
	return resp.StatusCode, body, nil
}

func minTime(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// retryable: a token request that got an answer (403, 404, 400) will get
// the same one again; one that got none may not.
func retryable(err error) bool {
	var herr *HTTPError
	return !errors.As(err, &herr) || herr.Code >= 500 || herr.Code == http.StatusUnauthorized
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
