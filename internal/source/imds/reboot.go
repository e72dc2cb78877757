package imds

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"lifeboat.dev/lifeboat/internal/event"
)

// AnnotationReboot is set on the node, together with lifeboat's cordon, when
// lifeboat acts on a reboot-type maintenance (system-reboot,
// instance-reboot). Its value is a Marker in JSON. After the reboot it tells
// the next lifeboat on the node to uncordon it, and to not act again on the
// same maintenance while the metadata still lists it.
const AnnotationReboot = "lifeboat.io/reboot-maintenance"

// Marker is the value of AnnotationReboot.
type Marker struct {
	// EventID is the ScheduledChange lifeboat cordoned the node for.
	EventID string `json:"eventID"`
	// Code is the maintenance code (system-reboot, instance-reboot).
	Code string `json:"code"`
	// BootID is the node's status.nodeInfo.bootID (reported by the kubelet)
	// when lifeboat cordoned it; empty when the kubelet reported none.
	BootID string `json:"bootID,omitempty"`
	// At is when lifeboat cordoned the node.
	At time.Time `json:"at"`
	// Rebooted is set once lifeboat has seen the reboot and uncordoned.
	Rebooted bool `json:"rebooted,omitempty"`
}

// Encode returns the annotation value.
func (m Marker) Encode() string {
	b, _ := json.Marshal(m) // plain strings, a time and a bool: cannot fail
	return string(b)
}

// DecodeMarker reads an annotation value; "" gives ok false.
func DecodeMarker(s string) (m Marker, ok bool, err error) {
	if s == "" {
		return Marker{}, false, nil
	}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return Marker{}, false, fmt.Errorf("reading annotation %s: %w", AnnotationReboot, err)
	}
	if m.EventID == "" {
		return Marker{}, false, fmt.Errorf("reading annotation %s: no eventID", AnnotationReboot)
	}
	return m, true, nil
}

// IsReboot reports whether a maintenance code reboots the instance.
func IsReboot(code string) bool {
	return code == CodeSystemReboot || code == CodeInstanceReboot
}

// RebootEvent returns the first IMDS ScheduledChange among evs whose
// maintenance reboots the instance.
func RebootEvent(evs []event.Event) (event.Event, bool) {
	for _, e := range evs {
		if e.Kind == event.ScheduledChange && e.Source == event.SourceIMDS && IsReboot(e.Action) {
			return e, true
		}
	}
	return event.Event{}, false
}

// Rebooted is the reboot rule: the node has rebooted since lifeboat
// recorded m when
//   - both m and the node carry a boot ID (status.nodeInfo.bootID, which the
//     kubelet reads from /proc/sys/kernel/random/boot_id at every start) and
//     they differ; equal boot IDs mean no reboot, whatever the clocks say;
//   - otherwise, when the host's boot time (btime in /proc/stat, the same
//     kernel for every container) is after m.At.
//
// A lifeboat restart without a reboot changes neither, so it is not taken
// for the end of the maintenance.
func Rebooted(m Marker, nodeBootID string, bootTime time.Time) bool {
	if m.BootID != "" && nodeBootID != "" {
		return m.BootID != nodeBootID
	}
	return !bootTime.IsZero() && !m.At.IsZero() && bootTime.After(m.At)
}

// ParseBootTime returns the boot time in the contents of /proc/stat (the
// btime line, seconds since the epoch).
func ParseBootTime(procStat []byte) (time.Time, error) {
	sc := bufio.NewScanner(bytes.NewReader(procStat))
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "btime ")
		if !ok {
			continue
		}
		sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || sec <= 0 {
			return time.Time{}, fmt.Errorf("reading boot time: btime %q", v)
		}
		return time.Unix(sec, 0).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("reading boot time: no btime line")
}
