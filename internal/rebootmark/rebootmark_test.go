package rebootmark

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/internal/clocktest"
	"lifeboat.dev/lifeboat/internal/event"
)

func TestRebooted(t *testing.T) {
	at := clocktest.Epoch
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

func TestDecide(t *testing.T) {
	at := clocktest.Epoch
	m := Marker{EventID: "e", Code: HealthSystemReboot, BootID: "boot-1", At: at}
	rebooted := m
	rebooted.Rebooted = true
	tests := []struct {
		name       string
		annotation string
		bootID     string
		bootTime   time.Time
		want       Verdict
		wantErr    bool
	}{
		{"no marker", "", "boot-2", time.Time{}, None, false},
		{"unreadable marker", "{", "boot-2", time.Time{}, None, true},
		{"same boot ID", m.Encode(), "boot-1", time.Time{}, Pending, false},
		{"new boot ID", m.Encode(), "boot-2", time.Time{}, Undo, false},
		{"node reports no boot ID, no boot time (queue mode)", m.Encode(), "", time.Time{}, Pending, false},
		{"already rebooted", rebooted.Encode(), "boot-3", time.Time{}, Done, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, v, err := Decide(tt.annotation, tt.bootID, tt.bootTime)
			if (err != nil) != tt.wantErr || v != tt.want {
				t.Fatalf("Decide = %v, %v; want %v (error %v)", v, err, tt.want, tt.wantErr)
			}
			if v != None && got.EventID != "e" {
				t.Errorf("marker = %+v", got)
			}
		})
	}
}

func TestMarkerRoundTrip(t *testing.T) {
	m := Marker{EventID: "scheduled-change-abc", Code: CodeInstanceReboot, BootID: "b", At: clocktest.Epoch, Rebooted: true}
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

func TestIsReboot(t *testing.T) {
	sc := func(src event.Source, code string) event.Event {
		return event.Event{Kind: event.ScheduledChange, Source: src, Action: code}
	}
	tests := []struct {
		e    event.Event
		want bool
	}{
		{sc(event.SourceIMDS, CodeSystemReboot), true},
		{sc(event.SourceIMDS, CodeInstanceReboot), true},
		{sc(event.SourceIMDS, "instance-stop"), false},
		{sc(event.SourceIMDS, HealthSystemReboot), false},
		{sc(event.SourceSQS, HealthSystemReboot), true},
		{sc(event.SourceSQS, HealthInstanceReboot), true},
		{sc(event.SourceSQS, HealthInstanceRebootFlexible), true},
		{sc(event.SourceSQS, "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"), false},
		{sc(event.SourceSQS, "AWS_EC2_INSTANCE_POWER_MAINTENANCE_SCHEDULED"), false},
		{sc(event.SourceSQS, CodeSystemReboot), false},
		{event.Event{Kind: event.ScheduledChangeCanceled, Source: event.SourceSQS, Action: HealthSystemReboot}, false},
	}
	for _, tt := range tests {
		if got := IsReboot(tt.e); got != tt.want {
			t.Errorf("IsReboot(%s %s %s) = %v, want %v", tt.e.Kind, tt.e.Source, tt.e.Action, got, tt.want)
		}
	}
	stop := sc(event.SourceIMDS, "instance-stop")
	stop.ID = "1"
	reboot := sc(event.SourceSQS, HealthInstanceReboot)
	reboot.ID = "2"
	if e, ok := RebootEvent([]event.Event{stop, reboot}); !ok || e.ID != "2" {
		t.Errorf("RebootEvent = %v, %v; want event 2", e, ok)
	}
	if _, ok := RebootEvent([]event.Event{stop}); ok {
		t.Error("RebootEvent found a reboot among none")
	}
}

func TestHook(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: "boot-1"}}}
	existing := Marker{EventID: "sc-old", Code: HealthSystemReboot, BootID: "boot-0", At: clocktest.Epoch.Add(-time.Hour)}
	n.Annotations = map[string]string{Annotation: existing.Encode()}
	byName := func(name string) (*corev1.Node, bool) { return n, name == "n" }
	now := clocktest.Epoch
	hook := Hook(byName, clocktesting.NewFakePassiveClock(now))
	reboot := func(id, code string) event.Event {
		return event.Event{ID: id, Kind: event.ScheduledChange, Source: event.SourceSQS, Action: code}
	}
	tests := []struct {
		name string
		node string
		due  []event.Event
		want map[string]string
	}{
		{"not a reboot", "n", []event.Event{reboot("sc-stop", "AWS_EC2_INSTANCE_STOP_SCHEDULED"), {ID: "spot", Kind: event.SpotInterruption, Source: event.SourceSQS}}, nil},
		{"a new reboot maintenance", "n", []event.Event{reboot("sc-new", HealthInstanceReboot)}, map[string]string{Annotation: Marker{
			EventID: "sc-new", Code: HealthInstanceReboot, BootID: "boot-1", At: now}.Encode()}},
		{"the recorded one is kept as it is", "n", []event.Event{reboot("sc-old", HealthSystemReboot)}, map[string]string{Annotation: existing.Encode()}},
		{"a node not in the cache: no boot ID", "other", []event.Event{reboot("sc-new", HealthSystemReboot)}, map[string]string{Annotation: Marker{
			EventID: "sc-new", Code: HealthSystemReboot, At: now}.Encode()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, hook(tt.node, tt.due)); d != "" {
				t.Errorf("annotations (-want +got):\n%s", d)
			}
		})
	}
}
