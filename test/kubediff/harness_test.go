package kubediff

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/kube/clientset"
)

const (
	startTimeout = 2 * time.Minute
	opTimeout    = 20 * time.Second
)

func contextTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// contentType is what a client speaks: lifeboat's binary asks for
// protobuf (cmd/lifeboat restConfig), client-go's default is JSON.
type contentType string

const (
	contentJSON     contentType = "json"
	contentProtobuf contentType = "protobuf"
)

var contentTypes = []contentType{contentProtobuf, contentJSON}

// config returns base speaking ct.
func config(base *rest.Config, ct contentType) *rest.Config {
	c := rest.CopyConfig(base)
	c.UserAgent = "lifeboat-kubediff"
	if ct == contentProtobuf {
		c.ContentType = "application/vnd.kubernetes.protobuf"
		c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	return c
}

// side is one of the two clients under comparison.
type side struct {
	name   string // "ours" or "client-go"
	client kube.Client
	wire   *wire
}

// pair is lifeboat's REST client and client-go's clientset (through the
// kube.Client adapter the full build uses), made from the same
// configuration, each recording its requests.
type pair struct {
	ours, lib side
	// oursREST and libCS are the same clients, for what kube.Client does
	// not cover (Events).
	oursREST *kube.REST
	libCS    kubernetes.Interface
}

func newPair(t *testing.T, base *rest.Config) pair {
	t.Helper()
	var p pair
	oc, lc := rest.CopyConfig(base), rest.CopyConfig(base)
	p.ours.wire, p.lib.wire = &wire{}, &wire{}
	oc.Wrap(p.ours.wire.wrap)
	lc.Wrap(p.lib.wire.wrap)
	var err error
	if p.oursREST, err = kube.NewREST(oc); err != nil {
		t.Fatal(err)
	}
	if p.libCS, err = kubernetes.NewForConfig(lc); err != nil {
		t.Fatal(err)
	}
	p.ours.name, p.ours.client = "ours", p.oursREST
	p.lib.name, p.lib.client = "client-go", clientset.New(p.libCS)
	return p
}

func (p pair) sides() []side { return []side{p.ours, p.lib} }

// exchange is one HTTP request and its answer as the client saw them.
type exchange struct {
	Method, Path, Query string
	ContentType, Accept string
	UserAgent           string
	Body                []byte
	Status              int
	RetryAfter          string
	// Response is the answer's body, except for watches (a stream).
	Response []byte
}

// wire records the exchanges of a client.
type wire struct {
	mu  sync.Mutex
	log []exchange
}

func (w *wire) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		x := exchange{
			Method: req.Method, Path: req.URL.Path, Query: req.URL.RawQuery,
			ContentType: req.Header.Get("Content-Type"), Accept: req.Header.Get("Accept"),
			UserAgent: req.Header.Get("User-Agent"),
		}
		if req.Body != nil && req.GetBody != nil {
			b, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			x.Body, _ = io.ReadAll(b)
			b.Close()
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		x.Status, x.RetryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
		if req.URL.Query().Get("watch") != "true" {
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return nil, err
			}
			x.Response = body
			resp.Body = io.NopCloser(bytes.NewReader(body))
		}
		w.mu.Lock()
		w.log = append(w.log, x)
		w.mu.Unlock()
		return resp, nil
	})
}

// take returns the exchanges recorded since the last take.
func (w *wire) take() []exchange {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.log
	w.log = nil
	return l
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// subst names the per-side parts of a comparison (object names, UIDs):
// each is replaced by its placeholder before two sides are compared. Names
// of the two sides have the same length, so a protobuf body stays the
// same length after the replacement.
type subst map[string]string

var volatile = []*regexp.Regexp{
	regexp.MustCompile(`kube-api-access-[a-z0-9]{5}`), // the ServiceAccount volume's random suffix
	regexp.MustCompile(`in record \([0-9]+\)`),        // a Conflict's current resourceVersion
}

func (s subst) apply(b []byte) string {
	out := string(b)
	for from, to := range s {
		if from != "" {
			out = strings.ReplaceAll(out, from, to)
		}
	}
	for _, re := range volatile {
		out = re.ReplaceAllString(out, "(VOLATILE)")
	}
	return out
}

// answers says whether sameWire compares the answers' bodies too: reads of
// the same objects get the same bytes; writes to each side's own objects
// get different resourceVersions and timestamps (compared by sameObject).
type answers bool

const (
	withAnswers  answers = true
	requestsOnly answers = false
)

// sameWire requires that both sides sent the same requests and got the
// same answers (after the substitutions), and returns ours.
func sameWire(t *testing.T, what string, p pair, a answers, so, sl subst) []view {
	t.Helper()
	on, ln := views(t, p.ours.wire.take(), a, so), views(t, p.lib.wire.take(), a, sl)
	if d := cmp.Diff(ln, on); d != "" {
		t.Errorf("%s: the requests on the wire differ (-client-go +ours):\n%s", what, d)
	}
	return on
}

// view is an exchange as compared: a request body that is an object
// (protobuf or JSON) is decoded and rendered by norm; other bodies
// (patches) have their resourceVersions masked.
type view struct {
	Method, Path, Query string
	ContentType, Accept string
	UserAgent           string
	Body                string
	Status              int
	RetryAfter          string
	// Response is the answer, decoded and rendered by norm when it is an
	// object (a list read twice has the store's latest resourceVersion,
	// which other tests' writes move).
	Response string
}

var (
	decoder    = scheme.Codecs.UniversalDeserializer()
	patchRV    = regexp.MustCompile(`"resourceVersion":"[0-9]+"`)
	protoMagic = []byte("k8s\x00")
)

func views(t *testing.T, xs []exchange, a answers, s subst) []view {
	t.Helper()
	out := make([]view, len(xs))
	for i, x := range xs {
		v := view{Method: x.Method, Path: s.apply([]byte(x.Path)), Query: s.apply([]byte(x.Query)),
			ContentType: x.ContentType, Accept: x.Accept, UserAgent: x.UserAgent,
			Status: x.Status, RetryAfter: x.RetryAfter}
		if obj, _, err := decoder.Decode(x.Body, nil, nil); err == nil {
			v.Body = norm(t, obj, s)
			if bytes.HasPrefix(x.Body, protoMagic) {
				v.Body = "protobuf " + v.Body
			}
		} else {
			v.Body = patchRV.ReplaceAllString(s.apply(x.Body), `"resourceVersion":"RV"`)
		}
		if a {
			v.Response = s.apply(x.Response)
			if obj, _, err := decoder.Decode(x.Response, nil, nil); err == nil {
				v.Response = norm(t, obj, s)
				if bytes.HasPrefix(x.Response, protoMagic) {
					v.Response = "protobuf " + v.Response
				}
			}
		}
		out[i] = v
	}
	return out
}

// norm renders obj for comparison: what the server stamps on each write
// (resourceVersion, UID, timestamps) is cleared, deletion and
// managed-fields times are kept as "set or not", managed fields are
// sorted, and the side's names are replaced.
func norm(t *testing.T, obj runtime.Object, s subst) string {
	t.Helper()
	if obj == nil {
		return "<nil>"
	}
	obj = obj.DeepCopyObject()
	clear := func(o any) {
		m, err := meta.Accessor(o)
		if err != nil {
			return
		}
		m.SetResourceVersion("")
		m.SetUID("")
		m.SetCreationTimestamp(metav1.Time{})
		if m.GetDeletionTimestamp() != nil {
			m.SetDeletionTimestamp(&metav1.Time{})
		}
		mf := m.GetManagedFields()
		for i := range mf {
			if mf[i].Time != nil {
				mf[i].Time = &metav1.Time{}
			}
		}
		// The API server orders entries by their time, to the second:
		// two written within one second come in either order.
		sort.SliceStable(mf, func(i, j int) bool {
			a, b := mf[i], mf[j]
			return a.Manager+string(a.Operation)+a.Subresource < b.Manager+string(b.Operation)+b.Subresource
		})
		m.SetManagedFields(mf)
		// A pod condition's times are the server's clock at the write,
		// to the second: the two sides' evictions, a moment apart, can
		// fall either side of a second (CI on 1573e60:
		// DisruptionTarget 15:56:31 against 15:56:30). Kept as "set or not".
		if p, ok := o.(*corev1.Pod); ok {
			for i := range p.Status.Conditions {
				c := &p.Status.Conditions[i]
				if !c.LastTransitionTime.IsZero() {
					c.LastTransitionTime = metav1.Unix(1, 0)
				}
				if !c.LastProbeTime.IsZero() {
					c.LastProbeTime = metav1.Unix(1, 0)
				}
			}
		}
	}
	if meta.IsListType(obj) {
		if l, err := meta.ListAccessor(obj); err == nil {
			l.SetResourceVersion("")
		}
		items, err := meta.ExtractList(obj)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			clear(it)
		}
		if err := meta.SetList(obj, items); err != nil {
			t.Fatal(err)
		}
	} else {
		clear(obj)
	}
	b, err := json.MarshalIndent(obj, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return s.apply(b)
}

// sameObject requires that both sides returned the same object.
func sameObject(t *testing.T, what string, ours, lib runtime.Object, so, sl subst) {
	t.Helper()
	if d := cmp.Diff(norm(t, lib, sl), norm(t, ours, so)); d != "" {
		t.Errorf("%s: the returned objects differ (-client-go +ours):\n%s", what, d)
	}
}

// errorKinds are the predicates callers branch on.
var errorKinds = []struct {
	name string
	is   func(error) bool
}{
	{"NotFound", apierrors.IsNotFound},
	{"Conflict", apierrors.IsConflict},
	{"Forbidden", apierrors.IsForbidden},
	{"Unauthorized", apierrors.IsUnauthorized},
	{"TooManyRequests", apierrors.IsTooManyRequests},
	{"Invalid", apierrors.IsInvalid},
	{"BadRequest", apierrors.IsBadRequest},
	{"AlreadyExists", apierrors.IsAlreadyExists},
	{"ResourceExpired", apierrors.IsResourceExpired},
	{"Gone", apierrors.IsGone},
	{"UnsupportedMediaType", apierrors.IsUnsupportedMediaType},
}

// kinds lists the predicates err satisfies.
func kinds(err error) []string {
	var out []string
	for _, k := range errorKinds {
		if k.is(err) {
			out = append(out, k.name)
		}
	}
	return out
}

// sameError requires that both sides failed alike: both or neither, the
// same predicates, the same Status from the server. want names the
// predicate the case expects ("" for success).
func sameError(t *testing.T, what, want string, ours, lib error, so, sl subst) {
	t.Helper()
	for _, e := range []struct {
		side string
		err  error
	}{{"ours", ours}, {"client-go", lib}} {
		switch {
		case want == "" && e.err != nil:
			t.Errorf("%s: %s failed: %v", what, e.side, e.err)
		case want != "" && !contains(kinds(e.err), want):
			t.Errorf("%s: %s answered %v (%v), want %s", what, e.side, e.err, kinds(e.err), want)
		}
	}
	if d := cmp.Diff(kinds(lib), kinds(ours)); d != "" {
		t.Errorf("%s: the errors are of different kinds (-client-go +ours):\n%s\nours: %v\nclient-go: %v", what, d, ours, lib)
	}
	var os, ls apierrors.APIStatus
	if errors.As(ours, &os) != errors.As(lib, &ls) {
		t.Errorf("%s: only one error carries an API status: ours %T %v, client-go %T %v", what, ours, ours, lib, lib)
		return
	}
	if os != nil {
		o, l := os.Status(), ls.Status()
		if d := cmp.Diff(norm(t, &l, sl), norm(t, &o, so)); d != "" {
			t.Errorf("%s: the API statuses differ (-client-go +ours):\n%s", what, d)
		}
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// names returns two names of the same length for the two sides.
func names(prefix string) (ours, lib string) {
	suffix := strings.ToLower(fmt.Sprintf("%06x", time.Now().UnixNano()&0xffffff))
	return prefix + "-ours-" + suffix, prefix + "-libr-" + suffix
}
