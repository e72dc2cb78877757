package kubediff

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/internal/kube"
)

// seen is a watch event as compared: its type and the object rendered by
// norm, with the resourceVersion kept (both watch the same object).
type seen struct {
	Type            watch.EventType
	ResourceVersion string
	Object          string
	// Error is the predicates of an ERROR event's status.
	Error []string
}

// next reads n events of w (or fails t after a timeout).
func next(t *testing.T, what string, w watch.Interface, n int) []seen {
	t.Helper()
	var out []seen
	timeout := time.NewTimer(opTimeout)
	defer timeout.Stop()
	for len(out) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("%s: the watch ended after %d events, want %d", what, len(out), n)
			}
			s := seen{Type: ev.Type, Object: norm(t, ev.Object, nil)}
			if m, ok := ev.Object.(metav1.Object); ok {
				s.ResourceVersion = m.GetResourceVersion()
			}
			if ev.Type == watch.Error {
				s.Error = kinds(apierrors.FromObject(ev.Object))
			}
			out = append(out, s)
		case <-timeout.C:
			t.Fatalf("%s: %d events after %v, want %d: %v", what, len(out), opTimeout, n, out)
		}
	}
	return out
}

// TestWatchesAgree watches a node through both clients, as the node
// informer does (from a list's resourceVersion, by name, with bookmarks),
// and requires both to see the same update; a refused watch must fail
// alike, and a streaming list
// (sendInitialEvents, what a reflector asks for when the WatchList
// feature is on) must deliver the same objects and bookmark.
func TestWatchesAgree(t *testing.T) {
	name, _ := names("watch")
	node(t, name, t.Name())
	byName := "metadata.name=" + name
	for _, ct := range contentTypes {
		t.Run(string(ct), func(t *testing.T) {
			p := newPair(t, config(env.Config, ct))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			list, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: byName})
			if err != nil {
				t.Fatal(err)
			}
			start := func(c kube.Client, o metav1.ListOptions) watch.Interface {
				w, err := c.Nodes().Watch(ctx, o)
				if err != nil {
					t.Fatalf("watch %+v: %v", o, err)
				}
				t.Cleanup(w.Stop)
				return w
			}

			// An update seen by both watches.
			o := metav1.ListOptions{FieldSelector: byName, ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true}
			ow, lw := start(p.ours.client, o), start(p.lib.client, o)
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"update":%q}}}`, ct)
			updated, err := env.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			os, ls := next(t, "ours", ow, 1), next(t, "client-go", lw, 1)
			if d := cmp.Diff(ls, os); d != "" {
				t.Errorf("the watches saw different updates (-client-go +ours):\n%s", d)
			}
			if os[0].Type != watch.Modified || os[0].ResourceVersion != updated.ResourceVersion {
				t.Errorf("ours saw %s at %s, want MODIFIED at %s", os[0].Type, os[0].ResourceVersion, updated.ResourceVersion)
			}
			sameWire(t, "watch from a list", p, requestsOnly, nil, nil)

			// A watch the API server refuses (an unknown field): the
			// error comes from Watch itself.
			o = metav1.ListOptions{FieldSelector: "spec.bogus=x"}
			_, oerr := p.ours.client.Nodes().Watch(ctx, o)
			_, lerr := p.lib.client.Nodes().Watch(ctx, o)
			sameError(t, "refused watch", "BadRequest", oerr, lerr, nil, nil)
			sameWire(t, "refused watch", p, withAnswers, nil, nil)

			// A streaming list: the node, then the bookmark that ends the
			// initial events.
			o = metav1.ListOptions{
				FieldSelector: byName, AllowWatchBookmarks: true,
				SendInitialEvents: ptr.To(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
			}
			os, ls = next(t, "ours", start(p.ours.client, o), 2), next(t, "client-go", start(p.lib.client, o), 2)
			if d := cmp.Diff(ls, os); d != "" {
				t.Errorf("the streaming lists differ (-client-go +ours):\n%s", d)
			}
			if os[0].Type != watch.Added || os[1].Type != watch.Bookmark {
				t.Errorf("ours: a streaming list gave %s then %s, want ADDED then BOOKMARK", os[0].Type, os[1].Type)
			}
			sameWire(t, "streaming list", p, requestsOnly, nil, nil)
		})
	}
}
