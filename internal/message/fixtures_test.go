package message

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"lifeboat.dev/lifeboat/internal/event"
)

// testdata/ holds the real AWS samples of /work/shared/fixtures (eventbridge/,
// sns-wrapped/, sqs-direct/, sqs-api/), with the same subdirectories and file
// names; their origin and edits are in that directory's SOURCES.md.
const testdata = "testdata"

// fixture is one message body stored in testdata/.
type fixture struct {
	name string // file path under testdata/, plus "#i" for the i-th message of an sqs-api/ file
	body []byte
}

// loadFixtures returns every message body in testdata/, in a stable order.
// A file is one body, except under sqs-api/, where a file is a
// ReceiveMessage response (or one serialised message) and each Body is one.
func loadFixtures(tb testing.TB) []fixture {
	tb.Helper()
	var out []fixture
	err := filepath.WalkDir(testdata, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == filepath.Join(testdata, "fuzz") {
				return filepath.SkipDir // go test -fuzz's corpus, not AWS samples
			}
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, testdata+string(filepath.Separator)))
		if !strings.HasPrefix(rel, "sqs-api/") {
			out = append(out, fixture{name: rel, body: data})
			return nil
		}
		bodies, err := receiveMessageBodies(data)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		for i, b := range bodies {
			out = append(out, fixture{name: fmt.Sprintf("%s#%d", rel, i), body: b})
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// receiveMessageBodies returns the Body of each message in an SQS
// ReceiveMessage response ({"Messages":[{"Body":...}]}) or in one
// serialised message ({"Body":...}).
func receiveMessageBodies(data []byte) ([][]byte, error) {
	var resp struct {
		Messages []struct{ Body *string }
		Body     *string
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, err
	}
	var out [][]byte
	for _, m := range resp.Messages {
		if m.Body != nil {
			out = append(out, []byte(*m.Body))
		}
	}
	if resp.Body != nil {
		out = append(out, []byte(*resp.Body))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no message Body")
	}
	return out, nil
}

// fixtureRow is what one fixture must parse to.
type fixtureRow struct {
	file string
	// why explains a sample that is ignored or rejected (required for those).
	why     string
	want    Result
	wantErr string // MalformedError.Reason
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

// events is a Result of format with evs, each from SQS.
func events(format string, evs ...event.Event) Result {
	for i := range evs {
		evs[i].Source = event.SourceSQS
	}
	return Result{Format: format, Events: evs}
}

func ignoredResult(format, reason string) Result { return Result{Format: format, Ignored: reason} }

// lifecycleEvent builds a lifecycle event with the ID lifeboat derives: the
// token (or the RequestId, the envelope id, the raw time).
func lifecycleEvent(kind event.Kind, instance string, tm time.Time, region, account string, la event.LifecycleAction, discriminator string) event.Event {
	return event.Event{
		ID:         event.ID(kind, instance, discriminator),
		Kind:       kind,
		InstanceID: instance,
		Time:       tm,
		Region:     region,
		Account:    account,
		Lifecycle:  &la,
	}
}

const (
	docInstance = "i-1234567890abcdef0"
	nthInstance = "i-0b662ef9931388ba0"
	v2Instance  = "i-0123456789abcdef1"
	docAccount  = "123456789012"
	docToken    = "87654321-4321-4321-4321-210987654321"
	docEnvID    = "12345678-1234-1234-1234-123456789012"
)

// Lifecycle actions of the ASG user guide samples.
var (
	docLaunch = event.LifecycleAction{
		GroupName: "my-asg", HookName: "my-lifecycle-hook", Token: docToken,
		Transition: event.TransitionLaunching, Metadata: "additional-info",
	}
	docTerminate = event.LifecycleAction{
		GroupName: "my-asg", HookName: "my-lifecycle-hook", Token: docToken,
		Transition: event.TransitionTerminating, Metadata: "additional-info",
	}
)

func withPlaces(la event.LifecycleAction, origin, destination string) event.LifecycleAction {
	la.Origin, la.Destination = origin, destination
	return la
}

func withoutMetadata(la event.LifecycleAction) event.LifecycleAction {
	la.Metadata = ""
	return la
}

func warmPool(hook, token, transition, origin, destination string) event.LifecycleAction {
	return event.LifecycleAction{
		GroupName: "my-asg", HookName: hook, Token: token, Transition: transition,
		Origin: origin, Destination: destination, Metadata: "additional-info",
	}
}

// autoscalingIgnored are the aws.autoscaling events that report what already
// happened (scaling activities, instance refresh): nothing to act on.
var autoscalingIgnored = []string{
	"aws-doc-2023-archive.instance-refresh-cancelled.published.json",
	"aws-doc-2023-archive.instance-refresh-checkpoint-reached.published.json",
	"aws-doc-2023-archive.instance-refresh-failed.published.json",
	"aws-doc-2023-archive.instance-refresh-started.published.json",
	"aws-doc-2023-archive.instance-refresh-succeeded.published.json",
	"aws-doc-2023-archive.launch-successful.published.json",
	"aws-doc-2023-archive.launch-unsuccessful.published.json",
	"aws-doc-2023-archive.terminate-successful.published.json",
	"aws-doc-2023-archive.terminate-unsuccessful.published.json",
	"aws-doc-current.launch-successful.published.json",
	"aws-doc-current.launch-unsuccessful.published.json",
	"aws-doc-current.terminate-successful.published.json",
	"aws-doc-current.terminate-unsuccessful.published.json",
	"aws-lambda-go-testdata.launch-successful.json",
	"aws-lambda-go-testdata.launch-unsuccessful.json",
	"aws-lambda-go-testdata.terminate-successful.json",
	"aws-lambda-go-testdata.terminate-unsuccessful.json",
}

func fixtureRows() []fixtureRow {
	var rows []fixtureRow
	for _, f := range autoscalingIgnored {
		rows = append(rows, fixtureRow{
			file: "eventbridge/autoscaling-ignore/" + f,
			why:  "scaling-activity and instance-refresh events (EC2 Instance Launch/Terminate Successful/Unsuccessful, with spaces) report the past; only the hyphenated lifecycle actions are acted on",
			want: ignoredResult(FormatEventBridge, IgnoredUnhandledDetailType),
		})
	}

	// The lifecycle actions of the ASG docs. Samples with the placeholder
	// time "yyyy-mm-ddThh:mm:ssZ" still act (time unknown): the token names
	// the action, the time is informational.
	rows = append(rows,
		fixtureRow{
			file: "eventbridge/autoscaling-lifecycle/aws-doc-2023-archive.launch-lifecycle-action.published.json",
			want: events(FormatEventBridge, lifecycleEvent(event.LifecycleLaunch, docInstance, time.Time{}, "us-west-2", docAccount, docLaunch, docToken)),
		},
		fixtureRow{
			file: "eventbridge/autoscaling-lifecycle/aws-doc-2023-archive.terminate-lifecycle-action.published.json",
			want: events(FormatEventBridge, lifecycleEvent(event.LifecycleTerminate, docInstance, time.Time{}, "us-west-2", docAccount, docTerminate, docToken)),
		},
		fixtureRow{
			file: "eventbridge/autoscaling-lifecycle/aws-doc-current.launch-lifecycle-action.filled.json",
			want: events(FormatEventBridge, lifecycleEvent(event.LifecycleLaunch, docInstance, at("2021-02-01T17:18:06Z"), "us-west-2", docAccount,
				withPlaces(docLaunch, event.PlaceEC2, event.PlaceAutoScalingGroup), docToken)),
		},
		fixtureRow{
			file: "eventbridge/autoscaling-lifecycle/aws-doc-current.launch-lifecycle-action.published.json",
			want: events(FormatEventBridge, lifecycleEvent(event.LifecycleLaunch, docInstance, time.Time{}, "us-west-2", docAccount,
				withPlaces(docLaunch, event.PlaceEC2, event.PlaceAutoScalingGroup), docToken)),
		},
		fixtureRow{
			file: "eventbridge/autoscaling-lifecycle/aws-doc-current.terminate-lifecycle-action.filled.json",
			want: events(FormatEventBridge, lifecycleEvent(event.LifecycleTerminate, docInstance, at("2022-03-28T00:12:37Z"), "us-west-2", docAccount,
				withPlaces(docTerminate, event.PlaceAutoScalingGroup, event.PlaceEC2), docToken)),
		},
		fixtureRow{
			file: "eventbridge/autoscaling-lifecycle/aws-doc-current.terminate-lifecycle-action.published.json",
			want: events(FormatEventBridge, lifecycleEvent(event.LifecycleTerminate, docInstance, time.Time{}, "us-west-2", docAccount,
				withPlaces(docTerminate, event.PlaceAutoScalingGroup, event.PlaceEC2), docToken)),
		},
		fixtureRow{
			file: "eventbridge/autoscaling-lifecycle/aws-lambda-go-testdata.launch-lifecycle-action.json",
			want: events(FormatEventBridge, lifecycleEvent(event.LifecycleLaunch, docInstance, at("1970-01-01T00:00:00Z"), "us-west-2", docAccount, docLaunch, docToken)),
		},
		fixtureRow{
			file: "eventbridge/autoscaling-lifecycle/aws-lambda-go-testdata.terminate-lifecycle-action.json",
			want: events(FormatEventBridge, lifecycleEvent(event.LifecycleTerminate, docInstance, at("1970-01-01T00:00:00Z"), "us-west-2", docAccount,
				withoutMetadata(docTerminate), docToken)),
		},
		fixtureRow{
			file: "eventbridge/autoscaling-lifecycle/nth-e2e.terminate-lifecycle-action.filled.json",
			want: events(FormatEventBridge, lifecycleEvent(event.LifecycleTerminate, "i-0633ac2b0d9769723", at("2024-03-23T03:26:43Z"), "us-east-1", docAccount,
				event.LifecycleAction{
					GroupName: "nth-integ-test", HookName: "cluster-termination-handler",
					Token: "0befcbdb-6ecd-498a-9ff7-ae9b54447cd6", Transition: event.TransitionTerminating,
				}, "0befcbdb-6ecd-498a-9ff7-ae9b54447cd6")),
		},
		fixtureRow{
			file: "eventbridge/autoscaling-lifecycle/nth.terminate-lifecycle-action-kops.json",
			want: events(FormatEventBridge, lifecycleEvent(event.LifecycleTerminate, "i-0633ac2b0d9769723", at("2020-07-01T22:19:58Z"), "us-east-1", docAccount,
				event.LifecycleAction{
					GroupName: "testt1.demo-0a20f32c.kops.sh", HookName: "cluster-termination-handler",
					Token: "0befcbdb-6ecd-498a-9ff7-ae9b54447cd6", Transition: event.TransitionTerminating,
				}, "0befcbdb-6ecd-498a-9ff7-ae9b54447cd6")),
		},
		// NTH v2's partial envelopes: version "1" and "2" are accepted (the
		// detail-type fixes the schema), no token, group or hook: the node
		// is still drained; completion is the planner's call.
		fixtureRow{
			file: "eventbridge/autoscaling-lifecycle/nth-v2-test.terminate-lifecycle-action-version1-terminating.partial.filled.json",
			want: events(FormatEventBridge, lifecycleEvent(event.LifecycleTerminate, v2Instance, time.Time{}, "", "",
				event.LifecycleAction{Transition: event.TransitionTerminating}, "")),
		},
		fixtureRow{
			file: "eventbridge/autoscaling-lifecycle/nth-v2-test.terminate-lifecycle-action-version2-terminating.partial.filled.json",
			want: events(FormatEventBridge, lifecycleEvent(event.LifecycleTerminate, v2Instance, time.Time{}, "", "",
				event.LifecycleAction{Transition: event.TransitionTerminating}, "")),
		},
		fixtureRow{
			file: "eventbridge/autoscaling-lifecycle/nth-v2-test.terminate-lifecycle-action-version1-invalid-transition.partial.filled.json",
			why:  `LifecycleTransition "test:INVALID" is neither launching nor terminating`,
			want: ignoredResult(FormatEventBridge, IgnoredLifecycleTransitionUnknown),
		},
		fixtureRow{
			file: "eventbridge/autoscaling-lifecycle/nth-v2-test.terminate-lifecycle-action-version2-invalid-transition.partial.filled.json",
			why:  `LifecycleTransition "test:INVALID" is neither launching nor terminating`,
			want: ignoredResult(FormatEventBridge, IgnoredLifecycleTransitionUnknown),
		},
	)

	// Warm pools: Origin and Destination are passed through; deciding what
	// "AutoScalingGroup -> WarmPool" means is the planner's job.
	const (
		launchHook    = "my-launch-lifecycle-hook"
		terminateHook = "my-termination-lifecycle-hook"
		tokEC2ToASG   = "87654321-4321-4321-4321-21098EXAMPLE"
		tokEC2ToWP    = "71514b9d-6a40-4b26-8523-05e7eEXAMPLE"
		tokWPToASG    = "19cc4d4a-e450-4d1c-b448-0de67EXAMPLE"
		tokASGToWP    = "42694b3d-4b70-6a62-8523-09a1eEXAMPLE"
	)
	ec2ToWP := warmPool(launchHook, tokEC2ToWP, event.TransitionLaunching, event.PlaceEC2, event.PlaceWarmPool)
	wpToASG := warmPool(launchHook, tokWPToASG, event.TransitionLaunching, event.PlaceWarmPool, event.PlaceAutoScalingGroup)
	asgToWP := warmPool(terminateHook, tokASGToWP, event.TransitionTerminating, event.PlaceAutoScalingGroup, event.PlaceWarmPool)
	rows = append(rows,
		fixtureRow{
			file: "eventbridge/autoscaling-warm-pool/aws-doc-2023-archive.warmpool-launch-ec2-to-autoscalinggroup.json",
			want: events(FormatEventBridge, lifecycleEvent(event.LifecycleLaunch, docInstance, at("2021-02-01T17:18:06.082Z"), "us-west-2", docAccount,
				warmPool(launchHook, tokEC2ToASG, event.TransitionLaunching, event.PlaceEC2, event.PlaceAutoScalingGroup), tokEC2ToASG)),
		},
		fixtureRow{
			file: "eventbridge/autoscaling-warm-pool/aws-doc-2023-archive.warmpool-launch-ec2-to-warmpool.json",
			want: events(FormatEventBridge, lifecycleEvent(event.LifecycleLaunch, docInstance, at("2021-01-13T00:12:37.214Z"), "us-west-2", docAccount, ec2ToWP, tokEC2ToWP)),
		},
		fixtureRow{
			file: "eventbridge/autoscaling-warm-pool/aws-doc-2023-archive.warmpool-launch-warmpool-to-autoscalinggroup.json",
			want: events(FormatEventBridge, lifecycleEvent(event.LifecycleLaunch, docInstance, at("2021-01-19T00:35:52.359Z"), "us-west-2", docAccount, wpToASG, tokWPToASG)),
		},
		fixtureRow{
			file: "eventbridge/autoscaling-warm-pool/aws-doc-2023-archive.warmpool-terminate-autoscalinggroup-to-warmpool.json",
			want: events(FormatEventBridge, lifecycleEvent(event.LifecycleTerminate, docInstance, at("2022-03-28T00:12:37.214Z"), "us-west-2", docAccount, asgToWP, tokASGToWP)),
		},
		fixtureRow{
			file: "eventbridge/autoscaling-warm-pool/aws-doc-current.warmpool-launch-ec2-to-warmpool.published.json",
			want: events(FormatEventBridge, lifecycleEvent(event.LifecycleLaunch, docInstance, at("2021-01-13T00:12:37.214Z"), "us-west-2", docAccount, ec2ToWP, tokEC2ToWP)),
		},
		fixtureRow{
			file: "eventbridge/autoscaling-warm-pool/aws-doc-current.warmpool-launch-warmpool-to-autoscalinggroup.published.json",
			want: events(FormatEventBridge, lifecycleEvent(event.LifecycleLaunch, docInstance, at("2021-01-19T00:35:52.359Z"), "us-west-2", docAccount, wpToASG, tokWPToASG)),
		},
		fixtureRow{
			file: "eventbridge/autoscaling-warm-pool/aws-doc-current.warmpool-terminate-autoscalinggroup-to-warmpool.published.json",
			want: events(FormatEventBridge, lifecycleEvent(event.LifecycleTerminate, docInstance, at("2022-03-28T00:12:37.214Z"), "us-west-2", docAccount, asgToWP, tokASGToWP)),
		},
	)

	// Capacity reservations. Both detail-type spellings AWS documents are
	// accepted (see TestCapacityReservationAltDetailType).
	rows = append(rows,
		fixtureRow{
			file: "eventbridge/capacity-reservation/aws-doc.cr-instance-interruption-warning.filled.json",
			want: events(FormatEventBridge, event.Event{
				ID:         event.ID(event.CapacityReservationInterruption, docInstance, "terminate", "2025-06-01T12:02:00Z"),
				Kind:       event.CapacityReservationInterruption,
				InstanceID: docInstance,
				Action:     "terminate",
				Time:       at("2025-06-01T12:00:00Z"),
				Deadline:   at("2025-06-01T12:02:00Z"),
				Region:     "us-east-1",
				Account:    docAccount,
			}),
		},
		fixtureRow{
			file:    "eventbridge/capacity-reservation/aws-doc.cr-instance-interruption-warning.published.json",
			why:     `doc placeholder "instance-id": "[instance-id]" names no instance (the string-typed "resources" placeholder is tolerated)`,
			want:    Result{Format: FormatEventBridge},
			wantErr: MalformedInvalidInstanceID,
		},
		fixtureRow{
			file: "eventbridge/capacity-reservation/aws-doc-html-variant.cr-instance-interruption-warning-ALT-DETAIL-TYPE.published.json",
			why: `the ALT detail-type is recognised (the error is about the instance, not "unhandled-detail-type"); ` +
				`the doc placeholder "[instance-id]" names no instance`,
			want:    Result{Format: FormatEventBridge},
			wantErr: MalformedInvalidInstanceID,
		},
	)

	// AWS Health.
	const (
		retirementArn = "arn:aws:health:us-east-1::event/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED_90353408594353983"
		nthHealthArn  = "arn:aws:health:region::event/id"
		dedicatedHost = "AWS_EC2_DEDICATED_HOST_NETWORK_MAINTENANCE_SCHEDULED"
	)
	notScheduledEC2 := func(file, why string) fixtureRow {
		return fixtureRow{file: "eventbridge/health/" + file, why: why, want: ignoredResult(FormatEventBridge, IgnoredHealthNotEC2ScheduledChange)}
	}
	rows = append(rows,
		notScheduledEC2("aws-doc-ec2-guide.health-ec2-odcr-underutilization-accountNotification.json", "EC2 accountNotification about a Capacity Reservation"),
		notScheduledEC2("aws-doc-ec2-guide.health-ec2-odcr-underutilization-summary-accountNotification.json", "EC2 accountNotification; entities are not instances either"),
		notScheduledEC2("aws-doc-health-guide.health-ELASTICLOADBALANCING-api-issue.json", "service ELASTICLOADBALANCING, category issue"),
		notScheduledEC2("aws-doc-health-guide.health-LAMBDA-planned-lifecycle-scheduledChange-multi-entity.json", "a scheduledChange, but for service LAMBDA"),
		notScheduledEC2("aws-doc-health-guide.health-ec2-instance-store-drive-degraded-issue-backupEvent.json", "EC2 issue (degraded drive), not a scheduled change"),
		notScheduledEC2("aws-doc-health-guide.health-ec2-operational-issue-public.json", "public EC2 operational issue"),
		notScheduledEC2("aws-health-tools.health-ec2-instance-store-drive-degraded-issue-2016.json", "EC2 issue (degraded drive), not a scheduled change"),
		notScheduledEC2("nth-v2-test.health-service-EC2-category-invalid-two-entities.partial.filled.json", `category "invalid"`),
		notScheduledEC2("nth-v2-test.health-service-INVALID-category-scheduledChange-two-entities.partial.filled.json", `service "INVALID"`),
		fixtureRow{
			// No resources key; the entity is an ARN; one-digit-free RFC 1123 dates.
			file: "eventbridge/health/aws-doc-health-guide.health-ec2-instance-retirement-scheduled-single-entity.json",
			want: events(FormatEventBridge, event.Event{
				ID:         event.ID(event.ScheduledChange, docInstance, retirementArn),
				Kind:       event.ScheduledChange,
				InstanceID: docInstance,
				Action:     "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
				Time:       at("2026-01-27T01:43:21Z"),
				Deadline:   at("2026-08-27T13:19:03Z"),
				Region:     "us-east-1",
				Account:    docAccount,
			}),
		},
		fixtureRow{
			// The instance is both an entity and a resource: one event.
			file: "eventbridge/health/nth-e2e.health-ec2-dedicated-host-network-maintenance-scheduled.filled.json",
			want: events(FormatEventBridge, event.Event{
				ID:         event.ID(event.ScheduledChange, nthInstance, nthHealthArn),
				Kind:       event.ScheduledChange,
				InstanceID: nthInstance,
				Action:     dedicatedHost,
				Time:       at("2024-03-23T03:26:43Z"),
				Deadline:   at("2016-06-05T15:10:09Z"),
				Region:     "us-east-1",
				Account:    "account id",
			}),
		},
		fixtureRow{
			file: "eventbridge/health/nth.health-ec2-dedicated-host-network-maintenance-scheduled.json",
			want: events(FormatEventBridge, event.Event{
				ID:         event.ID(event.ScheduledChange, "i-12345678", nthHealthArn),
				Kind:       event.ScheduledChange,
				InstanceID: "i-12345678",
				Action:     dedicatedHost,
				Time:       at("2016-06-05T06:27:57Z"),
				Deadline:   at("2016-06-05T15:10:09Z"),
				Region:     "us-east-1",
				Account:    "account id",
			}),
		},
		fixtureRow{
			// No eventArn: the ID falls back to eventTypeCode and startTime (both empty here).
			file: "eventbridge/health/nth-v2-test.health-service-EC2-category-scheduledChange-two-entities.partial.filled.json",
			want: events(FormatEventBridge,
				event.Event{ID: event.ID(event.ScheduledChange, v2Instance, "", ""), Kind: event.ScheduledChange, InstanceID: v2Instance},
				event.Event{ID: event.ID(event.ScheduledChange, "i-0123456789abcdef2", "", ""), Kind: event.ScheduledChange, InstanceID: "i-0123456789abcdef2"},
			),
		},
	)

	// Other aws.ec2 events lifeboat does not act on.
	for _, r := range []struct{ file, why string }{
		{"aws-doc.cr-interruptible-reclamation-completed.published.json", "sent to the reservation owner when reclamation is over; no instance to drain"},
		{"aws-doc-html-variant.cr-interruptible-reclamation-complete-ALT-DETAIL-TYPE.published.json", "HTML spelling of the same reclamation-completed event"},
		{"aws-doc.capacity-block-reservation-delivered.published-nonstandard.json", "Capacity Block event with non-standard keys (detail_type): recognised as EventBridge-shaped, nothing to act on"},
		{"aws-doc.capacity-block-reservation-expiration-warning.published-nonstandard.json", "Capacity Block expiry warning with non-standard keys (detail_type): no instance ID, nothing to act on"},
	} {
		rows = append(rows, fixtureRow{file: "eventbridge/other-ignore/" + r.file, why: r.why, want: ignoredResult(FormatEventBridge, IgnoredUnhandledDetailType)})
	}

	// Rebalance recommendations: the ID is the notice time, else the envelope id.
	rows = append(rows,
		fixtureRow{
			file: "eventbridge/rebalance-recommendation/aws-doc.rebalance-recommendation.filled.json",
			want: events(FormatEventBridge, event.Event{
				ID:   event.ID(event.RebalanceRecommendation, docInstance, "2020-10-27T08:22:00Z"),
				Kind: event.RebalanceRecommendation, InstanceID: docInstance,
				Time: at("2020-10-27T08:22:00Z"), Region: "us-east-2", Account: docAccount,
			}),
		},
		fixtureRow{
			file: "eventbridge/rebalance-recommendation/aws-doc.rebalance-recommendation.published.json",
			want: events(FormatEventBridge, event.Event{
				ID:   event.ID(event.RebalanceRecommendation, docInstance, docEnvID),
				Kind: event.RebalanceRecommendation, InstanceID: docInstance,
				Region: "us-east-2", Account: docAccount,
			}),
		},
		fixtureRow{
			file: "eventbridge/rebalance-recommendation/nth-v2-test.rebalance-recommendation.partial.filled.json",
			want: events(FormatEventBridge, event.Event{
				ID:   event.ID(event.RebalanceRecommendation, v2Instance, ""),
				Kind: event.RebalanceRecommendation, InstanceID: v2Instance,
			}),
		},
		fixtureRow{
			file: "eventbridge/rebalance-recommendation/nth.rebalance-recommendation.json",
			want: events(FormatEventBridge, event.Event{
				ID:   event.ID(event.RebalanceRecommendation, nthInstance, "2020-10-26T14:14:14Z"),
				Kind: event.RebalanceRecommendation, InstanceID: nthInstance,
				Time: at("2020-10-26T14:14:14Z"), Region: "us-east-1", Account: docAccount,
			}),
		},
	)

	// Spot interruptions: deadline = time + 2 min, except hibernate (now);
	// the ID is the action and the deadline, else the envelope id. The
	// doc's placeholder action "action" is not a documented action: the
	// event still acts (AWS is taking the instance) with Action "".
	spot := func(instance, action, tm, deadline, region, discriminator string) event.Event {
		ev := event.Event{
			ID:   event.ID(event.SpotInterruption, instance, action, discriminator),
			Kind: event.SpotInterruption, InstanceID: instance, Action: action,
			Region: region,
		}
		if region != "" {
			ev.Account = docAccount
		}
		if tm != "" {
			ev.Time, ev.Deadline = at(tm), at(deadline)
		}
		return ev
	}
	rows = append(rows,
		fixtureRow{
			file: "eventbridge/spot-interruption/aws-doc-2023-archive.spot-interruption-warning.published.json",
			want: events(FormatEventBridge, spot(docInstance, "", "", "", "us-east-2", docEnvID)),
		},
		fixtureRow{
			file: "eventbridge/spot-interruption/aws-doc-current.spot-interruption-warning.published.json",
			want: events(FormatEventBridge, spot(docInstance, "", "", "", "us-east-2", docEnvID)),
		},
		fixtureRow{
			file: "eventbridge/spot-interruption/aws-doc-current.spot-interruption-warning-hibernate.filled.json",
			want: events(FormatEventBridge, spot(docInstance, "hibernate", "2017-09-18T08:20:00Z", "2017-09-18T08:20:00Z", "us-east-2", "2017-09-18T08:20:00Z")),
		},
		fixtureRow{
			file: "eventbridge/spot-interruption/aws-doc-current.spot-interruption-warning-stop.filled.json",
			want: events(FormatEventBridge, spot(docInstance, "stop", "2017-09-18T08:20:00Z", "2017-09-18T08:22:00Z", "us-east-2", "2017-09-18T08:22:00Z")),
		},
		fixtureRow{
			file: "eventbridge/spot-interruption/aws-doc-current.spot-interruption-warning-terminate.filled.json",
			want: events(FormatEventBridge, spot(docInstance, "terminate", "2017-09-18T08:20:00Z", "2017-09-18T08:22:00Z", "us-east-2", "2017-09-18T08:22:00Z")),
		},
		fixtureRow{
			file: "eventbridge/spot-interruption/nth-v2-test.spot-interruption-warning-version1-no-action.partial.filled.json",
			want: events(FormatEventBridge, spot(v2Instance, "", "", "", "", "")),
		},
		fixtureRow{
			file: "eventbridge/spot-interruption/nth.spot-interruption-warning-terminate.filled.json",
			want: events(FormatEventBridge, spot(nthInstance, "terminate", "1970-01-01T00:00:00Z", "1970-01-01T00:02:00Z", "us-east-1", "1970-01-01T00:02:00Z")),
		},
	)

	// State changes: only stopping, stopped, shutting-down, terminated; the
	// deadline is the envelope time (AWS is already acting).
	state := func(instance, st, tm, region, account string) event.Event {
		ev := event.Event{
			ID:   event.ID(event.StateChange, instance, st, tm),
			Kind: event.StateChange, InstanceID: instance, Action: st,
			Region: region, Account: account,
		}
		if tm != "" {
			ev.Time, ev.Deadline = at(tm), at(tm)
		}
		return ev
	}
	rows = append(rows,
		fixtureRow{
			file: "eventbridge/state-change/aws-doc-ec2-guide.state-change-pending.published.json",
			why:  "pending is not a terminal state (this sample also has no version field, which is accepted)",
			want: ignoredResult(FormatEventBridge, IgnoredStateNotTerminal),
		},
		fixtureRow{
			file: "eventbridge/state-change/nth.state-change-pending.json",
			why:  "pending is not a terminal state",
			want: ignoredResult(FormatEventBridge, IgnoredStateNotTerminal),
		},
		fixtureRow{
			file: "eventbridge/state-change/nth-v2-test.state-change-invalid.partial.filled.json",
			why:  `"invalid" is not a state EC2 documents; membership is exact, never a substring test`,
			want: ignoredResult(FormatEventBridge, IgnoredStateNotTerminal),
		},
		fixtureRow{
			// " i-1234567890abcdef0" (leading space) as published: trimmed, and
			// the same event (same ID) as the sample without the space.
			file: "eventbridge/state-change/aws-doc-eventbridge-guide.state-change-terminated-leading-space-instance-id.json",
			want: events(FormatEventBridge, state(docInstance, "terminated", "2017-12-22T18:43:48Z", "us-west-1", "111122223333")),
		},
		fixtureRow{
			file: "eventbridge/state-change/aws-doc-eventbridge-guide.state-change-terminated.json",
			want: events(FormatEventBridge, state(docInstance, "terminated", "2017-12-22T18:43:48Z", "us-west-1", "111122223333")),
		},
		fixtureRow{
			file: "eventbridge/state-change/nth-e2e.state-change-stopping.filled.json",
			want: events(FormatEventBridge, state(nthInstance, "stopping", "2024-03-23T03:26:43Z", "us-east-1", docAccount)),
		},
		fixtureRow{
			file: "eventbridge/state-change/nth-v2-test.state-change-shutting-down.partial.filled.json",
			want: events(FormatEventBridge, state(v2Instance, "shutting-down", "", "", "")),
		},
		fixtureRow{
			file: "eventbridge/state-change/nth-v2-test.state-change-stopped.partial.filled.json",
			want: events(FormatEventBridge, state(v2Instance, "stopped", "", "", "")),
		},
		fixtureRow{
			file: "eventbridge/state-change/nth-v2-test.state-change-stopping.partial.filled.json",
			want: events(FormatEventBridge, state(v2Instance, "stopping", "", "", "")),
		},
		fixtureRow{
			file: "eventbridge/state-change/nth-v2-test.state-change-terminated.partial.filled.json",
			want: events(FormatEventBridge, state(v2Instance, "terminated", "", "", "")),
		},
	)

	// SNS-wrapped notifications.
	const (
		puddingGroup = "org-staging-docker-asg-$INSTANCE_ID"
		puddingToken = "2f346e45-4866-4bf1-a752-f6eea23011c7"
	)
	rows = append(rows,
		fixtureRow{
			// Region from the topic ARN: a hook's SNS target lives in the ASG's region.
			file: "sns-wrapped/travis-ci-pudding.sns-envelope.EC2_INSTANCE_TERMINATING.json",
			want: events(FormatSNS, lifecycleEvent(event.LifecycleTerminate, "i-4c87e963", at("2014-12-23T19:17:03.843Z"), "us-east-1", "341288657826",
				event.LifecycleAction{
					GroupName: puddingGroup, HookName: "org-staging-docker-lch-$INSTANCE_ID-terminating",
					Token: puddingToken, Transition: event.TransitionTerminating,
				}, puddingToken)),
		},
		fixtureRow{
			file: "sns-wrapped/travis-ci-pudding.sns-envelope.autoscaling-TEST_NOTIFICATION.json",
			why:  "autoscaling:TEST_NOTIFICATION (Event key, no instance) is sent when a hook is created: ack, do nothing",
			want: ignoredResult(FormatSNS, IgnoredTestNotification),
		},
		fixtureRow{
			file:    "sns-wrapped/aws-doc-sns.http-notification-json-format.generic.json",
			why:     `a well-formed SNS envelope whose Message ("Hello world!") is not JSON: not an AWS event, malformed for a lifeboat queue`,
			want:    Result{Format: FormatSNS},
			wantErr: MalformedInvalidJSON,
		},
		fixtureRow{
			file: "sns-wrapped/unidentified-repo.lambda-Records-Sns-format.EC2_INSTANCE_TERMINATING.message-linebreaks-joined.json",
			why:  "Lambda's SNS event shape ({\"Records\":[{\"Sns\":...}]}) is what Lambda receives, never an SQS body: not unwrapped",
			want: ignoredResult("", IgnoredUnknownFormat),
		},
		fixtureRow{
			// The Message of an SNS notification, extracted: a flat notification.
			file: "sns-wrapped/unidentified-repo.sns-Message-inner.EC2_INSTANCE_LAUNCHING-origin-ec2-dest-asg.json",
			want: events(FormatAutoScaling, lifecycleEvent(event.LifecycleLaunch, "i-085e741d27b2407a8", at("2024-03-23T03:58:50.043Z"), "", docAccount,
				event.LifecycleAction{
					GroupName: "example-asg", HookName: "dev-sg-dns-discovery-register",
					Token: "c9f2cd07-a390-4a22-913e-16df11021521", Transition: event.TransitionLaunching,
					Origin: event.PlaceEC2, Destination: event.PlaceAutoScalingGroup,
				}, "c9f2cd07-a390-4a22-913e-16df11021521")),
		},
		fixtureRow{
			file: "sns-wrapped/unidentified-repo.sns-Message-inner.EC2_INSTANCE_TERMINATING-origin-asg-dest-ec2.json",
			want: events(FormatAutoScaling, lifecycleEvent(event.LifecycleTerminate, "i-05629ab7d9287e205", at("2024-03-23T03:26:43.904Z"), "", docAccount,
				event.LifecycleAction{
					GroupName: "example-asg", HookName: "dev-sg-dns-discovery-drain",
					Token: "465e0162-e6af-4786-b4e8-bb544ae58790", Transition: event.TransitionTerminating,
					Origin: event.PlaceAutoScalingGroup, Destination: event.PlaceEC2,
				}, "465e0162-e6af-4786-b4e8-bb544ae58790")),
		},
	)

	// Notifications sent straight to SQS.
	rows = append(rows,
		fixtureRow{
			file: "sqs-direct/bnc-ecs-instance-drainer-test.EC2_INSTANCE_TERMINATING.json",
			want: events(FormatAutoScaling, lifecycleEvent(event.LifecycleTerminate, "i-0194708ef7e24dcc7", at("2018-05-16T20:13:40.414Z"), "", "609519224176",
				event.LifecycleAction{
					GroupName: "MarketDataECS-AutoScalingGroup-TZI0DMYKJBJG", HookName: "MarketDataECS-AutoScalingGroupTerminatingLifecycleHook-65KCAZVO19BF",
					Token: "602063c7-4a06-4a67-b8cf-87ccc33bdc86", Transition: event.TransitionTerminating,
				}, "602063c7-4a06-4a67-b8cf-87ccc33bdc86")),
		},
		fixtureRow{
			file: "sqs-direct/unidentified-repo-cdk.EC2_INSTANCE_LAUNCHING-origin-ec2-dest-asg.json",
			want: events(FormatAutoScaling, lifecycleEvent(event.LifecycleLaunch, "i-0853dfa8ce1627af9", at("2023-09-11T03:30:33.136Z"), "", "266608227104",
				event.LifecycleAction{
					GroupName: "DenoTestStack-AutoscalingGroupASG25987EFB-1FXPOBZFMDQTL", HookName: "DenoTestStack-AutoscalingGroupLifecycleHookOnLaunch49A664EF-3lhKS3adlUsx",
					Token: "917070d0-a303-474b-a36c-a5e38a19de5e", Transition: event.TransitionLaunching,
					Origin: event.PlaceEC2, Destination: event.PlaceAutoScalingGroup,
				}, "917070d0-a303-474b-a36c-a5e38a19de5e")),
		},
		fixtureRow{
			file: "sqs-direct/bnc-ecs-instance-drainer-test.autoscaling-TEST_NOTIFICATION.json",
			why:  "autoscaling:TEST_NOTIFICATION: ack, do nothing",
			want: ignoredResult(FormatAutoScaling, IgnoredTestNotification),
		},
		fixtureRow{
			file: "sqs-direct/unidentified-repo-cdk.autoscaling-TEST_NOTIFICATION.json",
			why:  "autoscaling:TEST_NOTIFICATION: ack, do nothing",
			want: ignoredResult(FormatAutoScaling, IgnoredTestNotification),
		},
		fixtureRow{
			file:    "sqs-direct/lifecycle-manager-test.terminating-empty-instance-id.json",
			why:     `"EC2InstanceId": "" (a unit-test body): a lifecycle action must name its instance`,
			want:    Result{Format: FormatAutoScaling},
			wantErr: MalformedMissingInstanceID,
		},
		fixtureRow{
			file:    "sqs-direct/lifecycle-manager-test.terminating.json",
			why:     `"i-123486890234" has 12 hex digits (a unit-test value); real IDs have 8 or 17`,
			want:    Result{Format: FormatAutoScaling},
			wantErr: MalformedInvalidInstanceID,
		},
		fixtureRow{
			file: "sqs-direct/aws-doc-2023-archive.notification-message-example.keyvalue.txt",
			why: "AWS docs render the notification as `Key: Value` text; SQS carries JSON, so the text is not a body " +
				"(its content is checked as JSON in TestKeyValueDocSamples)",
			want:    Result{},
			wantErr: MalformedInvalidJSON,
		},
		fixtureRow{
			file:    "sqs-direct/aws-doc-2023-archive.test-notification-message-example.keyvalue.txt",
			why:     "`Key: Value` doc rendering, not a wire format (content checked in TestKeyValueDocSamples)",
			want:    Result{},
			wantErr: MalformedInvalidJSON,
		},
	)

	// SQS ReceiveMessage responses: their Body fields.
	rows = append(rows,
		fixtureRow{
			file:    "sqs-api/aws-doc-sqs.receive-message-response.json#0",
			why:     `the SQS API doc's Body "This is a test message" is not JSON`,
			want:    Result{},
			wantErr: MalformedInvalidJSON,
		},
		fixtureRow{
			file:    "sqs-api/lifecycle-manager-test.serialized-sqs-message-with-direct-body.json#0",
			why:     `a direct notification whose "EC2InstanceId": "i-0000000000" has 10 digits (a unit-test value)`,
			want:    Result{Format: FormatAutoScaling},
			wantErr: MalformedInvalidInstanceID,
		},
	)
	return rows
}

// resultOptions compare Results: times by instant, nil and empty alike.
var resultOptions = []cmp.Option{cmpopts.EquateEmpty()}

func TestParseFixtures(t *testing.T) {
	bodies := make(map[string][]byte)
	for _, f := range loadFixtures(t) {
		bodies[f.name] = f.body
	}
	for _, row := range fixtureRows() {
		t.Run(row.file, func(t *testing.T) {
			body, ok := bodies[row.file]
			if !ok {
				t.Fatalf("no fixture %s in %s/", row.file, testdata)
			}
			if (row.want.Ignored != "" || row.wantErr != "") && row.why == "" {
				t.Errorf("an ignored or rejected sample needs a why")
			}
			got, err := Parse(body)
			if gotReason := Reason(err); gotReason != row.wantErr {
				t.Errorf("error reason = %q (%v), want %q", gotReason, err, row.wantErr)
			}
			if diff := cmp.Diff(row.want, got, resultOptions...); diff != "" {
				t.Errorf("Parse() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEveryFixtureHasARow fails when a file is added to testdata/ without a
// row in fixtureRows saying what it must parse to (or when a row names a
// fixture that no longer exists).
func TestEveryFixtureHasARow(t *testing.T) {
	rows := make(map[string]int)
	for _, row := range fixtureRows() {
		rows[row.file]++
	}
	var fixtures []string
	for _, f := range loadFixtures(t) {
		fixtures = append(fixtures, f.name)
		switch rows[f.name] {
		case 0:
			t.Errorf("testdata/%s has no row in fixtureRows", f.name)
		case 1:
		default:
			t.Errorf("testdata/%s has %d rows in fixtureRows", f.name, rows[f.name])
		}
	}
	for name := range rows {
		if !slices.Contains(fixtures, name) {
			t.Errorf("fixtureRows names %s, which is not in testdata/", name)
		}
	}
	if len(fixtures) < 90 {
		t.Errorf("found %d fixtures, expected the ~95 copied samples; is testdata/ complete?", len(fixtures))
	}
}
