package message

import (
	"strings"

	"lifeboat.dev/lifeboat/internal/event"
)

// testNotification is the Event (in NTH's synthetic samples, the
// LifecycleTransition) of the notification Auto Scaling sends when a hook or
// a notification target is created.
const testNotification = "autoscaling:TEST_NOTIFICATION"

// lifecycle turns an Auto Scaling lifecycle action (EventBridge detail or
// flat notification) into an event. kind is what the EventBridge
// detail-type says, or "" for a notification; LifecycleTransition wins when
// present. The ID is the lifecycle action token, or the RequestId, or the
// envelope id when there is no token.
func lifecycle(n *asgNotification, kind event.Kind, env *envelope) ([]event.Event, string, error) {
	transition := n.LifecycleTransition.trimmed()
	if strings.EqualFold(transition, testNotification) || strings.EqualFold(n.Event.trimmed(), testNotification) {
		return nil, IgnoredTestNotification, nil
	}
	switch {
	case strings.EqualFold(transition, event.TransitionLaunching):
		kind, transition = event.LifecycleLaunch, event.TransitionLaunching
	case strings.EqualFold(transition, event.TransitionTerminating):
		kind, transition = event.LifecycleTerminate, event.TransitionTerminating
	case transition == "" && n.Event != "":
		// A scaling notification (autoscaling:EC2_INSTANCE_LAUNCH, ...).
		return nil, IgnoredUnhandledNotification, nil
	case transition == "" && kind == event.LifecycleLaunch:
		transition = event.TransitionLaunching
	case transition == "" && kind == event.LifecycleTerminate:
		transition = event.TransitionTerminating
	default:
		return nil, IgnoredLifecycleTransitionUnknown, nil
	}
	id, err := instanceID(n.EC2InstanceID, "EC2InstanceId")
	if err != nil {
		return nil, "", err
	}
	ev := env.newEvent(kind, id)
	ev.Lifecycle = &event.LifecycleAction{
		GroupName:   n.AutoScalingGroupName.trimmed(),
		HookName:    n.LifecycleHookName.trimmed(),
		Token:       n.LifecycleActionToken.trimmed(),
		Transition:  transition,
		Origin:      n.Origin.trimmed(),
		Destination: n.Destination.trimmed(),
		Metadata:    string(n.NotificationMetadata),
	}
	ev.ID = event.ID(kind, id, firstNonEmpty(ev.Lifecycle.Token, n.RequestID.trimmed(), env.id, env.rawTime))
	return []event.Event{ev}, "", nil
}

// parseAutoScaling parses a lifecycle-hook notification sent straight to
// the queue (or unwrapped from SNS).
func parseAutoScaling(b *wire) (Result, error) {
	n := &b.asgNotification
	env := envelope{
		rawTime: n.Time.trimmed(),
		account: n.AccountID.trimmed(),
		region:  arnRegion(n.AutoScalingGroupARN.trimmed()),
	}
	env.time = parseTime(env.rawTime)
	evs, reason, err := lifecycle(n, "", &env)
	if err != nil {
		return Result{Format: FormatAutoScaling}, err
	}
	return Result{Events: evs, Format: FormatAutoScaling, Ignored: reason}, nil
}
