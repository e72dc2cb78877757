package kube

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	restwatch "k8s.io/client-go/rest/watch"
)

const (
	mediaJSON     = "application/json"
	mediaProtobuf = "application/vnd.kubernetes.protobuf"
)

// request is what the fake API server received.
type request struct {
	method, path, query, contentType string
	body                             []byte
}

// apiServer answers REST's requests in one media type from a table of
// path -> object, recording each request; a watch gets events.
type apiServer struct {
	t      *testing.T
	media  string
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []request
	answer func(r *http.Request) (int, runtime.Object)
	events []watch.Event
}

func newAPIServer(t *testing.T, media string, answer func(r *http.Request) (int, runtime.Object)) *apiServer {
	s := &apiServer{t: t, media: media, answer: answer}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *apiServer) serializer() runtime.SerializerInfo {
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), s.media)
	if !ok {
		s.t.Fatalf("no serializer for %s", s.media)
	}
	return info
}

func (s *apiServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.reqs = append(s.reqs, request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), body})
	s.mu.Unlock()
	info := s.serializer()
	if r.URL.Query().Get("watch") == "true" {
		w.Header().Set("Content-Type", s.media)
		w.WriteHeader(http.StatusOK)
		framed := info.StreamSerializer.Framer.NewFrameWriter(w)
		enc := restwatch.NewEncoder(streaming.NewEncoder(framed, info.StreamSerializer.Serializer), codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion))
		for i := range s.events {
			if err := enc.Encode(&s.events[i]); err != nil {
				s.t.Errorf("encoding watch event: %v", err)
			}
		}
		return
	}
	code, obj := s.answer(r)
	gv := corev1.SchemeGroupVersion
	if strings.HasPrefix(r.URL.Path, "/apis/policy/") {
		gv = policyv1.SchemeGroupVersion
	}
	if _, ok := obj.(*metav1.Status); ok {
		gv = schema.GroupVersion{Version: "v1"}
	}
	b, err := runtime.Encode(codecs.EncoderForVersion(info.Serializer, gv), obj)
	if err != nil {
		s.t.Errorf("encoding %T: %v", obj, err)
	}
	w.Header().Set("Content-Type", s.media)
	if code == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1") // what client-go's retries act on
	}
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func (s *apiServer) requests() []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]request(nil), s.reqs...)
}

// client is a REST client of s speaking s's media type, as lifeboat
// configures it (restConfig in cmd/lifeboat).
func (s *apiServer) client() *REST {
	rc := &rest.Config{Host: s.srv.URL, QPS: 100, Burst: 100}
	rc.ContentType, rc.AcceptContentTypes = s.media, s.media
	c, err := NewREST(rc)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

var medias = []string{mediaJSON, mediaProtobuf}

func node(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "7", Labels: map[string]string{"a": "b"}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0123456789abcdef0", Unschedulable: true}}
}

// Nodes: the paths, the query of the options, the request bodies in the
// configured media type, and the answers decoded.
func TestNodes(t *testing.T) {
	for _, media := range medias {
		t.Run(media, func(t *testing.T) {
			ctx := context.Background()
			s := newAPIServer(t, media, func(r *http.Request) (int, runtime.Object) {
				if r.URL.Path == "/api/v1/nodes" {
					return 200, &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: "9", Continue: "next"}, Items: []corev1.Node{*node("a"), *node("b")}}
				}
				return 200, node(strings.TrimPrefix(r.URL.Path, "/api/v1/nodes/"))
			})
			c := s.client().Nodes()
			n, err := c.Get(ctx, "a", metav1.GetOptions{ResourceVersion: "0"})
			if err != nil || n.Name != "a" || n.Spec.ProviderID != node("a").Spec.ProviderID || !n.Spec.Unschedulable {
				t.Fatalf("Get = %+v, %v", n, err)
			}
			list, err := c.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=a", LabelSelector: "x=y", Limit: 500})
			if err != nil || len(list.Items) != 2 || list.ResourceVersion != "9" || list.Continue != "next" || list.Items[1].Name != "b" {
				t.Fatalf("List = %+v, %v", list, err)
			}
			if _, err := c.Update(ctx, node("a"), metav1.UpdateOptions{}); err != nil {
				t.Fatalf("Update: %v", err)
			}
			if _, err := c.Patch(ctx, "a", types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
				t.Fatalf("Patch: %v", err)
			}
			reqs := s.requests()
			want := []request{
				{method: "GET", path: "/api/v1/nodes/a", query: "resourceVersion=0"},
				{method: "GET", path: "/api/v1/nodes", query: "fieldSelector=metadata.name%3Da&labelSelector=x%3Dy&limit=500"},
				{method: "PUT", path: "/api/v1/nodes/a", contentType: media},
				{method: "PATCH", path: "/api/v1/nodes/a", contentType: string(types.MergePatchType)},
			}
			checkRequests(t, reqs, want)
			// The PUT's body is the node, in the configured media type.
			var sent corev1.Node
			if err := runtime.DecodeInto(codecs.UniversalDecoder(corev1.SchemeGroupVersion), reqs[2].body, &sent); err != nil || sent.Name != "a" || sent.ResourceVersion != "7" || !sent.Spec.Unschedulable {
				t.Errorf("PUT body decodes to %+v, %v", sent, err)
			}
			if string(reqs[3].body) != `{"spec":{"unschedulable":true}}` {
				t.Errorf("PATCH body %q", reqs[3].body)
			}
		})
	}
}

func checkRequests(t *testing.T, got, want []request) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d requests, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.method != w.method || g.path != w.path || g.query != w.query || (w.contentType != "" && g.contentType != w.contentType) {
			t.Errorf("request %d: %s %s?%s (%s), want %s %s?%s (%s)", i, g.method, g.path, g.query, g.contentType, w.method, w.path, w.query, w.contentType)
		}
	}
}

// Pods and PodDisruptionBudgets: namespaced and cluster-wide paths, the
// DELETE's options, and the eviction: POSTed to the pod's subresource
// once, even when the server answers 429 with a Retry-After (client-go's
// typed client would wait and retry).
func TestPodsEvictionsAndPDBs(t *testing.T) {
	for _, media := range medias {
		t.Run(media, func(t *testing.T) {
			ctx := context.Background()
			s := newAPIServer(t, media, func(r *http.Request) (int, runtime.Object) {
				switch {
				case strings.HasSuffix(r.URL.Path, "/eviction"):
					return 429, &metav1.Status{Status: metav1.StatusFailure, Code: 429, Reason: metav1.StatusReasonTooManyRequests,
						Message: "Cannot evict pod as it would violate the pod's disruption budget.", Details: &metav1.StatusDetails{RetryAfterSeconds: 1}}
				case r.URL.Path == "/api/v1/namespaces/ns/pods/gone":
					return 404, &metav1.Status{Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound, Message: `pods "gone" not found`}
				case strings.HasSuffix(r.URL.Path, "/pods"):
					return 200, &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "5"}, Items: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "a"}}}}
				case strings.HasSuffix(r.URL.Path, "/poddisruptionbudgets"):
					return 200, &policyv1.PodDisruptionBudgetList{Items: []policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Name: "budget", Namespace: "ns"}}}}
				case r.Method == "DELETE":
					return 200, &metav1.Status{Status: metav1.StatusSuccess}
				}
				return 200, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}}
			})
			c := s.client()
			pl, err := c.Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=a"})
			if err != nil || len(pl.Items) != 1 || pl.Items[0].Spec.NodeName != "a" || pl.ResourceVersion != "5" {
				t.Fatalf("Pods(\"\").List = %+v, %v", pl, err)
			}
			if p, err := c.Pods("ns").Get(ctx, "p", metav1.GetOptions{}); err != nil || p.UID != "u1" {
				t.Fatalf("Get = %+v, %v", p, err)
			}
			if _, err := c.Pods("ns").Get(ctx, "gone", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("Get of a missing pod: %v, want NotFound", err)
			}
			zero, uid := int64(0), types.UID("u1")
			if err := c.Pods("ns").Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			grace := int64(30)
			err = c.Pods("ns").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
				DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &uid}}})
			if !apierrors.IsTooManyRequests(err) {
				t.Errorf("EvictV1 refused by a PDB: %v, want the 429", err)
			}
			budgets, err := c.PodDisruptionBudgets("").List(ctx, metav1.ListOptions{})
			if err != nil || len(budgets.Items) != 1 || budgets.Items[0].Name != "budget" {
				t.Fatalf("PodDisruptionBudgets(\"\").List = %+v, %v", budgets, err)
			}
			reqs := s.requests()
			checkRequests(t, reqs, []request{
				{method: "GET", path: "/api/v1/pods", query: "fieldSelector=spec.nodeName%3Da"},
				{method: "GET", path: "/api/v1/namespaces/ns/pods/p"},
				{method: "GET", path: "/api/v1/namespaces/ns/pods/gone"},
				{method: "DELETE", path: "/api/v1/namespaces/ns/pods/p", contentType: media},
				{method: "POST", path: "/api/v1/namespaces/ns/pods/p/eviction", contentType: media}, // once
				{method: "GET", path: "/apis/policy/v1/poddisruptionbudgets"},
			})
			var del metav1.DeleteOptions
			if err := runtime.DecodeInto(codecs.UniversalDecoder(schema.GroupVersion{Version: "v1"}), reqs[3].body, &del); err != nil ||
				del.GracePeriodSeconds == nil || *del.GracePeriodSeconds != 0 || del.Preconditions == nil || *del.Preconditions.UID != "u1" {
				t.Errorf("DELETE body decodes to %+v, %v", del, err)
			}
			var ev policyv1.Eviction
			if err := runtime.DecodeInto(codecs.UniversalDecoder(policyv1.SchemeGroupVersion), reqs[4].body, &ev); err != nil ||
				ev.Name != "p" || ev.DeleteOptions == nil || *ev.DeleteOptions.GracePeriodSeconds != 30 || *ev.DeleteOptions.Preconditions.UID != "u1" {
				t.Errorf("eviction body decodes to %+v, %v", ev, err)
			}
		})
	}
}

// A watch decodes the server's stream of events, in either media type;
// TimeoutSeconds is also the request's timeout, as in client-go's typed
// clients.
func TestWatch(t *testing.T) {
	for _, media := range medias {
		t.Run(media, func(t *testing.T) {
			s := newAPIServer(t, media, nil)
			s.events = []watch.Event{
				{Type: watch.Added, Object: node("a")},
				{Type: watch.Modified, Object: node("a")},
				{Type: watch.Deleted, Object: node("a")},
			}
			timeout := int64(30)
			w, err := s.client().Nodes().Watch(context.Background(), metav1.ListOptions{ResourceVersion: "7", TimeoutSeconds: &timeout})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			var got []watch.EventType
			deadline := time.After(10 * time.Second)
			for len(got) < len(s.events) {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						t.Fatalf("watch ended after %v", got)
					}
					n, isNode := ev.Object.(*corev1.Node)
					if !isNode || n.Name != "a" || n.Spec.ProviderID != node("a").Spec.ProviderID {
						t.Fatalf("event %s carries %#v", ev.Type, ev.Object)
					}
					got = append(got, ev.Type)
				case <-deadline:
					t.Fatalf("got %v, want three events", got)
				}
			}
			if got[0] != watch.Added || got[1] != watch.Modified || got[2] != watch.Deleted {
				t.Errorf("events %v", got)
			}
			r := s.requests()[0]
			if r.path != "/api/v1/nodes" || r.query != "resourceVersion=7&timeout=30s&timeoutSeconds=30&watch=true" {
				t.Errorf("watch request %s?%s", r.path, r.query)
			}
		})
	}
}

// The Event sink writes in the Event's namespace; a repeated Event is a
// strategic merge patch.
func TestEventSink(t *testing.T) {
	for _, media := range medias {
		t.Run(media, func(t *testing.T) {
			s := newAPIServer(t, media, func(r *http.Request) (int, runtime.Object) {
				return 201, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "n.1", Namespace: "default"}, Reason: "Cordoned"}
			})
			c := s.client()
			sink := c.EventSink()
			e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "n.1", Namespace: "default"}, Reason: "Cordoned",
				InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "n"}}
			if got, err := sink.Create(e); err != nil || got.Reason != "Cordoned" {
				t.Fatalf("Create = %+v, %v", got, err)
			}
			if _, err := sink.Update(e); err != nil {
				t.Fatalf("Update: %v", err)
			}
			if _, err := sink.Patch(e, []byte(`{"count":2}`)); err != nil {
				t.Fatalf("Patch: %v", err)
			}
			checkRequests(t, s.requests(), []request{
				{method: "POST", path: "/api/v1/namespaces/default/events", contentType: media},
				{method: "PUT", path: "/api/v1/namespaces/default/events/n.1", contentType: media},
				{method: "PATCH", path: "/api/v1/namespaces/default/events/n.1", contentType: string(types.StrategicMergePatchType)},
			})
		})
	}
}
