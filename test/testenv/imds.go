package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// IMDSScenario selects what the metadata mock (amazon-ec2-metadata-mock)
// announces besides the static instance metadata, which is always served.
type IMDSScenario string

const (
	// IMDSQuiet announces nothing: no Spot notice, no rebalance
	// recommendation, no scheduled event (404s), target-lifecycle-state
	// InService. The zero Scenario means IMDSQuiet.
	IMDSQuiet IMDSScenario = "quiet"
	// IMDSSpot serves spot/instance-action and spot/termination-time
	// (SpotAction at SpotTime) from After on; a rebalance recommendation too
	// when Rebalance is set.
	IMDSSpot IMDSScenario = "spot"
	// IMDSRebalance serves only events/recommendations/rebalance, from After on.
	IMDSRebalance IMDSScenario = "rebalance"
	// IMDSEvents serves one scheduled maintenance event
	// (events/maintenance/scheduled) from After on.
	IMDSEvents IMDSScenario = "events"
	// IMDSASGLifecycle serves autoscaling/target-lifecycle-state: InService,
	// then Terminated from After on. The mock cannot serve other values
	// (Warmed:*); once Terminated it stays so until Restart.
	IMDSASGLifecycle IMDSScenario = "asglifecycle"
)

// never is a delay that outlasts any test (ten years, in seconds).
const never = 10 * 365 * 24 * 3600

// IMDSOptions configure one run of the metadata mock. Times the mock counts
// "after start" are whole seconds from its (re)start.
type IMDSOptions struct {
	Scenario IMDSScenario
	// IMDSv2Only refuses requests without a session token (401), as an
	// instance with HttpTokens=required does.
	IMDSv2Only bool
	// After is how long after (re)start the scenario's notice appears
	// (404 until then); At, when set, is an absolute time and wins.
	After time.Duration
	At    time.Time

	// SpotAction is terminate (default), stop or hibernate.
	SpotAction string
	// SpotTime is the time in the notice; zero means request time + 2 min.
	SpotTime time.Time
	// Rebalance (IMDSSpot) also serves a rebalance recommendation from
	// RebalanceAfter on.
	Rebalance      bool
	RebalanceAfter time.Duration
	// RebalanceNoticeTime is the recommendation's noticeTime; zero means
	// request time.
	RebalanceNoticeTime time.Time

	// EventCode is system-reboot (default), instance-reboot,
	// system-maintenance, instance-retirement or instance-stop.
	EventCode string
	// EventState is active (default), completed or canceled.
	EventState string
	// EventID defaults to instance-event-1234567890abcdef0.
	EventID string
	// EventNotBefore (default: start), EventNotAfter (start + 7 days) and
	// EventNotBeforeDeadline (start + 9 days) bound the event window.
	EventNotBefore, EventNotAfter, EventNotBeforeDeadline time.Time

	// Static metadata overrides; empty keeps the mock's defaults
	// (i-1234567890abcdef0, ip-172-16-34-43.ec2.internal, us-east-1a, ...).
	// InstanceID, AZ, Region and InstanceType also go into the instance
	// identity document.
	InstanceID, LocalHostname, LocalIPv4, AZ, Region, InstanceType string

	// Args are appended verbatim to the mock's command line.
	Args []string

	// pickPort hands out the mock's port (nil: FreePort); a test takes it
	// itself to provoke the race StartOnFreePorts survives.
	pickPort PortPicker
}

// IMDS is a running amazon-ec2-metadata-mock on its own loopback port.
type IMDS struct {
	// URL is the endpoint, http://127.0.0.1:PORT (no trailing slash); point
	// the SDK's imds client (or AWS_EC2_METADATA_SERVICE_ENDPOINT) at it.
	URL string

	bin    string
	host   string // the address it listens on: 127.0.0.1, or in ns
	port   int
	logDir string
	ns     *Netns // nil: the host's network

	mu   sync.Mutex
	proc *Process
	runs int
}

// StartIMDS starts the metadata mock for t; it is stopped in t's cleanup and
// its log is printed when t fails. A missing binary fails t.
func StartIMDS(t testing.TB, opts IMDSOptions) *IMDS {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := NewIMDS(ctx, t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			p := m.Proc()
			fmt.Fprintf(failureLog(t), "---- %s log (%s), last 40 lines ----\n%s\n", p.Name, p.LogPath, p.Tail(40))
		}
		m.Close()
	})
	return m
}

// NewIMDS starts the metadata mock on a free loopback port, logging into
// logDir. The caller must call Close.
func NewIMDS(ctx context.Context, logDir string, opts IMDSOptions) (*IMDS, error) {
	bin, err := BinPath("ec2-metadata-mock")
	if err != nil {
		return nil, err
	}
	m := &IMDS{bin: bin, host: "127.0.0.1", logDir: logDir}
	_, _, err = StartOnFreePorts(ctx, "ec2-metadata-mock", 1, opts.pickPort, func(ctx context.Context, _ int, ports []int) (*Process, error) {
		m.URL, m.port = fmt.Sprintf("http://127.0.0.1:%d", ports[0]), ports[0]
		err := m.start(ctx, opts)
		return m.Proc(), err
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// StartIMDSIn starts the metadata mock inside ns, listening on host:port
// there (169.254.169.254:80: the address lifeboat reads with no endpoint
// set), for t, as StartIMDS does. URL is that address, reachable only from
// inside ns.
func StartIMDSIn(t testing.TB, ns *Netns, host string, port int, opts IMDSOptions) *IMDS {
	t.Helper()
	bin, err := BinPath("ec2-metadata-mock")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := &IMDS{URL: "http://" + net.JoinHostPort(host, strconv.Itoa(port)), bin: bin, host: host, port: port, logDir: t.TempDir(), ns: ns}
	t.Cleanup(func() {
		if p := m.Proc(); p != nil && t.Failed() {
			fmt.Fprintf(failureLog(t), "---- %s log (%s), last 40 lines ----\n%s\n", p.Name, p.LogPath, p.Tail(40))
		}
		m.Close()
	})
	if err := m.start(ctx, opts); err != nil {
		t.Fatal(err)
	}
	return m
}

// Restart replaces the running mock with one configured by opts, on the
// same port (the mock has no runtime API). Its clock restarts: After counts
// from now. It takes about 50 ms.
func (m *IMDS) Restart(ctx context.Context, opts IMDSOptions) error {
	m.mu.Lock()
	p := m.proc
	m.mu.Unlock()
	if p != nil {
		p.Kill()
	}
	return m.start(ctx, opts)
}

// Close stops the mock.
func (m *IMDS) Close() {
	if p := m.Proc(); p != nil {
		p.Kill()
	}
}

// Proc returns the current mock process.
func (m *IMDS) Proc() *Process {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc
}

func (m *IMDS) start(ctx context.Context, opts IMDSOptions) error {
	m.mu.Lock()
	m.runs++
	run := m.runs
	m.mu.Unlock()

	args, cfg, err := imdsArgs(opts)
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(m.logDir, fmt.Sprintf("imds-%d.json", run))
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding metadata mock config: %w", err)
	}
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		return fmt.Errorf("writing metadata mock config: %w", err)
	}
	args = append(args, "-n", m.host, "-p", strconv.Itoa(m.port), "-c", cfgPath)
	args = append(args, opts.Args...)
	bin := m.bin
	if m.ns != nil {
		bin, args = m.ns.Command(bin, args...)
	}
	// HOME keeps a developer's ~/aemm-config.json out.
	p, err := StartProcess(fmt.Sprintf("ec2-metadata-mock-%d", run), bin, args, []string{"HOME=" + m.logDir}, m.logDir)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.proc = p
	m.mu.Unlock()
	wait := waitIMDS
	if m.ns != nil {
		wait = waitListening(m.host, m.port)
	}
	// The token endpoint answers whatever the scenario and IMDSv2 setting.
	if err := wait(ctx, p, m.URL); err != nil {
		p.Kill()
		return fmt.Errorf("ec2-metadata-mock did not start (args %v): %w", args, err)
	}
	return nil
}

// waitIMDS polls the token endpoint until the mock answers.
func waitIMDS(ctx context.Context, p *Process, url string) error {
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("%s exited while starting (%v); log tail:\n%s", p.Name, err, p.Tail(30))
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, url+"/latest/api/token", nil)
		if err != nil {
			return err
		}
		req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "60")
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last error: %v)", url, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// waitListening waits until the process listens on host:port (IPv4),
// as its own network namespace's /proc/PID/net/tcp shows: the test
// cannot dial into the namespace.
func waitListening(host string, port int) func(ctx context.Context, p *Process, url string) error {
	ip := net.ParseIP(host).To4()
	// /proc/net/tcp: the address as a little-endian hex word, the port
	// as hex; state 0A is LISTEN.
	local := fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], port)
	return func(ctx context.Context, p *Process, url string) error {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if exited, err := p.Exited(); exited {
				return fmt.Errorf("%s exited while starting (%v); log tail:\n%s", p.Name, err, p.Tail(30))
			}
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", p.cmd.Process.Pid))
			for _, line := range strings.Split(string(b), "\n") {
				if f := strings.Fields(line); len(f) > 3 && f[1] == local && f[3] == "0A" {
					return nil
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s to listen on %s: %w", p.Name, url, ctx.Err())
			case <-tick.C:
			}
		}
	}
}

func seconds(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// imdsArgs translates opts into the mock's command line and config file.
func imdsArgs(opts IMDSOptions) ([]string, map[string]any, error) {
	var args []string
	cfg := map[string]any{}
	// trigger sets when the scenario's notice appears, with the flags the
	// mock uses for it.
	trigger := func(delayFlag, timeFlag string) {
		if !opts.At.IsZero() {
			args = append(args, "--"+timeFlag+"="+rfc3339(opts.At))
			return
		}
		args = append(args, "--"+delayFlag+"="+seconds(opts.After))
	}
	switch opts.Scenario {
	case "", IMDSQuiet:
		// The root command serves every path; push every notice out of reach.
		args = append(args,
			fmt.Sprintf("--mock-delay-sec=%d", never),
			fmt.Sprintf("--rebalance-delay-sec=%d", never),
			fmt.Sprintf("--asg-termination-delay-sec=%d", never))
	case IMDSSpot:
		args = append(args, "spot")
		trigger("mock-delay-sec", "mock-trigger-time")
		if opts.Rebalance {
			args = append(args, "--rebalance-delay-sec="+seconds(opts.RebalanceAfter))
		} else {
			args = append(args, fmt.Sprintf("--rebalance-delay-sec=%d", never))
		}
		if opts.SpotAction != "" {
			args = append(args, "--action="+opts.SpotAction)
		}
		if !opts.SpotTime.IsZero() {
			args = append(args, "--time="+rfc3339(opts.SpotTime))
		}
		if !opts.RebalanceNoticeTime.IsZero() {
			args = append(args, "--rebalance-rec-time="+rfc3339(opts.RebalanceNoticeTime))
		}
	case IMDSRebalance:
		args = append(args, "spot", fmt.Sprintf("--mock-delay-sec=%d", never))
		trigger("rebalance-delay-sec", "rebalance-trigger-time")
		if !opts.RebalanceNoticeTime.IsZero() {
			args = append(args, "--rebalance-rec-time="+rfc3339(opts.RebalanceNoticeTime))
		}
	case IMDSEvents:
		args = append(args, "events")
		trigger("mock-delay-sec", "mock-trigger-time")
		if opts.EventCode != "" {
			args = append(args, "--code="+opts.EventCode)
		}
		if opts.EventState != "" {
			args = append(args, "--state="+opts.EventState)
		}
		if !opts.EventNotBefore.IsZero() {
			args = append(args, "--not-before="+rfc3339(opts.EventNotBefore))
		}
		if !opts.EventNotAfter.IsZero() {
			args = append(args, "--not-after="+rfc3339(opts.EventNotAfter))
		}
		if !opts.EventNotBeforeDeadline.IsZero() {
			args = append(args, "--not-before-deadline="+rfc3339(opts.EventNotBeforeDeadline))
		}
	case IMDSASGLifecycle:
		args = append(args, "asglifecycle")
		if !opts.At.IsZero() {
			// The mock declares --asg-termination-trigger-time as an int
			// flag; the config file takes the RFC 3339 string it expects.
			cfg["asg-termination-trigger-time"] = rfc3339(opts.At)
		} else {
			args = append(args, "--asg-termination-delay-sec="+seconds(opts.After))
		}
	default:
		return nil, nil, fmt.Errorf("unknown IMDS scenario %q", opts.Scenario)
	}
	if opts.IMDSv2Only {
		args = append(args, "--imdsv2")
	}

	values := map[string]any{}
	identity := map[string]any{}
	set := func(v string, key string, idKey string) {
		if v == "" {
			return
		}
		if key != "" {
			values[key] = v
		}
		if idKey != "" {
			identity[idKey] = v
		}
	}
	set(opts.InstanceID, "instance-id", "instanceId")
	set(opts.LocalHostname, "local-hostname", "")
	set(opts.LocalHostname, "hostname", "")
	set(opts.LocalHostname, "mac-local-hostname", "")
	set(opts.LocalIPv4, "local-ipv4", "privateIp")
	set(opts.AZ, "placement-availability-zone", "availabilityZone")
	set(opts.Region, "placement-region", "region")
	set(opts.InstanceType, "instance-type", "instanceType")
	set(opts.EventID, "event-id", "")
	if len(values) > 0 {
		cfg["metadata"] = map[string]any{"values": values}
	}
	if len(identity) > 0 {
		cfg["dynamic"] = map[string]any{"values": map[string]any{"instance-identity-document": identity}}
	}
	return args, cfg, nil
}
