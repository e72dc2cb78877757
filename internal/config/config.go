// Package config owns lifeboat's configuration: the flags, their environment
// fallbacks, defaults, validation and the mode/feature matrix.
//
// Load returns one immutable Config or every problem at once (errors.Join).
// This package does no I/O beyond reading the arguments and environment it is
// given; it must not create clients.
package config

import (
	"fmt"
	"lifeboat.dev/lifeboat/internal/window"
	"net/url"
	"slices"
	"strings"
	"time"

	"lifeboat.dev/lifeboat/internal/event"
	"lifeboat.dev/lifeboat/internal/lifecycle"
)

// Mode is how lifeboat learns about interruptions.
type Mode string

const (
	ModeQueue Mode = "queue"
	ModeIMDS  Mode = "imds"
)

// UnknownPolicy says what to do with a message about an instance that is
// not a node of this cluster.
type UnknownPolicy string

// Unknown-instance policies.
const (
	UnknownLeave  UnknownPolicy = "leave"
	UnknownDelete UnknownPolicy = "delete"
)

// Config is lifeboat's whole configuration. Treat it as immutable.
type Config struct {
	Mode       Mode
	DryRun     bool
	Kubeconfig string
	// NodeName is this node (IMDS mode).
	NodeName string
	// PodName and PodNamespace identify lifeboat's own pod, never evicted.
	PodName      string
	PodNamespace string
	ClusterName  string

	// Queue mode.
	QueueURL          string
	Region            string
	Endpoints         map[string]string // AWS service ID (sqs, autoscaling, ec2, eventbridge, sts) -> URL
	Workers           int
	QueueReceivers    int
	VisibilityTimeout time.Duration
	UnknownInstance   UnknownPolicy
	PrivateDNSLookup  bool
	ManagedASGs       []string
	// NodeSelector and KarpenterNodes scope the nodes lifeboat acts on
	// (NodeScope).
	NodeSelector   string
	KarpenterNodes KarpenterNodes
	ManagedTag     string

	// IMDS mode.
	IMDSEndpoint string
	IMDSPoll     time.Duration
	IMDSAllowV1  bool
	// IMDSCompleteLifecycle: in IMDS mode the node completes its own
	// terminate lifecycle action (by instance ID, with its instance role).
	IMDSCompleteLifecycle bool
	MaintenanceLead       time.Duration

	// What to do.
	DrainKinds          []event.Kind
	ScheduledChangeLead time.Duration
	// MaintenanceWindowsSpec is --maintenance-windows as given;
	// MaintenanceWindows, parsed by Validate.
	MaintenanceWindowsSpec string
	MaintenanceWindows     []window.Window
	ForceDeleteAtDeadline  bool
	// DeleteBlockedPods deletes pods still blocked in time for their
	// shutdown before a deadline AWS enforces.
	DeleteBlockedPods bool
	// AnnotatePods hands AWS's deadline to the pods about to be evicted
	// (lifeboat.io/deadline, lifeboat.io/reason).
	AnnotatePods bool
	// TerminatingCondition sets the Node condition lifeboat.io/Terminating
	// while lifeboat drains the node.
	TerminatingCondition bool
	// ReplacementFirst gets a Deployment's last ready replicas replaced
	// on another node before their eviction, when the deadline allows
	// (internal/replace).
	ReplacementFirst bool
	// StopDaemonSetPods stops every DaemonSet pod (not only those that
	// opt in) after the drain for a terminate action, before CONTINUE.
	StopDaemonSetPods bool
	DeadlineMargin    time.Duration
	EvictionBackoff   time.Duration

	// PlanWithKubeletShutdown plans a Spot drain with the window the
	// node's kubelet graceful shutdown gives pods after the notice's end
	// (read through the node proxy: nodes/proxy get).
	PlanWithKubeletShutdown bool

	// Node actions (aws-node-termination-handler's options; see
	// docs/configuration.md).
	PodGracePeriod        time.Duration
	RebalanceCordonExpiry time.Duration
	NodeGracePeriod       time.Duration
	TaintEffect           string
	ExcludeFromLB         bool
	OutOfServiceTaint     bool
	// GhostNodeAfter: a node lifeboat cordoned whose instance EC2 said is
	// terminated and that is still there this long after is reported (0:
	// never); DeleteGhostNodes deletes it.
	GhostNodeAfter   time.Duration
	DeleteGhostNodes bool

	// Auto Scaling lifecycle actions.
	CompleteLifecycle      bool
	HeartbeatInterval      time.Duration
	HeartbeatUntil         time.Duration
	CompleteLifecycleDelay time.Duration
	LifecycleTimeoutResult lifecycle.Result
	LaunchReadyTimeout     time.Duration
	LaunchTimeoutResult    lifecycle.Result
	// VolumeDetachTimeout bounds the wait for a node's VolumeAttachments
	// to go before a terminate action is completed with CONTINUE.
	VolumeDetachTimeout time.Duration
	// WaitForLoadBalancers holds a terminate action's CONTINUE until no
	// ELBv2 target group holds the node's instance or pod IPs.
	WaitForLoadBalancers bool

	// Scale-in protection of nodes running do-not-disrupt pods.
	ScaleInProtection         bool
	ScaleInProtectionInterval time.Duration

	// Kubernetes client.
	KubeQPS   float32
	KubeBurst int

	// Serving and leader election.
	ListenAddr     string
	LeaderElect    bool
	LeaseName      string
	LeaseNamespace string
	// LeaseNamespaceFrom says where LeaseNamespace came from (a flag, the
	// ServiceAccount, the kubeconfig's context), for the log.
	LeaseNamespaceFrom string
	LeaseDuration      time.Duration
	// FailoverJournal keeps the messages the leader holds in ConfigMaps
	// beside the Lease (internal/failover).
	FailoverJournal bool
	LogFormat       string
	LogLevel        string
	// EventAnnotations are added to every Kubernetes Event.
	EventAnnotations map[string]string

	// Webhooks (notifications when an interruption is received and finished).
	// WebhookURL and WebhookHeaders are secrets: never log them.
	WebhookURL          Secret
	WebhookURLFile      string
	WebhookTemplate     string
	WebhookHeaders      Secret
	WebhookHeadersFile  string
	WebhookProxy        string
	WebhookDedupeWindow time.Duration

	// Warnings are problems that do not stop lifeboat, for the caller to
	// log: deprecated aws-node-termination-handler environment variables
	// that were read as aliases, or that have no effect.
	Warnings []string
}

// Drains reports whether events of kind k drain the node (else cordon only).
func (c Config) Drains(k event.Kind) bool { return slices.Contains(c.DrainKinds, k) }

func parseEndpoints(c *Config, v string) error {
	if c.Endpoints == nil {
		c.Endpoints = map[string]string{}
	}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		svc, u, found := strings.Cut(item, "=")
		if !found {
			u = item
		}
		if pu, err := url.Parse(u); err != nil || pu.Scheme == "" || pu.Host == "" {
			return fmt.Errorf("%q is not a URL", u)
		}
		if !found {
			for _, s := range serviceIDs {
				c.Endpoints[s] = u
			}
			continue
		}
		if !slices.Contains(serviceIDs, svc) {
			return fmt.Errorf("unknown service %q (known: %s)", svc, strings.Join(serviceIDs, ", "))
		}
		c.Endpoints[svc] = u
	}
	return nil
}

func parseKinds(c *Config, v string) error {
	c.DrainKinds = nil
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		k := event.Kind(s)
		if !slices.Contains(event.Kinds, k) || k == event.ScheduledChangeCanceled || k == event.LifecycleLaunch {
			return fmt.Errorf("unknown or non-draining kind %q", s)
		}
		c.DrainKinds = append(c.DrainKinds, k)
	}
	return nil
}

// parseAnnotations reads key=value pairs, comma-separated (NTH's form).
func parseAnnotations(c *Config, v string) error {
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, val, ok := strings.Cut(item, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return fmt.Errorf("%q is not key=value", item)
		}
		if c.EventAnnotations == nil {
			c.EventAnnotations = map[string]string{}
		}
		c.EventAnnotations[strings.TrimSpace(k)] = val
	}
	return nil
}

func appendList(l []string, v string) []string {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			l = append(l, s)
		}
	}
	return l
}

func joinModes(ms []Mode) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}

// Secret is a configuration value that must never be printed: it formats
// as [redacted].
type Secret string

func (Secret) String() string   { return "[redacted]" }
func (Secret) GoString() string { return "[redacted]" }

// Webhooks reports whether a webhook is configured.
func (c Config) Webhooks() bool { return c.WebhookURL != "" || c.WebhookURLFile != "" }
