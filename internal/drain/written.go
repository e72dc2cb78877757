package drain

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// maxWritten bounds the nodes whose last write is remembered.
const maxWritten = 1024

// lastWrites remembers the node each of lifeboat's writes returned until
// the informer cache shows it. A read-modify-write starts from the cache,
// and its write carries the read's resourceVersion: a cache that has not
// yet seen lifeboat's own previous write (milliseconds earlier: the note
// of a lifecycle completion, then the done record) would make it refused
// and read again, two requests more per node.
type lastWrites struct {
	mu    sync.Mutex
	nodes map[string]*corev1.Node
}

func (l *lastWrites) put(n *corev1.Node) {
	if n == nil || n.Name == "" || n.ResourceVersion == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.nodes == nil {
		l.nodes = map[string]*corev1.Node{}
	}
	if _, ok := l.nodes[n.Name]; !ok && len(l.nodes) >= maxWritten {
		for k := range l.nodes { // forget one: it costs a refused write at most
			delete(l.nodes, k)
			break
		}
	}
	l.nodes[n.Name] = n
}

// newer returns the node lifeboat last wrote if the cached copy (ok false:
// none) has not caught up with it; nil when the cache is to be used.
func (l *lastWrites) newer(name string, cached *corev1.Node, ok bool) *corev1.Node {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.nodes[name]
	if w == nil {
		return nil
	}
	if ok && cached.ResourceVersion == w.ResourceVersion {
		delete(l.nodes, name) // the cache has caught up
		return nil
	}
	return w
}

func (l *lastWrites) forget(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.nodes, name)
}
