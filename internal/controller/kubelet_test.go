package controller

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/kubeletshutdown"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/plan"
)

// fakeKubelet answers Verdict from a table and counts reads per node.
type fakeKubelet struct {
	mu       sync.Mutex
	verdicts map[string]kubeletshutdown.Verdict
	reads    map[string]int
}

func (f *fakeKubelet) Verdict(_ context.Context, node string) (kubeletshutdown.Verdict, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads[node]++
	v, ok := f.verdicts[node]
	if !ok {
		return v, errors.New("forbidden")
	}
	return v, nil
}

// Issue 25 item 5: with --plan-with-kubelet-shutdown (Deps.Kubelet) a
// Spot drain works to the notice's end plus the window the node's kubelet
// gives ordinary pods after it; a node without a window, or whose kubelet
// could not be read, is drained to the notice's end as without the option.
func TestSpotDrainPlansWithTheKubeletWindow(t *testing.T) {
	notice := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC) // spot()'s time
	end := notice.Add(2 * time.Minute)
	tests := []struct {
		name    string
		kubelet *fakeKubelet
		want    time.Time
	}{
		{"option off", nil, end},
		{"configured: 150 s, 30 s critical", &fakeKubelet{verdicts: map[string]kubeletshutdown.Verdict{"node-a": {State: kubeletshutdown.Configured, Total: 150 * time.Second, Ordinary: 2 * time.Minute, Critical: 30 * time.Second}}}, end.Add(2 * time.Minute)},
		{"not configured", &fakeKubelet{verdicts: map[string]kubeletshutdown.Verdict{"node-a": {State: kubeletshutdown.NotConfigured}}}, end},
		{"not readable", &fakeKubelet{}, end},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &fakeDrainer{cordons: map[string]int{}, drains: map[string]int{}, release: make(chan struct{})}
			deps := Deps{Drainer: d}
			if tt.kubelet != nil {
				tt.kubelet.reads = map[string]int{}
				deps.Kubelet = tt.kubelet
			}
			c := run(t, fake.NewClientset(node("node-a", instA)), nodes.Options{}, deps,
				Options{Policy: plan.Policy{DrainKinds: []event.Kind{event.SpotInterruption}}})
			c.Submit("node-a", instA, time.Time{}, events(t, spot(instA)), 1)
			waitFor(t, "the drain to start", func() bool { return !d.lastDeadline().IsZero() })
			close(d.release)
			settled(t, c)
			if got := d.lastDeadline(); !got.Equal(tt.want) {
				t.Errorf("drain deadline %v, want %v", got, tt.want)
			}
			if tt.kubelet != nil && tt.kubelet.reads["node-a"] != 1 {
				t.Errorf("kubelet read %d times, want once", tt.kubelet.reads["node-a"])
			}
		})
	}
}

// The forecast works to the same deadline as the drain: a pod with 200 s
// of grace (--pod-grace-period) whose 150 s
// preStop sleep cannot fit the Spot notice is a certain miss, and with the
// kubelet's 2 min window after the notice it is not.
func TestForecastPlansWithTheKubeletWindow(t *testing.T) {
	tests := []struct {
		name    string
		kubelet *fakeKubelet
		want    int // DrainForecastMiss Events on the node
	}{
		{"option off", nil, 1},
		{"kubelet window 2m", &fakeKubelet{verdicts: map[string]kubeletshutdown.Verdict{"node-a": {State: kubeletshutdown.Configured, Total: 150 * time.Second, Ordinary: 2 * time.Minute, Critical: 30 * time.Second}}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &pdbSource{allowed: 1, podGrace: 200 * time.Second, sleep: 150 * time.Second}
			var deps Deps
			if tt.kubelet != nil {
				tt.kubelet.reads = map[string]int{}
				deps.Kubelet = tt.kubelet
			}
			checkSpotForecast(t, src, deps, Options{DeadlineMargin: 5 * time.Second}, tt.want)
		})
	}
}
