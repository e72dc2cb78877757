package firstlane

import (
	"context"
	"net/http"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// held answers each request once release is closed.
type held struct{ release chan struct{} }

func (h held) RoundTrip(*http.Request) (*http.Response, error) {
	<-h.release
	return &http.Response{StatusCode: 200}, nil
}

type instant struct{}

func (instant) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200}, nil
}

func request(ctx context.Context) *http.Request {
	r, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://api/evict", nil)
	return r
}

// send runs rt's request in the background and reports when it returned.
func send(rt http.RoundTripper, ctx context.Context) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := rt.RoundTrip(request(ctx))
		done <- err
	}()
	return done
}

func returned(c <-chan error) bool {
	select {
	case <-c:
		return true
	case <-time.After(50 * time.Millisecond):
		return false
	}
}

func TestThenGoesAtOnceWithNothingFirst(t *testing.T) {
	g := New(time.Minute, clocktesting.NewFakeClock(time.Unix(0, 0)))
	if !returned(send(g.Then(instant{}), context.Background())) {
		t.Fatal("a request waited with no first-lane request in flight")
	}
}

func TestThenWaitsForTheFirstLane(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	g := New(time.Minute, clk)
	first := held{release: make(chan struct{})}
	cordon := send(g.First(first), context.Background())
	for !g.busy() {
		time.Sleep(time.Millisecond)
	}
	eviction := send(g.Then(instant{}), context.Background())
	if returned(eviction) {
		t.Fatal("an eviction went while a cordon was in flight")
	}
	close(first.release)
	if !returned(cordon) || !returned(eviction) {
		t.Fatal("the eviction did not go once the cordon was answered")
	}
}

func TestThenWaitsAtMostMaxWait(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	g := New(2*time.Second, clk)
	first := held{release: make(chan struct{})}
	defer close(first.release)
	send(g.First(first), context.Background())
	for !g.busy() {
		time.Sleep(time.Millisecond)
	}
	eviction := send(g.Then(instant{}), context.Background())
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(2*time.Second - time.Millisecond)
	if returned(eviction) {
		t.Fatal("the eviction went before MaxWait")
	}
	clk.Step(time.Millisecond)
	if !returned(eviction) {
		t.Fatal("the eviction still waited after MaxWait")
	}
}

func TestThenEndsWithItsContext(t *testing.T) {
	g := New(time.Minute, clocktesting.NewFakeClock(time.Unix(0, 0)))
	first := held{release: make(chan struct{})}
	defer close(first.release)
	send(g.First(first), context.Background())
	for !g.busy() {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	eviction := send(g.Then(instant{}), ctx)
	cancel()
	select {
	case err := <-eviction:
		if err != context.Canceled {
			t.Errorf("error %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a canceled request kept waiting")
	}
}

func (g *Gate) busy() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight > 0
}
