package kubeletshutdown

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
)

// Fetch reads a node's kubelet /configz, e.g. through the API server's
// node proxy (GET /api/v1/nodes/<name>/proxy/configz, which needs nodes/proxy get).
type Fetch func(ctx context.Context, node string) ([]byte, error)

// readTimeout bounds one read: a drain waits for it.
const readTimeout = 2 * time.Second

// cacheMost bounds the cache; past it the cache starts again (nodes come
// and go, their names are not reused for long).
const cacheMost = 10000

// Reader reads each node's verdict once and keeps it: a kubelet's
// configuration changes only with a restart, and a node lives shorter than
// the reason to read it again.
type Reader struct {
	fetch Fetch
	mu    sync.Mutex
	cache map[string]result
}

type result struct {
	v   Verdict
	err error
}

// NewReader returns a Reader that reads through fetch.
func NewReader(fetch Fetch) *Reader { return &Reader{fetch: fetch, cache: map[string]result{}} }

// Verdict returns the node's verdict, read at the first call for the node
// (bounded by two seconds) and kept, its error too: a node whose kubelet
// could not be read is planned without its window, not read at every
// event.
func (r *Reader) Verdict(ctx context.Context, node string) (Verdict, error) {
	r.mu.Lock()
	res, ok := r.cache[node]
	r.mu.Unlock()
	if ok {
		return res.v, res.err
	}
	res = r.read(ctx, node)
	if ctx.Err() != nil {
		return res.v, res.err // canceled: not the node's answer, not kept
	}
	r.mu.Lock()
	if len(r.cache) >= cacheMost {
		r.cache = map[string]result{}
	}
	r.cache[node] = res
	r.mu.Unlock()
	return res.v, res.err
}

func (r *Reader) read(ctx context.Context, node string) result {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	b, err := r.fetch(ctx, node)
	if err != nil {
		return result{err: fmt.Errorf("reading the kubelet configuration of node %s: %w", node, err)}
	}
	c, err := Parse(b)
	if err != nil {
		return result{err: fmt.Errorf("node %s: %w", node, err)}
	}
	return result{v: c.Verdict()}
}

// ProxyFetch reads /configz through the API server's node proxy with
// core, a REST client of the core API group (a clientset's
// CoreV1().RESTClient()): GET /api/v1/nodes/<name>/proxy/configz.
func ProxyFetch(core rest.Interface) Fetch {
	return func(ctx context.Context, node string) ([]byte, error) {
		// JSON: /configz is JSON, and the API server's own failures (a
		// Status) then decode into a readable error.
		b, err := core.Get().Resource("nodes").Name(node).SubResource("proxy").Suffix("configz").
			SetHeader("Accept", "application/json").DoRaw(ctx)
		if err != nil && len(b) > 0 && utf8.Valid(b) && !apierrors.IsForbidden(err) && !strings.Contains(err.Error(), string(b)) {
			// The proxy's own answer says why (e.g. the kubelet cannot be
			// dialed), which the generic error leaves out.
			return nil, fmt.Errorf("%w: %s", err, truncate(strings.TrimSpace(string(b)), 200))
		}
		return b, err
	}
}
