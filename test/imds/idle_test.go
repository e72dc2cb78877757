package imds

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	imdssrc "lifeboat.dev/lifeboat/internal/source/imds"
	"lifeboat.dev/lifeboat/test/testenv"
)

// This file sorts first: TestIdle runs before other tests leave
// namespaces behind whose deletion keeps the cluster busy.

// While idle (nothing announced) lifeboat reads the metadata with IMDSv2
// tokens and makes no Kubernetes request besides its watch of its own
// node, and stays small.
func TestIdle(t *testing.T) {
	w := newWorld(t, worldOptions{imds: testenv.IMDSOptions{Scenario: testenv.IMDSQuiet, IMDSv2Only: true}})
	w.eventually(20*time.Second, "ready", func() bool { return w.readyz() == 200 })
	// Earlier tests' namespaces being deleted make the namespace controller
	// list everything: wait until they are gone, so that the server's
	// counters below show the cluster at rest.
	w.eventually(90*time.Second, "earlier namespaces deleted", func() bool {
		list, err := kube.Client.CoreV1().Namespaces().List(w.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ns := range list.Items {
			if ns.Status.Phase == corev1.NamespaceTerminating {
				return false
			}
		}
		return true
	})
	time.Sleep(time.Second) // let the start-up requests settle
	const idle = 15 * time.Second
	lb0, srv0 := w.kubeRequests(), w.serverCounts()
	all0, _ := w.proxy.total()
	time.Sleep(idle)
	lb1, srv1 := w.kubeRequests(), w.serverCounts()
	all1, v1 := w.proxy.total()

	if d := nonWatchDelta(lb0, lb1); len(d) > 0 {
		t.Errorf("lifeboat's API requests while idle (want none): %v", d)
	}
	// Server side: nobody listed or read the node or its pods meanwhile
	// (other components watch too; their lists would show here as well).
	for _, k := range []string{"LIST nodes", "LIST pods", "GET pods"} {
		if d := srv1[k] - srv0[k]; d != 0 {
			t.Errorf("API server: %v %q requests while idle, want 0", d, k)
		}
	}
	serverDelta := map[string]float64{}
	for k, v := range srv1 {
		if v != srv0[k] {
			serverDelta[k] = v - srv0[k]
		}
	}
	t.Logf("API server requests from every client during %v idle: %v", idle, serverDelta)
	t.Logf("lifeboat's own requests since start: %v", lb1)
	reads := all1 - all0
	// Each path at every Every-th poll (imdssrc.Periods): about 1.47 reads
	// a poll, against 3.07 when three paths were read at every poll.
	polls := float64(idle / pollInterval)
	perPoll := 0.0
	for _, p := range imdssrc.Periods {
		perPoll += 1 / float64(p.Every)
	}
	if want := int(polls * perPoll * 0.7); reads < want {
		t.Errorf("metadata requests while idle = %d, want ≥ %d", reads, want)
	}
	if most := int(polls*perPoll) + len(imdssrc.Paths); reads > most {
		t.Errorf("metadata requests while idle = %d, want ≤ %d (each path at its own period)", reads, most)
	}
	if v1 != 0 {
		t.Errorf("%d IMDSv1 requests, want none", v1)
	}
	if puts := w.proxy.count("PUT /latest/api/token"); puts != 1 {
		t.Errorf("token requests = %d, want 1 (tokens are cached)", puts)
	}
	rss, err := w.lb.RSS()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("idle: %.1f metadata requests/s, RSS %d MiB", float64(reads)/idle.Seconds(), rss>>20)
	if rss > 100<<20 {
		t.Errorf("RSS %d MiB, want < 100 MiB", rss>>20)
	}
}
