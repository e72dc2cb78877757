package drain

import (
	"strconv"
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
//
// The cache has caught up when it shows lifeboat's write or a later
// version of the node: the node lifecycle controller adds its
// unschedulable taint right after a cordon, so the cache soon holds a
// version newer than the one lifeboat wrote, and the written copy is then
// the stale one (in a 1,000-node burst, ~420 drained records were refused
// with 409 that way and read again). Later is told by comparing
// resourceVersions as integers, which Kubernetes guarantees since 1.35
// (KEP-5504, comparable resource versions; apimachinery v0.35's
// resourceversion.CompareResourceVersion, not in the v0.34 we build with)
// and which etcd's revisions always were. One that is not an integer
// falls back to equality.
func (l *lastWrites) newer(name string, cached *corev1.Node, ok bool) *corev1.Node {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.nodes[name]
	if w == nil {
		return nil
	}
	if ok && !olderThan(cached.ResourceVersion, w.ResourceVersion) {
		delete(l.nodes, name) // the cache has caught up
		return nil
	}
	return w
}

// olderThan reports whether resourceVersion a is known to be older than b:
// both are integers (KEP-5504) and a < b; when either is not, whether they
// differ (the cache then is not taken for caught up).
func olderThan(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA != nil || errB != nil || x == 0 || y == 0 {
		return a != b
	}
	return x < y
}

func (l *lastWrites) forget(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.nodes, name)
}
