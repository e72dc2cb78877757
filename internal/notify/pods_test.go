package notify

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/event"
)

func TestListPods(t *testing.T) {
	many := make([]string, 12)
	for i := range many {
		many[i] = fmt.Sprintf("ns/p%d", i)
	}
	tests := []struct {
		pods []string
		want string
	}{
		{nil, ""},
		{[]string{"a/b"}, "a/b"},
		{many[:10], strings.Join(many[:10], ", ")},
		{many, strings.Join(many[:10], ", ") + " and 2 more"},
	}
	for _, tt := range tests {
		if got := ListPods(tt.pods); got != tt.want {
			t.Errorf("ListPods(%d pods) = %q, want %q", len(tt.pods), got, tt.want)
		}
	}
}

// The finished notification names the evicted pods in the summary (slack,
// teams) and in the JSON (pods).
func TestFinishedNotificationNamesPods(t *testing.T) {
	n := Notification{Phase: PhaseFinished, Node: "n1", Kind: event.SpotInterruption, Time: time.Unix(0, 0), Pods: []string{"shop/web-0", "shop/cart-1"}}
	if s := summary(n); !strings.Contains(s, "Evicted 2 pods: shop/web-0, shop/cart-1.") {
		t.Errorf("summary %q; want the pods named", s)
	}
	for _, name := range []string{TemplateSlack, TemplateTeams, TemplateJSON} {
		body, err := renderNamed(t, name, n)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(body), "shop/cart-1") {
			t.Errorf("%s body %s; want the pods named", name, body)
		}
	}
}

func renderNamed(t *testing.T, name string, n Notification) ([]byte, error) {
	t.Helper()
	tmpl, err := loadTemplate(name)
	if err != nil {
		return nil, err
	}
	return tmpl.render(n)
}

// Issue 23 item 5: the finished notification names the pods cut off (still
// on the node when its drain ended) and why, in the summary (slack, teams)
// and in the JSON (cutOff).
func TestFinishedNotificationNamesCutOffPods(t *testing.T) {
	cut := "shop/cart-1: not-started (eviction refused (429): Cannot evict pod as it would violate the pod's disruption budget.)"
	n := Notification{Phase: PhaseFinished, Node: "n1", Kind: event.SpotInterruption, Time: time.Unix(0, 0), Pods: []string{"shop/web-0"}, CutOff: []string{cut}}
	if s := summary(n); !strings.Contains(s, "Cut off 1 pods (still on the node when its drain ended): "+cut+".") {
		t.Errorf("summary %q; want the pod cut off named, and why", s)
	}
	for _, name := range []string{TemplateSlack, TemplateTeams, TemplateJSON} {
		body, err := renderNamed(t, name, n)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(body), "shop/cart-1: not-started") {
			t.Errorf("%s body %s; want the pod cut off named", name, body)
		}
	}
}
