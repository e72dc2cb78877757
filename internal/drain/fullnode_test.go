package drain_test

import (
	"fmt"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/test/testenv"
)

// A node with more pods than a page is listed whole by the real API
// server, in pages, consistently and from any version.
func TestNodePodsAFullNode(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	node, ns := newNode(t), env.Namespace(t)
	n := drain.NodePodsPage + 5
	var specs []testenv.PodSpec
	for i := range n {
		specs = append(specs, testenv.PodSpec{Namespace: ns, Name: fmt.Sprint("p-", i), Node: node})
	}
	if err := env.CreatePods(ctx, specs, 16); err != nil {
		t.Fatal(err)
	}
	for _, minVersion := range []string{"", drain.AnyVersion} {
		list, err := drain.NodePods(ctx, client, node, minVersion)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, p := range list.Items {
			seen[p.Name] = true
		}
		if len(list.Items) != n || len(seen) != n || list.Continue != "" {
			t.Errorf("NodePods(minVersion %q) = %d pods (%d different), continue %q; want the node's %d", minVersion, len(list.Items), len(seen), list.Continue, n)
		}
	}
}
