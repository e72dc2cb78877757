package imds

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"lifeboat.dev/lifeboat/internal/event"
)

func TestRebooted(t *testing.T) {
	at := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	m := Marker{EventID: "e", Code: CodeSystemReboot, BootID: "boot-1", At: at}
	noID := Marker{EventID: "e", Code: CodeSystemReboot, At: at}
	tests := []struct {
		name     string
		m        Marker
		bootID   string
		bootTime time.Time
		want     bool
	}{
		{"same boot ID: no reboot (a lifeboat restart)", m, "boot-1", at.Add(time.Hour), false},
		{"new boot ID: rebooted", m, "boot-2", time.Time{}, true},
		{"new boot ID wins over an earlier boot time", m, "boot-2", at.Add(-time.Hour), true},
		{"node reports no boot ID: host booted after the cordon", m, "", at.Add(time.Minute), true},
		{"node reports no boot ID: host booted before", m, "", at.Add(-time.Minute), false},
		{"marker without boot ID: boot time decides", noID, "boot-9", at.Add(time.Minute), true},
		{"nothing known: no reboot", noID, "", time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Rebooted(tt.m, tt.bootID, tt.bootTime); got != tt.want {
				t.Errorf("Rebooted = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMarkerRoundTrip(t *testing.T) {
	m := Marker{EventID: "scheduled-change-abc", Code: CodeInstanceReboot, BootID: "b", At: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), Rebooted: true}
	got, ok, err := DecodeMarker(m.Encode())
	if err != nil || !ok {
		t.Fatalf("DecodeMarker: %v, %v", ok, err)
	}
	if d := cmp.Diff(m, got); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	if _, ok, err := DecodeMarker(""); ok || err != nil {
		t.Errorf("empty annotation: ok %v, err %v", ok, err)
	}
	for _, bad := range []string{"{", `{"code":"system-reboot"}`} {
		if _, _, err := DecodeMarker(bad); err == nil {
			t.Errorf("DecodeMarker(%q): no error", bad)
		}
	}
}

func TestRebootEvent(t *testing.T) {
	stop := event.Event{ID: "1", Kind: event.ScheduledChange, Source: event.SourceIMDS, Action: "instance-stop"}
	reboot := event.Event{ID: "2", Kind: event.ScheduledChange, Source: event.SourceIMDS, Action: CodeInstanceReboot}
	health := event.Event{ID: "3", Kind: event.ScheduledChange, Source: event.SourceSQS, Action: CodeSystemReboot}
	canceled := event.Event{ID: "4", Kind: event.ScheduledChangeCanceled, Source: event.SourceIMDS, Action: CodeSystemReboot}
	if e, ok := RebootEvent([]event.Event{stop, health, canceled, reboot}); !ok || e.ID != "2" {
		t.Errorf("RebootEvent = %v, %v; want event 2", e, ok)
	}
	if _, ok := RebootEvent([]event.Event{stop, health, canceled}); ok {
		t.Error("RebootEvent found a reboot among none")
	}
}

func TestParseBootTime(t *testing.T) {
	stat := []byte("cpu  1 2 3\nintr 5\nctxt 7\nbtime 1893456000\nprocesses 9\n")
	got, err := ParseBootTime(stat)
	if err != nil || !got.Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("ParseBootTime = %v, %v", got, err)
	}
	for _, bad := range []string{"cpu 1\n", "btime x\n", "btime 0\n"} {
		if _, err := ParseBootTime([]byte(bad)); err == nil {
			t.Errorf("ParseBootTime(%q): no error", bad)
		}
	}
}
