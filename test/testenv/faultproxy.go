package testenv

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Protocol is the wire protocol of the AWS API behind a FaultProxy: it
// decides how the action of a request is read and the shape of the errors
// the proxy injects.
type Protocol string

const (
	// ProtocolQuery is the AWS query protocol (Auto Scaling, EC2): the
	// action is the form field Action, errors are XML ErrorResponse bodies.
	ProtocolQuery Protocol = "query"
	// ProtocolJSON is AWS JSON 1.0 (SQS): the action is the suffix of the
	// X-Amz-Target header, errors are JSON bodies with __type.
	ProtocolJSON Protocol = "json"
)

// Fault is a failure a FaultProxy injects instead of forwarding a request.
type Fault string

const (
	// FaultThrottle answers HTTP 400 with the service's throttling code:
	// Throttling (query protocol) or ThrottlingException (JSON protocol).
	FaultThrottle Fault = "throttle"
	// FaultServerError answers HTTP 500 InternalFailure.
	FaultServerError Fault = "server-error"
	// FaultTimeout holds the request for FaultProxyOptions.Hang without an
	// answer, then closes the connection (an idle timeout somewhere on the
	// path).
	FaultTimeout Fault = "timeout"
	// FaultReset closes the connection with a TCP RST before any answer.
	FaultReset Fault = "reset"
)

// AllFaults lists every Fault.
var AllFaults = []Fault{FaultThrottle, FaultServerError, FaultTimeout, FaultReset}

// Stage says when FaultProxyOptions.Intercept is called.
type Stage int

const (
	// BeforeForward: the request arrived and is about to be forwarded.
	BeforeForward Stage = iota
	// AfterResponse: the target answered; the answer is about to be returned.
	AfterResponse
)

// Exchange is one request (and, after forwarding, its answer) seen by a
// FaultProxy.
type Exchange struct {
	Action string
	Stage  Stage
	// Remote is the client's address (host:port) as the proxy saw it.
	Remote   string
	Request  []byte
	Status   int    // AfterResponse only
	Response []byte // AfterResponse only
}

// FaultProxyOptions configure a FaultProxy. Only Target and Protocol are
// required.
type FaultProxyOptions struct {
	// Target is the URL requests are forwarded to (moto, the Auto Scaling
	// simulator).
	Target   string
	Protocol Protocol
	// Rate is the probability (0..1) that a request gets a fault instead of
	// being forwarded. Faulted requests are drawn at random, but the count
	// stays within one of Rate × requests.
	Rate float64
	// Faults are used in turn (the first faulted request gets the first,
	// and so on), so that every kind is injected; empty means AllFaults.
	Faults []Fault
	// Actions restricts faults to these actions; empty means every action.
	Actions []string
	// Seed makes the choice of faulted requests reproducible (given the
	// same order of requests).
	Seed uint64
	// Hang is how long FaultTimeout holds a request; default 2 s.
	Hang time.Duration
	// Intercept, if not nil, sees every request that is not faulted before
	// it is forwarded and its answer before it is returned. Returning false
	// drops the connection instead of going on (the request is then not
	// forwarded, or its answer is lost). It may block, for example to kill
	// the client.
	Intercept func(Exchange) bool
	// Listen is the address the proxy listens on; default "127.0.0.1:0".
	// "0.0.0.0:0" lets pods on a real node reach it on their gateway
	// (RealNode.Gateway) with their own address as Exchange.Remote.
	Listen string
}

// FaultProxy is a reverse proxy for an AWS API that injects faults at a
// configured rate and counts requests by action. It serves on a loopback
// port until Close.
type FaultProxy struct {
	o      FaultProxyOptions
	target *url.URL
	srv    *http.Server
	ln     net.Listener
	client *http.Client

	mu        sync.Mutex
	rng       *mrand.Rand
	rate      float64
	nfaults   int
	eligible  int
	intercept func(Exchange) bool
	requests  map[string]int
	faults    map[Fault]int
	byAction  map[string]map[Fault]int
}

// StartFaultProxy starts a FaultProxy on a free port (FaultProxyOptions.Listen).
func StartFaultProxy(o FaultProxyOptions) (*FaultProxy, error) {
	if o.Protocol != ProtocolQuery && o.Protocol != ProtocolJSON {
		return nil, fmt.Errorf("fault proxy: unknown protocol %q", o.Protocol)
	}
	target, err := url.Parse(o.Target)
	if err != nil || target.Host == "" {
		return nil, fmt.Errorf("fault proxy: target %q is not a URL", o.Target)
	}
	if len(o.Faults) == 0 {
		o.Faults = AllFaults
	}
	if o.Hang <= 0 {
		o.Hang = 2 * time.Second
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("fault proxy: listening: %w", err)
	}
	p := &FaultProxy{
		o: o, target: target, ln: ln,
		client:    &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		rng:       mrand.New(mrand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)),
		rate:      o.Rate,
		intercept: o.Intercept,
		requests:  map[string]int{}, faults: map[Fault]int{}, byAction: map[string]map[Fault]int{},
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }() // ends with Close
	return p, nil
}

// URL is the proxy's address, to give the client as its endpoint.
func (p *FaultProxy) URL() string { return "http://" + p.ln.Addr().String() }

// Close stops the proxy and drops the connections it holds.
func (p *FaultProxy) Close() error {
	err := p.srv.Close()
	p.client.CloseIdleConnections()
	return err
}

// SetRate changes the fault rate.
func (p *FaultProxy) SetRate(rate float64) {
	p.mu.Lock()
	p.rate = rate
	p.mu.Unlock()
}

// SetIntercept replaces FaultProxyOptions.Intercept (nil: none).
func (p *FaultProxy) SetIntercept(f func(Exchange) bool) {
	p.mu.Lock()
	p.intercept = f
	p.mu.Unlock()
}

func (p *FaultProxy) currentIntercept() func(Exchange) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.intercept
}

// ProxyStats are a FaultProxy's counts since it started.
type ProxyStats struct {
	// Requests counts every request received, by action.
	Requests map[string]int
	// Faults counts injected faults by kind; ByAction by action and kind.
	Faults   map[Fault]int
	ByAction map[string]map[Fault]int
}

// Total returns the number of requests received.
func (s ProxyStats) Total() int {
	n := 0
	for _, v := range s.Requests {
		n += v
	}
	return n
}

// TotalFaults returns the number of faults injected.
func (s ProxyStats) TotalFaults() int {
	n := 0
	for _, v := range s.Faults {
		n += v
	}
	return n
}

// Stats returns a copy of the counts.
func (p *FaultProxy) Stats() ProxyStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := ProxyStats{Requests: map[string]int{}, Faults: map[Fault]int{}, ByAction: map[string]map[Fault]int{}}
	for k, v := range p.requests {
		s.Requests[k] = v
	}
	for k, v := range p.faults {
		s.Faults[k] = v
	}
	for a, m := range p.byAction {
		s.ByAction[a] = map[Fault]int{}
		for k, v := range m {
			s.ByAction[a][k] = v
		}
	}
	return s
}

// ServeHTTP handles one request: a fault, or forwarding.
func (p *FaultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	action := p.action(r, body)
	fault, intercept := p.decide(action)
	switch fault {
	case "":
	case FaultThrottle, FaultServerError:
		p.writeError(w, fault)
		return
	case FaultTimeout:
		select {
		case <-r.Context().Done():
		case <-time.After(p.o.Hang):
		}
		drop(w, false)
		return
	case FaultReset:
		drop(w, true)
		return
	}
	if intercept != nil && !intercept(Exchange{Action: action, Stage: BeforeForward, Remote: r.RemoteAddr, Request: body}) {
		drop(w, true)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target.ResolveReference(&url.URL{Path: r.URL.Path, RawQuery: r.URL.RawQuery}).String(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	out.Host = p.target.Host
	resp, err := p.client.Do(out)
	if err != nil {
		drop(w, true)
		return
	}
	respBody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		drop(w, true)
		return
	}
	// Read again: a long poll may outlive the intercept it started under.
	if intercept := p.currentIntercept(); intercept != nil && !intercept(Exchange{Action: action, Stage: AfterResponse, Remote: r.RemoteAddr, Request: body, Status: resp.StatusCode, Response: respBody}) {
		drop(w, true)
		return
	}
	for k, vs := range resp.Header {
		if strings.EqualFold(k, "Content-Length") {
			continue
		}
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(respBody)
}

// decide counts the request and picks its fault ("" for none).
func (p *FaultProxy) decide(action string) (Fault, func(Exchange) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests[action]++
	if p.rate <= 0 || (len(p.o.Actions) > 0 && !slices.Contains(p.o.Actions, action)) {
		return "", p.intercept
	}
	// Random, but never more than one fault away from rate × requests, so
	// that a short scenario still gets its share of every kind.
	p.eligible++
	expected := float64(p.eligible) * p.rate
	switch {
	case float64(p.nfaults) < expected-1:
	case float64(p.nfaults)+1 > expected+1, p.rng.Float64() >= p.rate:
		return "", p.intercept
	}
	f := p.o.Faults[p.nfaults%len(p.o.Faults)]
	p.nfaults++
	p.faults[f]++
	if p.byAction[action] == nil {
		p.byAction[action] = map[Fault]int{}
	}
	p.byAction[action][f]++
	return f, nil
}

func (p *FaultProxy) action(r *http.Request, body []byte) string {
	if p.o.Protocol == ProtocolJSON {
		t := r.Header.Get("X-Amz-Target")
		if i := strings.LastIndexByte(t, '.'); i >= 0 {
			return t[i+1:]
		}
		return t
	}
	if a := r.URL.Query().Get("Action"); a != "" {
		return a
	}
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return ""
	}
	return v.Get("Action")
}

// writeError answers in the protocol's error shape.
func (p *FaultProxy) writeError(w http.ResponseWriter, f Fault) {
	status, code, typ, msg := http.StatusBadRequest, "Throttling", "Sender", "Rate exceeded"
	if f == FaultServerError {
		status, code, typ, msg = http.StatusInternalServerError, "InternalFailure", "Receiver", "injected internal failure"
	}
	id := requestID()
	w.Header().Set("X-Amzn-Requestid", id)
	if p.o.Protocol == ProtocolJSON {
		if code == "Throttling" {
			code = "ThrottlingException"
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		// SQS is awsQueryCompatible: the SDK reads the code from this header.
		w.Header().Set("X-Amzn-Query-Error", code+";"+typ)
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"__type":"com.amazonaws.sqs#%s","message":%q}`, code, msg)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0"?><ErrorResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/"><Error><Type>%s</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>%s</RequestId></ErrorResponse>`, typ, code, msg, id)
}

// drop closes the client's connection without an answer; with reset, with
// a TCP RST (SO_LINGER 0).
func drop(w http.ResponseWriter, reset bool) {
	hj, ok := w.(http.Hijacker)
	if !ok { // HTTP/2: no hijacking; a 502 is the closest failure
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tcp, ok := conn.(*net.TCPConn); ok && reset {
		_ = tcp.SetLinger(0)
	}
	_ = conn.Close()
}

func requestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
