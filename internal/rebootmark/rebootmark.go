// Package rebootmark is the reboot rule, shared by IMDS mode and queue
// mode: when lifeboat cordons a node for a maintenance that reboots the
// instance, it records the maintenance on the node (Marker, in the same
// update as the cordon); once the node has rebooted, lifeboat undoes its
// cordon and marks the record rebooted (docs/imds.md, docs/operations.md).
//
// It owns the record (Annotation, Marker), which maintenance codes reboot
// (IsReboot) and the decision (Decide, pure). It does not write to Nodes:
// imdsflow and rebootwatch carry the decision out through package drain.
package rebootmark

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/event"
)

// Annotation is set on the node, together with lifeboat's cordon, when
// lifeboat acts on a reboot-type maintenance. Its value is a Marker in
// JSON. After the reboot it tells lifeboat to uncordon the node, and to
// not act again on the same maintenance while it is still listed.
const Annotation = "lifeboat.io/reboot-maintenance"

// Maintenance codes whose maintenance reboots the instance.
const (
	// CodeSystemReboot and CodeInstanceReboot are the instance metadata's
	// (events/maintenance/scheduled: Code), IMDS mode.
	CodeSystemReboot   = "system-reboot"
	CodeInstanceReboot = "instance-reboot"
	// The AWS Health eventTypeCodes of the same maintenance (queue mode).
	HealthSystemReboot           = "AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED"
	HealthInstanceReboot         = "AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED"
	HealthInstanceRebootFlexible = "AWS_EC2_INSTANCE_REBOOT_FLEXIBLE_MAINTENANCE_SCHEDULED"
)

// Marker is the value of Annotation.
type Marker struct {
	// EventID is the ScheduledChange lifeboat cordoned the node for.
	EventID string `json:"eventID"`
	// Code is the maintenance code: system-reboot, instance-reboot (IMDS
	// mode) or the AWS Health eventTypeCode (queue mode).
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
		return Marker{}, false, fmt.Errorf("reading annotation %s: %w", Annotation, err)
	}
	if m.EventID == "" {
		return Marker{}, false, fmt.Errorf("reading annotation %s: no eventID", Annotation)
	}
	return m, true, nil
}

// IsReboot reports whether e is a scheduled change whose maintenance
// reboots the instance: an IMDS maintenance with a reboot code, or an AWS
// Health scheduled change (queue) with a reboot eventTypeCode.
func IsReboot(e event.Event) bool {
	if e.Kind != event.ScheduledChange {
		return false
	}
	switch e.Source {
	case event.SourceIMDS:
		return e.Action == CodeSystemReboot || e.Action == CodeInstanceReboot
	case event.SourceSQS:
		return e.Action == HealthSystemReboot || e.Action == HealthInstanceReboot || e.Action == HealthInstanceRebootFlexible
	}
	return false
}

// RebootEvent returns the first event among evs whose maintenance reboots
// the instance (IsReboot).
func RebootEvent(evs []event.Event) (event.Event, bool) {
	for _, e := range evs {
		if IsReboot(e) {
			return e, true
		}
	}
	return event.Event{}, false
}

// Rebooted says whether the node has rebooted since lifeboat recorded m:
//   - when both m and the node carry a boot ID (status.nodeInfo.bootID,
//     which the kubelet reads from /proc/sys/kernel/random/boot_id at every
//     start), if and only if they differ; equal boot IDs mean no reboot,
//     whatever the clocks say;
//   - otherwise, when the host's boot time is known (IMDS mode: btime in
//     /proc/stat; queue mode never knows it), if it is after m.At.
//
// A lifeboat restart without a reboot changes neither, so it is not taken
// for the end of the maintenance.
func Rebooted(m Marker, nodeBootID string, bootTime time.Time) bool {
	if m.BootID != "" && nodeBootID != "" {
		return m.BootID != nodeBootID
	}
	return !bootTime.IsZero() && !m.At.IsZero() && bootTime.After(m.At)
}

// Verdict is what the reboot rule says about a node.
type Verdict int

const (
	// None: the node carries no (readable) marker.
	None Verdict = iota
	// Pending: the node has not rebooted since the cordon.
	Pending
	// Undo: the node has rebooted: undo lifeboat's cordon, mark the marker
	// rebooted.
	Undo
	// Done: the undo was already made; only the maintenance's event ID is
	// remembered (it must not be acted on again).
	Done
)

func (v Verdict) String() string {
	switch v {
	case Pending:
		return "pending"
	case Undo:
		return "undo"
	case Done:
		return "done"
	}
	return "none"
}

// Decide applies the reboot rule to a marker annotation value, the node's
// boot ID and the host's boot time (zero: unknown). An unreadable marker
// gives None and the error, to be reported.
func Decide(annotation, nodeBootID string, bootTime time.Time) (Marker, Verdict, error) {
	m, ok, err := DecodeMarker(annotation)
	switch {
	case err != nil || !ok:
		return Marker{}, None, err
	case m.Rebooted:
		return m, Done, nil
	case Rebooted(m, nodeBootID, bootTime):
		return m, Undo, nil
	}
	return m, Pending, nil
}

// UndoMessage is the message of the Uncordoned Event lifeboat reports
// when it undoes its cordon after the reboot; lifeboatCordoned says
// whether lifeboat cordoned the node (the node is then uncordoned).
func UndoMessage(m Marker, lifeboatCordoned bool) string {
	msg := fmt.Sprintf("rebooted for maintenance %s: lifeboat's taints removed", m.Code)
	if lifeboatCordoned {
		return msg + ", uncordoned"
	}
	return msg + " (the node was cordoned before lifeboat: left cordoned)"
}

// Hook returns the controller's CordonAnnotations hook: when lifeboat
// cordons a node for a reboot-type maintenance it records the maintenance,
// the node's boot ID (from the node cache, byName) and the time, so that
// lifeboat can tell when the maintenance is over.
func Hook(byName func(string) (*corev1.Node, bool), clk clock.PassiveClock) func(string, []event.Event) map[string]string {
	return func(node string, due []event.Event) map[string]string {
		e, ok := RebootEvent(due)
		if !ok {
			return nil
		}
		n, found := byName(node)
		if found {
			// Cordon is called again on every plan: keep the first record.
			if m, ok, _ := DecodeMarker(n.Annotations[Annotation]); ok && m.EventID == e.ID {
				return map[string]string{Annotation: n.Annotations[Annotation]}
			}
		}
		m := Marker{EventID: e.ID, Code: e.Action, At: clk.Now().UTC()}
		if found {
			m.BootID = n.Status.NodeInfo.BootID
		}
		return map[string]string{Annotation: m.Encode()}
	}
}
