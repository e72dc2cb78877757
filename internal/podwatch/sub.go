package podwatch

import (
	"sync"

	"k8s.io/apimachinery/pkg/watch"
)

// Sub is one drain's view of the shared watch: its node's pod events after
// its list's version. It implements watch.Interface. Events queue without
// bound (a node's pods make a few events each), so a slow drain never holds
// the hub up.
type Sub struct {
	hub  *Hub
	node string
	from uint64
	ch   chan watch.Event

	mu      sync.Mutex
	pending []watch.Event
	closed  bool          // no more events: the hub reset, or Stop
	wake    chan struct{} // cap 1: pending grew or closed
	stop    sync.Once
	done    chan struct{} // Stop was called
}

func newSub(h *Hub, node string, from uint64) *Sub {
	s := &Sub{hub: h, node: node, from: from, ch: make(chan watch.Event), wake: make(chan struct{}, 1), done: make(chan struct{})}
	go s.pump()
	return s
}

// offer queues e if it is s's: its node's, after its version.
func (s *Sub) offer(e event) {
	if e.node != s.node || e.rv <= s.from {
		return
	}
	s.mu.Lock()
	if !s.closed {
		s.pending = append(s.pending, watch.Event{Type: e.typ, Object: e.pod})
	}
	s.mu.Unlock()
	s.signal()
}

// close ends s's events once the queued ones are read.
func (s *Sub) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.signal()
}

func (s *Sub) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// pump moves queued events to ch, closing ch after the last one once s is
// closed; it ends at Stop.
func (s *Sub) pump() {
	defer close(s.ch)
	for {
		s.mu.Lock()
		var next *watch.Event
		if len(s.pending) > 0 {
			next = &s.pending[0]
		}
		closed := s.closed
		s.mu.Unlock()
		if next == nil {
			if closed {
				return
			}
			select {
			case <-s.wake:
			case <-s.done:
				return
			}
			continue
		}
		select {
		case s.ch <- *next:
			s.mu.Lock()
			s.pending = s.pending[1:]
			s.mu.Unlock()
		case <-s.done:
			return
		}
	}
}

// ResultChan is the node's events; it closes after Stop or when the hub
// lost its place.
func (s *Sub) ResultChan() <-chan watch.Event { return s.ch }

// Stop unsubscribes; the result channel closes.
func (s *Sub) Stop() {
	s.stop.Do(func() {
		close(s.done)
		s.hub.remove(s)
	})
}
