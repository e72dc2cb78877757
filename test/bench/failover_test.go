package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"lifeboat.dev/lifeboat/test/testenv"
)

// failoverMode reads LIFEBOAT_BENCH_FAILOVER: "" (one replica, no leader
// election), none, kill or term.
func failoverMode(b *testing.B, kind string) string {
	mode := os.Getenv("LIFEBOAT_BENCH_FAILOVER")
	switch mode {
	case "":
		return ""
	case failoverNone, failoverKill, failoverTerm:
	default:
		b.Fatalf("LIFEBOAT_BENCH_FAILOVER=%q: want %s, %s or %s", mode, failoverNone, failoverKill, failoverTerm)
	}
	if kind != kindSpotQueued {
		b.Fatalf("LIFEBOAT_BENCH_FAILOVER runs with LIFEBOAT_BENCH_KIND=%s only", kindSpotQueued)
	}
	return mode
}

// auditArgs writes the audit policy and returns the audit log's path and
// the API server flags that write it.
func auditArgs(b *testing.B) (string, []string) {
	dir := b.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		b.Fatal(err)
	}
	log := filepath.Join(dir, "audit.log")
	return log, []string{"--audit-policy-file=" + policy, "--audit-log-path=" + log, "--audit-log-format=json", "--audit-log-maxbackup=0"}
}

// pair is two lifeboat replicas with leader election; procs[0] leads at
// the start. Each talks to SQS through a proxy of its own that records
// its calls in sqs.
type pair struct {
	mode    string
	procs   [2]*testenv.Process
	urls    [2]string
	proxies [2]*testenv.FaultProxy
	sqs     *sqsLog

	fired     bool
	lost      bool // nobody signalled the leader, but its process exited: its Lease lost
	signalAt  time.Time
	cordoned  int
	snapshot  map[string]float64 // the leader's lifeboat_kube_requests_total just before the signal
	mu        sync.Mutex
	endAt     time.Time
	newLeader time.Time
}

// startPair starts replica a, waits until it leads, then starts b (the
// standby). args are lifeboat's flags but for --aws-endpoint, --listen and
// leader election's, "run" first.
func startPair(ctx context.Context, b *testing.B, mode, bin, dir string, procEnv, args []string, motoEndpoint, endpoints string, i int) *pair {
	p := &pair{mode: mode, sqs: newSQSLog()}
	for r, name := range []string{"a", "b"} {
		proxy, err := testenv.StartFaultProxy(testenv.FaultProxyOptions{Target: motoEndpoint, Protocol: testenv.ProtocolJSON,
			Intercept: func(ex testenv.Exchange) bool {
				if ex.Stage == testenv.AfterResponse {
					p.sqs.record(name, ex.Action, ex.Status, ex.Request, ex.Response, time.Now())
				}
				return true
			}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = proxy.Close() })
		p.proxies[r] = proxy
		port, err := testenv.FreePort()
		if err != nil {
			b.Fatal(err)
		}
		p.urls[r] = fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
		id := fmt.Sprintf("lifeboat-harness-%d-%s", i, name)
		full := append(slices.Clone(args), []string{"--aws-endpoint", endpoints + ",sqs=" + proxy.URL(), "--listen", fmt.Sprintf("127.0.0.1:%d", port),
			// The Lease (and the failover journal beside it) in the pod's
			// namespace, lifeboat's default: the chart's release namespace,
			// the only one its FlowSchemas match. The journal's writes then
			// go with the node writes; in the fleet's namespace, as before
			// 2026-11-27 18:30 UTC, they waited in the drains' flow. (The
			// Lease's requests were in the leader-election priority level
			// either way: Kubernetes' own system-leader-election FlowSchema
			// takes any kube-system ServiceAccount's leases.)
			"--leader-elect=true", "--lease-name", fmt.Sprintf("bench-%d", i), "--pod-name", id, "--pod-namespace", benchNamespace,
		}...)
		proc, err := testenv.StartProcess(id, bin, full, procEnv, dir)
		if err != nil {
			b.Fatal(err)
		}
		p.procs[r] = proc
		b.Cleanup(func() {
			if b.Failed() {
				b.Logf("---- %s log ----\n%s", proc.Name, proc.Tail(60))
			}
			proc.Stop()
		})
		if err := testenv.WaitHTTP(ctx, proc, nil, p.urls[r]); err != nil {
			b.Fatal(err)
		}
		if r == 0 {
			deadline := time.Now().Add(30 * time.Second)
			for gauge(b, p.urls[0], "lifeboat_leader") != 1 {
				if time.Now().After(deadline) {
					b.Fatal("replica a did not lead within 30 s")
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	time.Sleep(time.Second)
	if gauge(b, p.urls[1], "lifeboat_leader") != 0 || gauge(b, p.urls[0], "lifeboat_leader") != 1 {
		b.Fatal("after the standby started, a does not lead alone")
	}
	return p
}

// pids are both replicas' process ids.
func (p *pair) pids() []int { return []int{p.procs[0].Pid(), p.procs[1].Pid()} }

// current is the replica whose process and metrics the harness reads: the
// leader, then the standby once the leader was signalled.
func (p *pair) current() (*testenv.Process, string) {
	if p.fired {
		return p.procs[1], p.urls[1]
	}
	return p.procs[0], p.urls[0]
}

// requests sums both replicas' lifeboat_kube_requests_total by verb.
func (p *pair) requests(b *testing.B) map[string]float64 {
	sum := map[string]float64{}
	for r, url := range p.urls {
		if p.fired && r == 0 {
			for k, v := range p.snapshot {
				sum[k] += v
			}
			continue
		}
		for k, v := range CountersByLabel(scrape(b, url), "lifeboat_kube_requests_total", "verb") {
			sum[k] += v
		}
	}
	return sum
}

// maybeFire signals the leader once half the n nodes are cordoned (kill:
// SIGKILL, waiting for its end; term: SIGTERM, its end watched) and starts
// watching the standby's leader gauge.
func (p *pair) maybeFire(ctx context.Context, b *testing.B, cordoned, n int) {
	if p.fired {
		return
	}
	if p.mode == failoverNone {
		// Nobody signals the leader; if it exits anyway (it lost its Lease
		// to the storm), the standby is followed as after a kill, and the
		// report says when.
		if exited, _ := p.procs[0].Exited(); exited {
			p.lost, p.signalAt, p.cordoned, p.fired = true, time.Now(), cordoned, true
			p.mu.Lock()
			p.endAt = p.signalAt
			p.mu.Unlock()
			p.watchStandby(ctx)
		}
		return
	}
	if cordoned < n/2 {
		return
	}
	p.snapshot = CountersByLabel(scrape(b, p.urls[0]), "lifeboat_kube_requests_total", "verb")
	p.signalAt, p.cordoned, p.fired = time.Now(), cordoned, true
	p.watchStandby(ctx)
	leader := p.procs[0]
	if p.mode == failoverKill {
		leader.Kill()
		p.mu.Lock()
		p.endAt = time.Now()
		p.mu.Unlock()
		return
	}
	if err := syscall.Kill(leader.Pid(), syscall.SIGTERM); err != nil {
		b.Fatal(err)
	}
	go func() {
		for ctx.Err() == nil {
			if done, _ := leader.Exited(); done {
				p.mu.Lock()
				p.endAt = time.Now()
				p.mu.Unlock()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
}

// watchStandby notes when the standby's leader gauge first reads 1.
func (p *pair) watchStandby(ctx context.Context) {
	go func() {
		for ctx.Err() == nil {
			if gaugeOr(p.urls[1], "lifeboat_leader") == 1 {
				p.mu.Lock()
				p.newLeader = time.Now()
				p.mu.Unlock()
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
}

// ended waits up to 60 s for the old leader's end and the new leader and
// returns both (zero when not seen).
func (p *pair) ended() (end, newLeader time.Time) {
	for range 600 {
		p.mu.Lock()
		end, newLeader = p.endAt, p.newLeader
		p.mu.Unlock()
		if !end.IsZero() && !newLeader.IsZero() {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return end, newLeader
}

// stop stops both replicas (a killed one is already gone).
func (p *pair) stop() {
	for _, proc := range p.procs {
		proc.Stop()
	}
}

// drainQueue waits until the queue holds no message, visible or not (the
// old leader's, after a kill, come back when their visibility ends), up to
// within, and returns the last counts.
func drainQueue(ctx context.Context, endpoint, queueURL string, within time.Duration) (visible, notVisible int) {
	client := sqs.NewFromConfig(testenv.MotoAWSConfig(), func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
	deadline := time.Now().Add(within)
	for {
		out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err == nil {
			fmt.Sscan(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)], &visible)
			fmt.Sscan(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)], &notVisible)
			if visible == 0 && notVisible == 0 {
				return 0, 0
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return visible, notVisible
		}
		time.Sleep(time.Second)
	}
}

// failoverReport fills what a failover run measured once the burst is over.
func (p *pair) report(ctx context.Context, b *testing.B, t0 time.Time, res *Result, f *fleet, ns, auditLog, motoEndpoint, queueURL string, transitions []int, podsPer int) *Failover {
	out := &Failover{Mode: p.mode, CordonTransitions: map[int]int{}}
	for _, c := range transitions {
		out.CordonTransitions[c]++
	}
	if p.lost {
		out.LeaseLost = since(t0, p.signalAt)
	}
	if p.fired {
		end, newLeader := p.ended()
		out.Signal, out.CordonedAtSignal = p.signalAt.Sub(t0).Seconds(), p.cordoned
		out.OldLeaderEnd, out.NewLeader = since(t0, end), since(t0, newLeader)
		for _, nt := range res.PerNode {
			if nt.Cordoned > out.OldLeaderEnd {
				out.CordonedAfterEnd++
				out.LastCordonAfterEnd = max(out.LastCordonAfterEnd, nt.Cordoned-out.OldLeaderEnd)
			}
			if nt.Drained > out.OldLeaderEnd {
				out.DrainedAfterEnd++
				out.LastDrainAfterEnd = max(out.LastDrainAfterEnd, nt.Drained-out.OldLeaderEnd)
			}
		}
	}
	// Every message deleted: after a kill the old leader's come back when
	// their visibility (default 30 s, 2 min before issue 28) ends.
	vis, notVis := drainQueue(ctx, motoEndpoint, queueURL, 3*time.Minute)
	out.Messages = p.sqs.messages(p.sqs.receivedIDs(), t0)
	out.Messages.Sent = len(f.ids)
	out.Messages.LeftVisible, out.Messages.LeftNotVisible = vis, notVis
	p.stop()
	out.Warnings = map[string]map[string]int{}
	for k, proc := range p.procs {
		if log, err := os.ReadFile(proc.LogPath); err == nil {
			out.Warnings[string(rune('a'+k))] = logWarnings(string(log))
			// The whole log beside the report, for what the counts
			// do not say (which error a warning carried).
			if dir := os.Getenv("LIFEBOAT_BENCH_OUT"); dir != "" {
				// Named after the process (lifeboat-harness-<run>-<replica>):
				// each binary's run keeps its own.
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("failover-%s-%s.log", p.mode, proc.Name)), log, 0o644); err != nil {
					b.Logf("keeping replica %c's log: %v", 'a'+k, err)
				}
			}
		}
	}
	pods := f.pods(podsPer)
	log, err := os.Open(auditLog)
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	writes, lease := newWriteCounter(f.names, pods, ns), newLeaseCounter(t0)
	if err := readAudit(log, writes.add, lease.add); err != nil {
		b.Fatal(err)
	}
	out.Writes, out.Lease = writes.result(), lease.out
	return out
}

// gaugeOr reads an unlabelled gauge from a /metrics endpoint; -1 when it
// cannot.
func gaugeOr(url, name string) float64 {
	resp, err := http.Get(url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return -1
}

// fleetTimeline reads the drain timeline of fleet f (pods in ns) from the
// audit log, with the floor's evicted -> deleted when floor ran.
func fleetTimeline(b *testing.B, auditLog string, f *fleet, ns string, podsPer int, floor *Floor, t0 time.Time) *Timeline {
	pods := f.pods(podsPer)
	floorNS := ""
	if floor != nil {
		floorNS = floor.Namespace
	}
	log, err := os.Open(auditLog)
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	tl, err := readTimeline(log, pods, ns, floorNS, t0)
	if err != nil {
		b.Fatal(err)
	}
	return tl
}

// pods maps the name of each of the fleet's pods (podsPer a node) to its
// node.
func (f *fleet) pods(podsPer int) map[string]string {
	pods := map[string]string{}
	for _, node := range f.names {
		for k := range podsPer {
			pods[podName(node, k)] = node
		}
	}
	return pods
}
