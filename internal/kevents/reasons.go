package kevents

import corev1 "k8s.io/api/core/v1"

// Reason is the reason of a Kubernetes Event lifeboat records, with the
// type every Event of that reason has.
type Reason struct {
	Name string
	Type string // corev1.EventTypeNormal or corev1.EventTypeWarning
}

// Reasons are the reasons of every Event lifeboat records, in the order
// docs/operations.md describes them. hack/docdrift holds the list to the
// code both ways (each reason a constant the code records, with that type,
// and nothing recorded that is not here) and to docs/events.md and
// docs/operations.md: a new reason goes here and into both documents.
var Reasons = []Reason{
	{"InterruptionReceived", corev1.EventTypeNormal},
	{"ChangeScheduled", corev1.EventTypeNormal},
	{"Cordoned", corev1.EventTypeNormal},
	{"Draining", corev1.EventTypeNormal},
	{"DrainForecastMiss", corev1.EventTypeWarning},
	{"Drained", corev1.EventTypeNormal},
	{"DeadlinePassed", corev1.EventTypeWarning},
	{"EvictionRefused", corev1.EventTypeWarning},
	{"BlockedPodDeleted", corev1.EventTypeWarning},
	{"ReplacementStarted", corev1.EventTypeNormal},
	{"ReplacementReady", corev1.EventTypeNormal},
	{"ReplacementSkipped", corev1.EventTypeWarning},
	{"ReplacementTimedOut", corev1.EventTypeWarning},
	{"PodStuck", corev1.EventTypeWarning},
	{"DrainIncomplete", corev1.EventTypeWarning},
	{"DrainInterrupted", corev1.EventTypeNormal},
	{"NodeGone", corev1.EventTypeNormal},
	{"NodeGone", corev1.EventTypeWarning},
	{"WaitingForVolumes", corev1.EventTypeNormal},
	{"VolumesDetached", corev1.EventTypeNormal},
	{"VolumesStillAttached", corev1.EventTypeWarning},
	{"VolumeAttachmentsUnknown", corev1.EventTypeWarning},
	{"WaitingForLoadBalancers", corev1.EventTypeNormal},
	{"LoadBalancersDrained", corev1.EventTypeNormal},
	{"LoadBalancersNotDrained", corev1.EventTypeWarning},
	{"LoadBalancersUnknown", corev1.EventTypeWarning},
	{"DaemonSetPodStopped", corev1.EventTypeNormal},
	{"DaemonSetPodNotStopped", corev1.EventTypeWarning},
	{"DaemonSetPodRecreated", corev1.EventTypeWarning},
	{"LifecycleDelayed", corev1.EventTypeNormal},
	{"LifecycleCompleted", corev1.EventTypeNormal},
	{"LifecycleAlreadyCompleted", corev1.EventTypeNormal},
	{"LifecycleActionLost", corev1.EventTypeWarning},
	{"LifecycleHookUnknown", corev1.EventTypeWarning},
	{"HeartbeatsFailing", corev1.EventTypeWarning},
	{"Uncordoned", corev1.EventTypeNormal},
	{"RebalanceCordonExpired", corev1.EventTypeNormal},
	{"OutOfServiceTainted", corev1.EventTypeNormal},
	{"OutOfServiceRemoved", corev1.EventTypeNormal},
	{"GhostNode", corev1.EventTypeWarning},
	{"GhostNodeDeleted", corev1.EventTypeNormal},
	{"ScaleInProtected", corev1.EventTypeNormal},
	{"ScaleInProtectionLifted", corev1.EventTypeNormal},
	{"Failed", corev1.EventTypeWarning},
}
