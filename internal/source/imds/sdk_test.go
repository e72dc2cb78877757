package imds

// The differential test of Client against the client it replaced,
// aws-sdk-go-v2's feature/ec2/imds (issue 22, "hand-written clients are
// held against the libraries they replace"): the same reads, against
// servers that answer the same way, must give the same answers, reach the
// same address and make the same requests. Where the two differ on
// purpose, the test asserts the difference and says why.
//
// The SDK is linked only into this test: the IMDS-only build links none of
// it (cmd/lifeboat TestIMDSOnlyBuildLinksNoAWSService).

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	awsimds "github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/google/go-cmp/cmp"
)

// TestSDKEndpointResolution: from the same flag and environment, both
// clients dial the same address (the SDK through net/http, resolving its
// environment with config.LoadDefaultConfig as lifeboat's lifecycle
// client does). The dials are stopped before they connect: nothing
// listens on 169.254.169.254 or fd00:ec2::254 here.
func TestSDKEndpointResolution(t *testing.T) {
	tests := []struct {
		name string
		flag string // --imds-endpoint; the SDK's Options.Endpoint
		env  map[string]string
		want string // "": both refuse the configuration
	}{
		{name: "nothing set", want: "169.254.169.254:80"},
		{name: "mode IPv4", env: map[string]string{EnvEndpointMode: "IPv4"}, want: "169.254.169.254:80"},
		{name: "mode IPv6", env: map[string]string{EnvEndpointMode: "IPv6"}, want: "[fd00:ec2::254]:80"},
		{name: "mode ipv6, blanks", env: map[string]string{EnvEndpointMode: " ipv6 "}, want: "[fd00:ec2::254]:80"},
		{name: "endpoint without a port", env: map[string]string{EnvEndpoint: "http://[fd00:ec2::254]"}, want: "[fd00:ec2::254]:80"},
		{name: "endpoint over mode", env: map[string]string{EnvEndpoint: "http://127.0.0.1:1338", EnvEndpointMode: "IPv6"}, want: "127.0.0.1:1338"},
		{name: "IPv6 endpoint with a port", env: map[string]string{EnvEndpoint: "http://[::1]:1338"}, want: "[::1]:1338"},
		{name: "https endpoint", env: map[string]string{EnvEndpoint: "https://127.0.0.1"}, want: "127.0.0.1:443"},
		{name: "flag over environment", flag: "http://127.0.0.2", env: map[string]string{EnvEndpoint: "http://127.0.0.1:1338"}, want: "127.0.0.2:80"},
		{name: "unknown mode", env: map[string]string{EnvEndpointMode: "dual"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolateSDK(t, tt.env)
			sdkAddrs, sdkErr := sdkDials(t, tt.flag)
			ourAddrs, ourErr := ourDials(t, tt.flag, tt.env)
			if tt.want == "" {
				if sdkErr == nil || ourErr == nil {
					t.Fatalf("refused: SDK %v, lifeboat %v; want both to refuse", sdkErr, ourErr)
				}
				return
			}
			if sdkErr != nil || ourErr != nil {
				t.Fatalf("SDK %v, lifeboat %v", sdkErr, ourErr)
			}
			if d := cmp.Diff(sdkAddrs, ourAddrs); d != "" || sdkAddrs[0] != tt.want {
				t.Errorf("dialed (-SDK +lifeboat):\n%s\nwant %s", d, tt.want)
			}
		})
	}
}

// isolateSDK sets env for the test and keeps the SDK from reading this
// machine's AWS configuration.
func isolateSDK(t *testing.T, env map[string]string) {
	t.Helper()
	for _, k := range []string{EnvEndpoint, EnvEndpointMode, "AWS_EC2_METADATA_DISABLED", "AWS_EC2_METADATA_V1_DISABLED", "AWS_PROFILE"} {
		t.Setenv(k, env[k])
	}
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
}

// sdkDials returns the distinct addresses the SDK's client dials for one
// read.
func sdkDials(t *testing.T, flag string) ([]string, error) {
	t.Helper()
	cfg, err := awsconfig.LoadDefaultConfig(t.Context())
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var addrs []string
	hc := &http.Client{Transport: &http.Transport{DialContext: func(_ context.Context, _, addr string) (net.Conn, error) {
		mu.Lock()
		defer mu.Unlock()
		addrs = appendNew(addrs, addr)
		return nil, errCaptured
	}}}
	c := awsimds.NewFromConfig(cfg, func(o *awsimds.Options) {
		o.HTTPClient, o.ClientEnableState, o.EnableFallback = hc, awsimds.ClientEnabled, aws.FalseTernary
		o.Retryer = aws.NopRetryer{} // one dial is enough to see where
		if flag != "" {
			o.Endpoint = flag
		}
	})
	// The SDK's error does not unwrap to the dial's: the dials are what
	// counts.
	if _, err := c.GetMetadata(t.Context(), &awsimds.GetMetadataInput{Path: PathInstanceID}); err == nil || len(addrs) == 0 {
		t.Fatalf("SDK GetMetadata = %v after dialing %v, want the captured dial", err, addrs)
	}
	return addrs, nil
}

// ourDials is sdkDials for lifeboat's client, resolved as run resolves it.
func ourDials(t *testing.T, flag string, env map[string]string) ([]string, error) {
	t.Helper()
	endpoint, err := ResolveEndpoint(flag, func(k string) string { return env[k] })
	if err != nil {
		return nil, err
	}
	c := NewClient(endpoint, false)
	var addrs []string
	c.dialer.ControlContext = func(_ context.Context, _, addr string, _ syscall.RawConn) error {
		addrs = appendNew(addrs, addr)
		return errCaptured
	}
	if _, err := c.Get(t.Context(), PathInstanceID); !errors.Is(err, errCaptured) {
		t.Fatalf("Get = %v, want the captured dial", err)
	}
	return addrs, nil
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// script is how a diffIMDS answers.
type script struct {
	// putCodes are the answers to successive token PUTs (the last one
	// repeats; none: 200); 0 hangs up without answering.
	putCodes []int
	// getCodes likewise for GETs; 200 serves docs (404 for a path not in
	// it).
	getCodes []int
	// grantTTL is the token TTL answered ("": the TTL asked).
	grantTTL string
	// refuse are tokens GETs are refused with (401).
	refuse    map[string]bool
	requireV2 bool
}

// diffIMDS is a metadata service whose answers a test scripts. Both
// clients get a server of their own with the same script.
type diffIMDS struct {
	script
	docs map[string]string

	mu                 sync.Mutex
	puts, gets, v1Gets int
	askedTTL, lastPath string
	issued             int
}

func (h *diffIMDS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	next := func(codes []int, n int) int {
		switch {
		case len(codes) == 0:
			return http.StatusOK
		case n <= len(codes):
			return codes[n-1]
		}
		return codes[len(codes)-1]
	}
	if r.URL.Path == "/latest/api/token" && r.Method == http.MethodPut {
		h.puts++
		h.askedTTL = r.Header.Get(headerTTL)
		switch code := next(h.putCodes, h.puts); code {
		case 0:
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				_ = conn.Close()
			}
		case http.StatusOK:
			h.issued++
			ttl := h.grantTTL
			if ttl == "" {
				ttl = h.askedTTL
			}
			w.Header().Set(headerTTL, ttl)
			_, _ = io.WriteString(w, "tok"+strconv.Itoa(h.issued))
		default:
			w.WriteHeader(code)
		}
		return
	}
	h.gets++
	h.lastPath = r.URL.Path
	tok := r.Header.Get(headerToken)
	if tok == "" {
		h.v1Gets++
	}
	if code := next(h.getCodes, h.gets); code != http.StatusOK {
		w.WriteHeader(code)
		return
	}
	if tok == "" && h.requireV2 || tok != "" && (h.refuse[tok] || !strings.HasPrefix(tok, "tok")) {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	body, ok := h.docs[strings.TrimPrefix(r.URL.Path, metadataPrefix)]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	_, _ = io.WriteString(w, body)
}

// read is one read's answer: the body, or the status of the error (-1:
// an error without one).
type read struct {
	Body   string
	Status int
}

// seen is what a server saw.
type seen struct {
	Reads              []read
	Puts, Gets, V1Gets int
}

// reader reads path n times.
type reader func(ctx context.Context, path string) read

func statusOf(err error) int {
	var s interface{ HTTPStatusCode() int }
	if errors.As(err, &s) {
		return s.HTTPStatusCode()
	}
	return -1
}

// sdkStatus is the status the SDK's error reports. Its token errors
// (retryableError) and its "exceeded maximum number of attempts" do not
// unwrap to the response error, so the status is read from the message
// when errors.As finds none.
func sdkStatus(err error) int {
	if s := statusOf(err); s != -1 {
		return s
	}
	if m := sdkStatusText.FindStringSubmatch(err.Error()); m != nil {
		s, _ := strconv.Atoi(m[1])
		return s
	}
	return -1
}

var sdkStatusText = regexp.MustCompile(`http response error StatusCode: (\d+)`)

func sdkReader(c *awsimds.Client) reader {
	return func(ctx context.Context, path string) read {
		out, err := c.GetMetadata(ctx, &awsimds.GetMetadataInput{Path: path})
		if err != nil {
			return read{Status: sdkStatus(err)}
		}
		defer out.Content.Close()
		b, err := io.ReadAll(out.Content)
		if err != nil {
			return read{Status: -1}
		}
		return read{Body: string(b)}
	}
}

func ourReader(c *Client) reader {
	return func(ctx context.Context, path string) read {
		b, err := c.Get(ctx, path)
		if err != nil {
			return read{Status: statusOf(err)}
		}
		return read{Body: string(b)}
	}
}

func newSDK(endpoint string, allowV1 bool) *awsimds.Client {
	fallback := aws.FalseTernary
	if allowV1 {
		fallback = aws.TrueTernary
	}
	return awsimds.New(awsimds.Options{Endpoint: endpoint, ClientEnableState: awsimds.ClientEnabled, EnableFallback: fallback})
}

// TestSDKAnswers: the same script, the same reads; the same answers and
// the same requests.
func TestSDKAnswers(t *testing.T) {
	docs := map[string]string{PathInstanceID: testInstance, PathSpot: `{"action":"terminate","time":"2030-01-01T00:00:00Z"}`}
	tests := []struct {
		name    string
		script  script
		allowV1 bool
		paths   []string // read in turn
		want    seen     // lifeboat's and the SDK's
	}{
		{"a body", script{requireV2: true}, false, []string{PathInstanceID, PathSpot},
			seen{Reads: []read{{Body: testInstance}, {Body: docs[PathSpot]}}, Puts: 1, Gets: 2}},
		{"404 is an answer, not tried again", script{requireV2: true}, false, []string{PathRebalance},
			seen{Reads: []read{{Status: 404}}, Puts: 1, Gets: 1}},
		{"5xx tried 3 times", script{requireV2: true, getCodes: []int{503}}, false, []string{PathInstanceID},
			seen{Reads: []read{{Status: 503}}, Puts: 1, Gets: 3}},
		{"5xx twice, then the body", script{requireV2: true, getCodes: []int{500, 502, 200}}, false, []string{PathInstanceID},
			seen{Reads: []read{{Body: testInstance}}, Puts: 1, Gets: 3}},
		{"501 is not tried again", script{requireV2: true, getCodes: []int{501}}, false, []string{PathInstanceID},
			seen{Reads: []read{{Status: 501}}, Puts: 1, Gets: 1}},
		{"401: a new token, read again", script{requireV2: true, refuse: map[string]bool{"tok1": true}}, false, []string{PathInstanceID, PathInstanceID},
			seen{Reads: []read{{Body: testInstance}, {Body: testInstance}}, Puts: 2, Gets: 3}},
		{"401 with every token: 3 tokens, 3 reads", script{requireV2: true, refuse: map[string]bool{"tok1": true, "tok2": true, "tok3": true}}, false, []string{PathInstanceID},
			seen{Reads: []read{{Status: 401}}, Puts: 3, Gets: 3}},
		{"token 403 without v1: the error", script{putCodes: []int{403}}, false, []string{PathInstanceID},
			seen{Reads: []read{{Status: 403}}, Puts: 1}},
		{"token 403 with v1: IMDSv1 from then on", script{putCodes: []int{403}}, true, []string{PathInstanceID, PathInstanceID},
			seen{Reads: []read{{Body: testInstance}, {Body: testInstance}}, Puts: 1, Gets: 2, V1Gets: 2}},
		{"token 404 with v1", script{putCodes: []int{404}}, true, []string{PathInstanceID},
			seen{Reads: []read{{Body: testInstance}}, Puts: 1, Gets: 1, V1Gets: 1}},
		{"token 405 without v1", script{putCodes: []int{405}}, false, []string{PathInstanceID},
			seen{Reads: []read{{Status: 405}}, Puts: 1}},
		{"token 503 without v1: 3 attempts, no read", script{putCodes: []int{503}}, false, []string{PathInstanceID},
			seen{Reads: []read{{Status: 503}}, Puts: 3}},
		{"token 503 with v1: this read without a token, the next asks again", script{putCodes: []int{503}}, true, []string{PathInstanceID, PathInstanceID},
			seen{Reads: []read{{Body: testInstance}, {Body: testInstance}}, Puts: 6, Gets: 2, V1Gets: 2}},
		{"token 503 then 200 without v1", script{putCodes: []int{503, 200}, requireV2: true}, false, []string{PathInstanceID},
			seen{Reads: []read{{Body: testInstance}}, Puts: 2, Gets: 1}},
		{"token 400 with v1: an error, no fallback", script{putCodes: []int{400}}, true, []string{PathInstanceID},
			seen{Reads: []read{{Status: 400}}, Puts: 1}},
		{"token unanswered with v1 (hop limit): IMDSv1 from then on", script{putCodes: []int{0}}, true, []string{PathInstanceID, PathInstanceID},
			seen{Reads: []read{{Body: testInstance}, {Body: testInstance}}, Puts: 3, Gets: 2, V1Gets: 2}},
		{"token unanswered without v1: 3 attempts, an error", script{putCodes: []int{0}}, false, []string{PathInstanceID},
			seen{Reads: []read{{Status: -1}}, Puts: 3}},
		{"IMDSv1 refused later (401): tokens again", script{putCodes: []int{403, 200}, requireV2: true}, true, []string{PathInstanceID},
			seen{Reads: []read{{Body: testInstance}}, Puts: 2, Gets: 2, V1Gets: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each waits out the clients' backoffs
			run := func(newReader func(endpoint string) reader) seen {
				h := &diffIMDS{script: tt.script, docs: docs}
				srv := httptest.NewServer(h)
				defer srv.Close()
				r := newReader(srv.URL)
				var s seen
				for _, p := range tt.paths {
					s.Reads = append(s.Reads, r(t.Context(), p))
				}
				h.mu.Lock()
				defer h.mu.Unlock()
				s.Puts, s.Gets, s.V1Gets = h.puts, h.gets, h.v1Gets
				return s
			}
			sdk := run(func(e string) reader { return sdkReader(newSDK(e, tt.allowV1)) })
			ours := run(func(e string) reader { return ourReader(NewClient(e, tt.allowV1)) })
			if d := cmp.Diff(sdk, ours); d != "" {
				t.Errorf("(-SDK +lifeboat):\n%s", d)
			}
			if d := cmp.Diff(tt.want, ours); d != "" {
				t.Errorf("lifeboat (-want +got):\n%s", d)
			}
		})
	}
}

// TestSDKTokenExpiry: both read with their token until the time the
// service granted runs out, then ask for a new one. The SDK's clock
// cannot be injected, so the granted TTL is one second and the test waits
// it out on the wall clock; lifeboat's client (whose clock can be) is
// also held to its own margin: it renews a quarter of a short TTL, at most
// a minute, before the end.
func TestSDKTokenExpiry(t *testing.T) {
	docs := map[string]string{PathInstanceID: testInstance}
	type server struct {
		h   *diffIMDS
		srv *httptest.Server
	}
	start := func() server {
		h := &diffIMDS{script: script{requireV2: true, grantTTL: "1"}, docs: docs}
		return server{h, httptest.NewServer(h)}
	}
	sdkSrv, ourSrv := start(), start()
	defer sdkSrv.srv.Close()
	defer ourSrv.srv.Close()
	sdk := sdkReader(newSDK(sdkSrv.srv.URL, false))
	client := NewClient(ourSrv.srv.URL, false)
	ours := ourReader(client)
	puts := func(s server) int { s.h.mu.Lock(); defer s.h.mu.Unlock(); return s.h.puts }
	for range 2 {
		sdk(t.Context(), PathInstanceID)
		ours(t.Context(), PathInstanceID)
	}
	if s, o := puts(sdkSrv), puts(ourSrv); s != 1 || o != 1 {
		t.Errorf("token PUTs for two reads within the TTL: SDK %d, lifeboat %d; want 1", s, o)
	}
	time.Sleep(1100 * time.Millisecond)
	for _, r := range []read{sdk(t.Context(), PathInstanceID), ours(t.Context(), PathInstanceID)} {
		if r.Body != testInstance {
			t.Errorf("read after the TTL: %+v", r)
		}
	}
	if s, o := puts(sdkSrv), puts(ourSrv); s != 2 || o != 2 {
		t.Errorf("token PUTs after the TTL: SDK %d, lifeboat %d; want 2", s, o)
	}
	// lifeboat's margin, on its injected clock: a 1 s token is renewed
	// after 750 ms.
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	client.now = func() time.Time { return now }
	client.dropToken()
	ours(t.Context(), PathInstanceID)
	now = now.Add(700 * time.Millisecond)
	ours(t.Context(), PathInstanceID)
	if o := puts(ourSrv); o != 3 {
		t.Errorf("token PUTs 700 ms into a 1 s token: %d, want 3 (no new one)", o)
	}
	now = now.Add(100 * time.Millisecond)
	ours(t.Context(), PathInstanceID)
	if o := puts(ourSrv); o != 4 {
		t.Errorf("token PUTs 800 ms into a 1 s token: %d, want 4 (renewed)", o)
	}
}

// TestSDKDifferences: where the two differ on purpose.
func TestSDKDifferences(t *testing.T) {
	long := strings.Repeat("x", maxBody+100)
	docs := map[string]string{PathInstanceID: testInstance, PathSpot: long}
	serve := func() (*diffIMDS, *httptest.Server) {
		h := &diffIMDS{script: script{requireV2: true}, docs: docs}
		return h, httptest.NewServer(h)
	}

	// The token's TTL: the SDK asks for 5 minutes, lifeboat for 6 hours
	// (the most the service grants): one PUT every 6 hours on every node
	// instead of one every 5 minutes; a token is only as good as the
	// network position it was asked from, whatever its TTL.
	// The length of a body: lifeboat reads at most maxBody (1 MiB) of a
	// document, the SDK all of it: the documents lifeboat reads are a few
	// hundred bytes, and a node must not buffer whatever a broken service
	// sends.
	sdkH, sdkSrv := serve()
	defer sdkSrv.Close()
	ourH, ourSrv := serve()
	defer ourSrv.Close()
	sdkRead := sdkReader(newSDK(sdkSrv.URL, false))(t.Context(), PathSpot)
	ourRead := ourReader(NewClient(ourSrv.URL, false))(t.Context(), PathSpot)
	if len(sdkRead.Body) != len(long) || len(ourRead.Body) != maxBody {
		t.Errorf("a %d-byte body: SDK read %d, lifeboat %d; want all of it and %d", len(long), len(sdkRead.Body), len(ourRead.Body), maxBody)
	}
	if sdkH.askedTTL != "300" || ourH.askedTTL != strconv.Itoa(int(tokenTTL.Seconds())) {
		t.Errorf("TTL asked: SDK %s, lifeboat %s; want 300 and 21600", sdkH.askedTTL, ourH.askedTTL)
	}

	// An endpoint's path: both read /latest/... whatever path the endpoint
	// has (the SDK replaces it); not a difference, but easily taken for one.
	sdkH, sdkSrv2 := serve()
	defer sdkSrv2.Close()
	ourH, ourSrv2 := serve()
	defer ourSrv2.Close()
	sdkReader(newSDK(sdkSrv2.URL+"/prefix/", false))(t.Context(), PathInstanceID)
	ourReader(NewClient(ourSrv2.URL+"/prefix/", false))(t.Context(), PathInstanceID)
	if want := metadataPrefix + PathInstanceID; sdkH.lastPath != want || ourH.lastPath != want {
		t.Errorf("path read with an endpoint path: SDK %s, lifeboat %s; want %s", sdkH.lastPath, ourH.lastPath, want)
	}
}

// TestSDKOverTLSAndIPv6: an https endpoint and an IPv6 one (the
// environment's, as AWS_EC2_METADATA_SERVICE_ENDPOINT=http://[::1]:port)
// give both clients the same body.
func TestSDKOverTLSAndIPv6(t *testing.T) {
	docs := map[string]string{PathInstanceID: testInstance}
	t.Run("https", func(t *testing.T) {
		srv := httptest.NewUnstartedServer(&diffIMDS{script: script{requireV2: true}, docs: docs})
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake refused below
		srv.StartTLS()
		defer srv.Close()
		sdk := awsimds.New(awsimds.Options{Endpoint: srv.URL, ClientEnableState: awsimds.ClientEnabled, EnableFallback: aws.FalseTernary,
			HTTPClient: srv.Client()})
		ours := NewClient(srv.URL, false)
		ours.target.tls.RootCAs = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
		s, o := sdkReader(sdk)(t.Context(), PathInstanceID), ourReader(ours)(t.Context(), PathInstanceID)
		if s != o || o.Body != testInstance {
			t.Errorf("over TLS: SDK %+v, lifeboat %+v", s, o)
		}
		// Without the test's CA neither trusts the server.
		plain := NewClient(srv.URL, false)
		if _, err := plain.Get(t.Context(), PathInstanceID); err == nil {
			t.Error("lifeboat read from a server it cannot verify")
		}
	})
	t.Run("IPv6 from the environment", func(t *testing.T) {
		ln, err := net.Listen("tcp", "[::1]:0")
		if err != nil {
			t.Fatalf("listening on [::1] (this test needs IPv6 loopback): %v", err)
		}
		srv := httptest.NewUnstartedServer(&diffIMDS{script: script{requireV2: true}, docs: docs})
		srv.Listener = ln
		srv.Start()
		defer srv.Close()
		env := map[string]string{EnvEndpoint: "http://" + ln.Addr().String()}
		isolateSDK(t, env)
		cfg, err := awsconfig.LoadDefaultConfig(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		sdk := awsimds.NewFromConfig(cfg, func(o *awsimds.Options) {
			o.ClientEnableState, o.EnableFallback = awsimds.ClientEnabled, aws.FalseTernary
		})
		endpoint, err := ResolveEndpoint("", func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		s, o := sdkReader(sdk)(t.Context(), PathInstanceID), ourReader(NewClient(endpoint, false))(t.Context(), PathInstanceID)
		if s != o || o.Body != testInstance {
			t.Errorf("over IPv6: SDK %+v, lifeboat %+v", s, o)
		}
	})
}
