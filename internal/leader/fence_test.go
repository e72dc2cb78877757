package leader

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"
)

// lockStub is a resourcelock.Interface whose writes succeed or fail on demand.
type lockStub struct {
	resourcelock.Interface
	err   error
	delay func() // runs during the write (time passes while it is sent)
}

func (l *lockStub) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	l.delay()
	return l.err
}
func (l *lockStub) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	l.delay()
	return l.err
}
func (l *lockStub) Identity() string { return "me" }

func TestFence(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	type step struct {
		do   string // "renew", "renew-fails", "release", "wait <duration>"
		open bool   // fence open after the step
	}
	tests := []struct {
		name   string
		always bool
		steps  []step
	}{
		{"closed before the first renewal", false, []step{{"wait 0s", false}}},
		{"open for the renew deadline after a renewal, counted from when it was sent", false, []step{
			{"renew", true}, {"wait 1500ms", true}, {"wait 400ms", false}}},
		{"each renewal extends", false, []step{{"renew", true}, {"wait 1s", true}, {"renew", true}, {"wait 1500ms", true}, {"wait 1s", false}}},
		{"a failed renewal does not extend; the fence closes on time", false, []step{{"renew", true}, {"wait 1s", true}, {"renew-fails", true}, {"wait 1s", false}}},
		{"a paused replica wakes up closed", false, []step{{"renew", true}, {"wait 30s", false}}},
		{"released: closed at once", false, []step{{"renew", true}, {"release", false}}},
		{"without leader election always open", true, []step{{"wait 0s", true}, {"wait 1h", true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(start)
			f := NewFence(clk, !tt.always)
			stub := &lockStub{delay: func() { clk.SetTime(clk.Now().Add(100 * time.Millisecond)) }}
			lock := &fencedLock{Interface: stub, fence: f, valid: 2 * time.Second}
			for i, s := range tt.steps {
				switch {
				case s.do == "renew":
					stub.err = nil
					if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
						t.Fatal(err)
					}
				case s.do == "renew-fails":
					stub.err = errors.New("conflict")
					_ = lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
				case s.do == "release":
					stub.err = nil
					_ = lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: ""})
				default:
					d, err := time.ParseDuration(s.do[len("wait "):])
					if err != nil {
						t.Fatal(err)
					}
					clk.SetTime(clk.Now().Add(d))
				}
				if got := f.Open(); got != s.open {
					t.Fatalf("after step %d (%s): open = %v, want %v", i, s.do, got, s.open)
				}
			}
		})
	}
}

// A shut fence stops Kubernetes writes and every AWS call; Kubernetes reads
// go through.
func TestFencedClients(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0))
	f := NewFence(clk, true)
	kube := f.Transport(http.DefaultTransport)
	aws := f.HTTPClient(srv.Client())
	tests := []struct {
		method string
		open   bool
		kube   bool // the Kubernetes request goes through
		aws    bool // the AWS request goes through
	}{
		{http.MethodGet, false, true, false},
		{http.MethodPut, false, false, false},
		{http.MethodPost, false, false, false},
		{http.MethodPatch, false, false, false},
		{http.MethodDelete, false, false, false},
		{http.MethodPost, true, true, true},
		{http.MethodDelete, true, true, true},
	}
	for _, tt := range tests {
		if tt.open {
			f.extend(clk.Now().Add(time.Second))
		} else {
			f.shut()
		}
		req, _ := http.NewRequest(tt.method, srv.URL, nil)
		resp, err := kube.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		if (err == nil) != tt.kube || (err != nil && !errors.Is(err, ErrNotLeader)) {
			t.Errorf("kubernetes %s with fence open=%v: err %v, want through=%v", tt.method, tt.open, err, tt.kube)
		}
		req, _ = http.NewRequest(tt.method, srv.URL, nil)
		resp, err = aws.Do(req)
		if resp != nil {
			resp.Body.Close()
		}
		if (err == nil) != tt.aws || (err != nil && !errors.Is(err, ErrNotLeader)) {
			t.Errorf("aws %s with fence open=%v: err %v, want through=%v", tt.method, tt.open, err, tt.aws)
		}
	}
}
