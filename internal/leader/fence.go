package leader

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// ErrNotLeader replaces a request made while this replica cannot be sure
// that it still holds the leader Lease.
var ErrNotLeader = errors.New("not sent: this replica may no longer hold the leader lease")

// Fence lets a replica act only while it is sure to hold the Lease: from a
// successful renewal until the renew deadline after it, by its own
// monotonic clock. A replica that was paused (SIGSTOP, a frozen VM, a long
// stop-the-world) finds on waking that the deadline has passed and sends no
// write, even before the leader elector notices and the process exits; by
// then another replica may lead. Reads are never fenced.
type Fence struct {
	clock  clock.PassiveClock
	always bool // no leader election: the only replica always acts

	mu    sync.Mutex
	until time.Time
}

// NewFence returns a fence that opens with each renewal of the Lease, or,
// without leader election, one that is always open.
func NewFence(clk clock.PassiveClock, leaderElection bool) *Fence {
	return &Fence{clock: clk, always: !leaderElection}
}

// Open reports whether the replica may act now.
func (f *Fence) Open() bool {
	if f.always {
		return true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clock.Now().Before(f.until)
}

func (f *Fence) extend(until time.Time) {
	f.mu.Lock()
	if until.After(f.until) {
		f.until = until
	}
	f.mu.Unlock()
}

func (f *Fence) shut() {
	f.mu.Lock()
	f.until = time.Time{}
	f.mu.Unlock()
}

// Transport wraps a Kubernetes client's transport: while the fence is shut
// it refuses every request but reads.
func (f *Fence) Transport(next http.RoundTripper) http.RoundTripper {
	return fencedTransport{next: next, fence: f}
}

// HTTPClient wraps an AWS client's HTTP client: while the fence is shut it
// refuses every request. The SQS and Auto Scaling clients are used only by
// the leader, and every one of their calls acts (receiving takes messages
// from the other replicas), but one: handing a message back (visibility 0)
// gives work away, so queue mode sends it through an unfenced client.
func (f *Fence) HTTPClient(next aws.HTTPClient) aws.HTTPClient {
	return fencedHTTPClient{next: next, fence: f}
}

// fencedLock is the Lease lock: each successful write of this replica's own
// record opens the fence for valid from the moment the write was sent (the
// other replicas count the lease from later, when they see it); a released
// record shuts it.
type fencedLock struct {
	resourcelock.Interface
	fence *Fence
	valid time.Duration
}

func (l *fencedLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	sent := l.fence.clock.Now()
	err := l.Interface.Create(ctx, r)
	l.written(sent, r, err)
	return err
}

func (l *fencedLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	sent := l.fence.clock.Now()
	err := l.Interface.Update(ctx, r)
	l.written(sent, r, err)
	return err
}

func (l *fencedLock) written(sent time.Time, r resourcelock.LeaderElectionRecord, err error) {
	switch {
	case err != nil:
		// The fence closes by itself when the last renewal runs out.
	case r.HolderIdentity == l.Identity():
		l.fence.extend(sent.Add(l.valid))
	default:
		l.fence.shut() // released
	}
}

type fencedTransport struct {
	next  http.RoundTripper
	fence *Fence
}

func (t fencedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !t.fence.Open() {
		return nil, fmt.Errorf("%s %s: %w", r.Method, r.URL.Path, ErrNotLeader)
	}
	return t.next.RoundTrip(r)
}

type fencedHTTPClient struct {
	next  aws.HTTPClient
	fence *Fence
}

func (c fencedHTTPClient) Do(r *http.Request) (*http.Response, error) {
	if !c.fence.Open() {
		return nil, fmt.Errorf("%s: %w", r.URL.Host, ErrNotLeader)
	}
	return c.next.Do(r)
}
