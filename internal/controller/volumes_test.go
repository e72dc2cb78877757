package controller

import (
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/plan"
)

// fakeVolumes is a VolumeAttachment cache whose node-a attachments go at
// a given time.
type fakeVolumes struct {
	mu       sync.Mutex
	unsynced bool
	goneAt   time.Time // zero: never
}

func (f *fakeVolumes) Synced() bool { f.mu.Lock(); defer f.mu.Unlock(); return !f.unsynced }

func (f *fakeVolumes) OnNode(node string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if node != "node-a" || !f.goneAt.IsZero() && time.Now().After(f.goneAt) {
		return nil
	}
	return []string{"csi-0123"}
}

// Issue 17 section 4: a terminate action is completed with CONTINUE only
// once the node's VolumeAttachments are gone, bounded by
// --volume-detach-timeout; without a readable cache it is not held up.
func TestTerminateWaitsForVolumesToDetach(t *testing.T) {
	const timeout = 1500 * time.Millisecond
	for _, tc := range []struct {
		name      string
		vols      func(start time.Time) *fakeVolumes
		minWait   time.Duration // completion no earlier than this after submit
		maxWait   time.Duration
		wantEvent string
	}{
		{"detached after 600 ms: completed after", func(s time.Time) *fakeVolumes { return &fakeVolumes{goneAt: s.Add(600 * time.Millisecond)} },
			600 * time.Millisecond, timeout, "Normal VolumesDetached"},
		{"never detached: completed at the bound", func(time.Time) *fakeVolumes { return &fakeVolumes{} },
			timeout, timeout + time.Second, "Warning VolumesStillAttached"},
		{"attachments unreadable: not held beyond the bound", func(time.Time) *fakeVolumes { return &fakeVolumes{unsynced: true} },
			0, timeout + time.Second, "Warning VolumeAttachmentsUnknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lc := &fakeLifecycle{owned: true, hook: lifecycle.Hook{HeartbeatTimeout: 30 * time.Second, GlobalTimeout: time.Hour}}
			rec := record.NewFakeRecorder(100)
			d := &fakeDrainer{cordons: map[string]int{}, drains: map[string]int{}, release: make(chan struct{})}
			close(d.release)
			start := time.Now()
			vols := tc.vols(start)
			c := run(t, fake.NewClientset(readyNode("node-a", instA)), nodes.Options{}, Deps{Drainer: d, ASG: lc, Recorder: rec, Volumes: vols},
				Options{Policy: plan.Policy{DrainKinds: []event.Kind{event.LifecycleTerminate}, CompleteLifecycle: true},
					LifecycleTimeoutResult: "ABANDON", RetryBackoff: 20 * time.Millisecond, VolumeDetachTimeout: timeout})
			c.Submit("node-a", instA, time.Time{}, events(t, lifecycleBody(event.TransitionTerminating, instA, "tok-vol")), 1)
			waitFor(t, "the terminate action completed", func() bool { return len(lc.snapshot().completed) == 1 })
			took := time.Since(start)
			if got := lc.snapshot().completed; got[0] != "CONTINUE" {
				t.Errorf("completed with %v, want CONTINUE", got)
			}
			if took < tc.minWait || took > tc.maxWait {
				t.Errorf("completed %v after submit, want %v..%v", took, tc.minWait, tc.maxWait)
			}
			var seen []string
			for len(rec.Events) > 0 {
				seen = append(seen, <-rec.Events)
			}
			if !strings.Contains(strings.Join(seen, "\n"), tc.wantEvent) {
				t.Errorf("no %s Event; got %q", tc.wantEvent, seen)
			}
		})
	}
}
