package imds

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"lifeboat.dev/lifeboat/internal/drain"
	imdssrc "lifeboat.dev/lifeboat/internal/source/imds"
	"lifeboat.dev/lifeboat/test/testenv"
)

// BenchmarkIMDS measures IMDS mode on the testbed: the detection delay
// (the Spot notice appears in the metadata → the node is cordoned), split
// into the wait for the next poll and lifeboat's own work, and the
// metadata and Kubernetes API request rates while idle and during an
// event (notice → node drained of 3 pods). The notice is made to appear
// by a proxy in front of the metadata mock, so its time is exact.
//
//	go test ./test/imds -run '^$' -bench IMDS -benchtime 10x
func BenchmarkIMDS(b *testing.B) {
	for _, poll := range []time.Duration{time.Second, 100 * time.Millisecond} {
		b.Run("poll="+poll.String(), func(b *testing.B) { benchIMDS(b, poll) })
	}
}

func benchIMDS(b *testing.B, poll time.Duration) {
	spot := imdssrc.PathSpot
	w := newWorld(b, worldOptions{
		imds: testenv.IMDSOptions{Scenario: testenv.IMDSSpot, SpotTime: time.Now().Add(time.Hour)},
		poll: poll, hide: []string{spot},
	})

	// Idle.
	w.eventually(30*time.Second, "ready", func() bool { return w.readyz() == 200 })
	time.Sleep(2 * time.Second)
	const idle = 10 * time.Second
	imds0, _ := w.proxy.total()
	kube0 := w.kubeRequests()
	time.Sleep(idle)
	imds1, _ := w.proxy.total()
	kube1 := w.kubeRequests()
	idleIMDS := float64(imds1-imds0) / idle.Seconds()
	idleAPI := sum(nonWatchDelta(kube0, kube1)) / idle.Seconds()
	rss, err := w.lb.RSS()
	if err != nil {
		b.Fatal(err)
	}

	var detect, wait, act, eventIMDS, eventAPI []float64
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		if i > 0 {
			// A fresh lifeboat (a Spot notice is one event per instance)
			// on an uncordoned node, polling at rest.
			w.proxy.hide(spot)
			w.lb.Stop()
			w.reset()
			if err := w.lb.Restart(w.ctx); err != nil {
				b.Fatal(err)
			}
			w.eventually(30*time.Second, "ready", func() bool { return w.readyz() == 200 })
		}
		pods := []string{w.pod(500 * time.Millisecond), w.pod(500 * time.Millisecond), w.pod(500 * time.Millisecond)}
		time.Sleep(poll + 500*time.Millisecond)
		watcher, err := kube.Client.CoreV1().Nodes().Watch(w.ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", w.node).String()})
		if err != nil {
			b.Fatal(err)
		}
		imdsBefore, _ := w.proxy.total()
		kubeBefore := w.kubeRequests()
		b.StartTimer()

		shown := w.proxy.show(spot)
		cordoned := waitCordoned(b, watcher)
		b.StopTimer()
		watcher.Stop()
		read, ok := w.proxy.served(spot)
		if !ok {
			b.Fatal("the notice was never read")
		}
		w.eventually(30*time.Second, "the pods evicted", func() bool {
			for _, p := range pods {
				if w.podExists(p) {
					return false
				}
			}
			return true
		})
		w.eventually(10*time.Second, "the drain finished", func() bool {
			return w.metric("lifeboat_actions_total", "action", "drain", "result", "ok") == 1
		})
		done := time.Now()
		imdsAfter, _ := w.proxy.total()
		kubeAfter := w.kubeRequests()

		detect = append(detect, ms(cordoned.Sub(shown)))
		wait = append(wait, ms(read.Sub(shown)))
		act = append(act, ms(cordoned.Sub(read)))
		eventIMDS = append(eventIMDS, float64(imdsAfter-imdsBefore)/done.Sub(shown).Seconds())
		eventAPI = append(eventAPI, sum(nonWatchDelta(kubeBefore, kubeAfter)))
	}
	b.StopTimer()
	b.ReportMetric(mean(detect), "detect-ms")
	b.ReportMetric(mean(wait), "poll-wait-ms")
	b.ReportMetric(mean(act), "act-ms")
	b.ReportMetric(idleIMDS, "idle-imds-req/s")
	b.ReportMetric(idleAPI, "idle-api-req/s")
	b.ReportMetric(mean(eventIMDS), "event-imds-req/s")
	b.ReportMetric(mean(eventAPI), "event-api-req")
	b.ReportMetric(float64(rss>>20), "rss-MiB")
	fmt.Printf("IMDS mode, poll %v, %d events: detection (notice visible → node cordoned) p50 %.0f ms, p90 %.0f ms, max %.0f ms"+
		" (waiting for the poll p50 %.0f ms, lifeboat's own work p50 %.0f ms, max %.0f ms);"+
		" idle: %.1f metadata req/s, %.2f API req/s (watch aside); event (3 pods): %.0f API requests, %.1f metadata req/s; RSS %d MiB\n",
		poll, len(detect), pct(detect, 50), pct(detect, 90), pct(detect, 100), pct(wait, 50), pct(act, 50), pct(act, 100),
		idleIMDS, idleAPI, mean(eventAPI), mean(eventIMDS), rss>>20)
}

// reset uncordons the node and removes what lifeboat left on it.
func (w *world) reset() {
	w.t.Helper()
	n := w.nodeNow()
	n.Spec.Unschedulable = false
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return strings.HasPrefix(t.Key, "lifeboat.io/") })
	for k := range n.Annotations {
		if strings.HasPrefix(k, "lifeboat.io/") {
			delete(n.Annotations, k)
		}
	}
	if _, err := kube.Client.CoreV1().Nodes().Update(w.ctx, n, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// waitCordoned returns when the watch shows the node cordoned by lifeboat.
func waitCordoned(b *testing.B, watcher watch.Interface) time.Time {
	b.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-watcher.ResultChan():
			if !ok {
				b.Fatal("node watch closed")
			}
			if n, ok := ev.Object.(*corev1.Node); ok && n.Spec.Unschedulable && n.Annotations[drain.AnnotationCordoned] == "true" {
				return time.Now()
			}
		case <-timeout:
			b.Fatal("the node was not cordoned within 30 s")
		}
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func sum(m map[string]float64) float64 {
	s := 0.0
	for _, v := range m {
		s += v
	}
	return s
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// pct returns the p-th percentile (nearest rank).
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
