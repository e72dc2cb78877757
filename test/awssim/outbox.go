package awssim

import (
	"context"
	"hash/fnv"
	"sync"
	"time"
)

// outboxLanes is how many announcements and EC2 calls go to moto at once.
const outboxLanes = 8

// outbox sends what the model decided (lifecycle-action announcements, EC2
// state changes and the EC2 calls behind them) to moto after the operation
// that decided it has released the model lock. Holding the lock across those
// moto calls made every Auto Scaling request wait behind them: with a few
// hundred actions opening at once, heartbeats and completions queued for
// longer than the hooks' timeouts.
//
// Work is spread over a few lanes by key (an instance ID): one lane sends in
// order, so an instance's "pending" comes before its "running" and its
// lifecycle action, while different instances go out in parallel. AWS itself
// guarantees no order between EventBridge events; the per-instance order is
// what tests may rely on.
type outbox struct {
	lanes   [outboxLanes]lane
	mu      sync.Mutex
	pending int // items queued or being sent, for flush
	idle    *sync.Cond
}

type lane struct {
	mu    sync.Mutex
	queue []func(context.Context) error
	wake  chan struct{}
}

func newOutbox() *outbox {
	o := &outbox{}
	o.idle = sync.NewCond(&o.mu)
	for i := range o.lanes {
		o.lanes[i].wake = make(chan struct{}, 1)
	}
	return o
}

// add queues send on key's lane.
func (o *outbox) add(key string, send func(context.Context) error) {
	o.mu.Lock()
	o.pending++
	o.mu.Unlock()
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	l := &o.lanes[h.Sum32()%outboxLanes]
	l.mu.Lock()
	l.queue = append(l.queue, send)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run sends lane i's items in order until ctx ends; failures go to fail.
func (o *outbox) run(ctx context.Context, i int, fail func(error)) {
	l := &o.lanes[i]
	for {
		l.mu.Lock()
		var send func(context.Context) error
		if len(l.queue) > 0 {
			send = l.queue[0]
			l.queue[0] = nil
			l.queue = l.queue[1:]
		}
		l.mu.Unlock()
		if send == nil {
			select {
			case <-ctx.Done():
				return
			case <-l.wake:
			}
			continue
		}
		if ctx.Err() != nil {
			return
		}
		opCtx, cancel := context.WithTimeout(ctx, opTimeout)
		err := send(opCtx)
		cancel()
		if err != nil && ctx.Err() == nil {
			fail(err)
		}
		o.mu.Lock()
		o.pending--
		if o.pending == 0 {
			o.idle.Broadcast()
		}
		o.mu.Unlock()
	}
}

// flush waits until everything queued so far was sent, or for at most max.
// It reports whether the outbox emptied.
func (o *outbox) flush(max time.Duration) bool {
	timer := time.AfterFunc(max, func() {
		o.mu.Lock()
		o.idle.Broadcast()
		o.mu.Unlock()
	})
	defer timer.Stop()
	deadline := time.Now().Add(max)
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.pending > 0 && time.Now().Before(deadline) {
		o.idle.Wait()
	}
	return o.pending == 0
}
