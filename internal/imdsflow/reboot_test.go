package imdsflow

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/rebootmark"
	imdssrc "lifeboat.dev/lifeboat/internal/source/imds"
)

// fakeWriter records the reboot rule's writes.
type fakeWriter struct {
	uncordons [][]string // taint prefix, then annotations removed
	set       []map[string]string
	err       error
}

func (f *fakeWriter) Uncordon(_ context.Context, _ string, prefix string, annotations []string) (bool, error) {
	if f.err != nil {
		return false, f.err
	}
	f.uncordons = append(f.uncordons, append([]string{prefix}, annotations...))
	return true, nil
}

func (f *fakeWriter) SetAnnotations(_ context.Context, _ string, a map[string]string) error {
	f.set = append(f.set, a)
	return nil
}

func TestAfterReboot(t *testing.T) {
	at := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	marker := rebootmark.Marker{EventID: "scheduled-change-1", Code: imdssrc.CodeSystemReboot, BootID: "boot-1", At: at}
	rebooted := marker
	rebooted.Rebooted = true
	noBootID := marker
	noBootID.BootID = ""
	node := func(annotation, bootID string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{drain.AnnotationCordoned: "true"}}}
		if annotation != "" {
			n.Annotations[rebootmark.Annotation] = annotation
		}
		n.Status.NodeInfo.BootID = bootID
		return n
	}
	bootedAt := func(t time.Time) func() (time.Time, error) { return func() (time.Time, error) { return t, nil } }
	noBootTime := func() (time.Time, error) { return time.Time{}, errors.New("no /proc/stat") }
	tests := []struct {
		name     string
		node     *corev1.Node
		bootTime func() (time.Time, error)
		writeErr error
		wantSeen []string
		wantErr  bool
		wantUndo bool
	}{
		{"no marker", node("", "boot-2"), noBootTime, nil, nil, false, false},
		{"unreadable marker is ignored", node("{", "boot-2"), noBootTime, nil, nil, false, false},
		{"same boot: lifeboat restarted, the maintenance is pending", node(marker.Encode(), "boot-1"), bootedAt(at.Add(time.Hour)), nil, nil, false, false},
		{"new boot ID: rebooted", node(marker.Encode(), "boot-2"), noBootTime, nil, []string{marker.EventID}, false, true},
		{"no boot IDs, host booted after the cordon", node(noBootID.Encode(), ""), bootedAt(at.Add(time.Minute)), nil, []string{marker.EventID}, false, true},
		{"no boot IDs, host booted before the cordon", node(noBootID.Encode(), ""), bootedAt(at.Add(-time.Minute)), nil, nil, false, false},
		{"already undone: only remembered", node(rebooted.Encode(), "boot-2"), noBootTime, nil, []string{marker.EventID}, false, false},
		{"write fails", node(marker.Encode(), "boot-2"), noBootTime, errors.New("conflict"), nil, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &fakeWriter{err: tt.writeErr}
			rec := record.NewFakeRecorder(10)
			seen, err := afterReboot(t.Context(), tt.node, w, rec, slog.New(slog.NewTextHandler(io.Discard, nil)), tt.bootTime, false)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error %v", err, tt.wantErr)
			}
			if d := cmp.Diff(tt.wantSeen, seen); d != "" {
				t.Errorf("seen (-want +got):\n%s", d)
			}
			if !tt.wantUndo {
				if len(w.uncordons)+len(w.set) > 0 {
					t.Errorf("wrote %v %v, want nothing", w.uncordons, w.set)
				}
				return
			}
			if d := cmp.Diff([][]string{{"lifeboat.io/", drain.AnnotationEvents}}, w.uncordons); d != "" {
				t.Errorf("uncordon (-want +got):\n%s", d)
			}
			if len(w.set) != 1 {
				t.Fatalf("annotations set %v, want the marker once", w.set)
			}
			m, ok, err := rebootmark.DecodeMarker(w.set[0][rebootmark.Annotation])
			if err != nil || !ok || !m.Rebooted || m.EventID != marker.EventID {
				t.Errorf("marker written = %+v (%v, %v), want rebooted", m, ok, err)
			}
			select {
			case e := <-rec.Events:
				if want := "Normal Uncordoned"; len(e) < len(want) || e[:len(want)] != want {
					t.Errorf("event %q, want %s", e, want)
				}
			default:
				t.Error("no Uncordoned event")
			}
		})
	}
}
