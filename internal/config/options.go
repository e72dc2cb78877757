package config

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"lifeboat.dev/lifeboat/internal/lifecycle"
)

// option describes one flag. The table drives parsing, env fallbacks and
// the generated docs/configuration.md.
type option struct {
	name    string
	usage   string
	modes   []Mode // empty: every mode
	def     string
	bind    binder
	tokenOp bool // needs a lifecycle action token: refused in IMDS mode
	// why, when set, says why the option is refused outside its modes.
	why string
}

// A binder defines one flag on fs, bound to a field of c, with its default
// (a string, as docs/configuration.md shows it). It fails when the table's
// default does not parse (TestOptionTable keeps that from happening).
type binder func(fs *flag.FlagSet, c *Config, name, def, usage string) error

func strOpt(p func(*Config) *string) binder {
	return func(fs *flag.FlagSet, c *Config, n, d, u string) error { fs.StringVar(p(c), n, d, u); return nil }
}

// typedOpt binds a flag to a field of a string type (validated later).
func typedOpt[T ~string](p func(*Config) *T) binder {
	return func(fs *flag.FlagSet, c *Config, n, d, u string) error {
		*p(c) = T(d)
		fs.Var(typedValue[T]{p(c)}, n, u)
		return nil
	}
}

type typedValue[T ~string] struct{ p *T }

func (v typedValue[T]) String() string {
	if v.p == nil {
		return ""
	}
	return string(*v.p)
}

func (v typedValue[T]) Set(s string) error { *v.p = T(s); return nil }

func boolOpt(p func(*Config) *bool) binder {
	return func(fs *flag.FlagSet, c *Config, n, d, u string) error {
		if d != "true" && d != "false" {
			return fmt.Errorf("default of --%s: %q is not true or false", n, d)
		}
		fs.BoolVar(p(c), n, d == "true", u)
		return nil
	}
}

func durOpt(p func(*Config) *time.Duration) binder {
	return func(fs *flag.FlagSet, c *Config, n, d, u string) error {
		v, err := time.ParseDuration(d)
		if err != nil {
			return fmt.Errorf("default of --%s: %w", n, err)
		}
		fs.DurationVar(p(c), n, v, u)
		return nil
	}
}

func intOpt(p func(*Config) *int) binder {
	return func(fs *flag.FlagSet, c *Config, n, d, u string) error {
		v, err := strconv.Atoi(d)
		if err != nil {
			return fmt.Errorf("default of --%s: %w", n, err)
		}
		fs.IntVar(p(c), n, v, u)
		return nil
	}
}

// funcOpt binds a flag parsed by set into the config.
func funcOpt(set func(c *Config, v string) error) binder {
	return func(fs *flag.FlagSet, c *Config, n, d, u string) error {
		if d != "" {
			if err := set(c, d); err != nil {
				return fmt.Errorf("default of --%s: %w", n, err)
			}
		}
		fs.Func(n, u, func(v string) error { return set(c, v) })
		return nil
	}
}

var serviceIDs = []string{"sqs", "autoscaling", "ec2", "eventbridge", "sts", "elasticloadbalancing"}

var options = []option{
	{name: "mode", def: "queue", usage: "how interruptions are learned: queue (SQS, a leader-elected Deployment) or imds (instance metadata, a DaemonSet)",
		bind: funcOpt(func(c *Config, v string) error { c.Mode = Mode(v); return nil })},
	{name: "dry-run", def: "false", usage: "change nothing anywhere (no cordon, eviction, lifecycle call or message deletion); log and report what would be done",
		bind: boolOpt(func(c *Config) *bool { return &c.DryRun })},
	{name: "kubeconfig", usage: "kubeconfig file; empty means in-cluster configuration in a pod, else KUBECONFIG or ~/.kube/config (as kubectl)",
		bind: strOpt(func(c *Config) *string { return &c.Kubeconfig })},
	{name: "node-name", modes: []Mode{ModeIMDS}, usage: "name of the node lifeboat runs on (IMDS mode; set from the downward API)",
		bind: strOpt(func(c *Config) *string { return &c.NodeName })},
	{name: "pod-name", usage: "lifeboat's own pod name (downward API); it is never evicted",
		bind: strOpt(func(c *Config) *string { return &c.PodName })},
	{name: "pod-namespace", usage: "lifeboat's own namespace (downward API)",
		bind: strOpt(func(c *Config) *string { return &c.PodNamespace })},
	{name: "cluster-name", modes: []Mode{ModeQueue}, usage: "cluster name; an Auto Scaling group tagged kubernetes.io/cluster/<name> is this cluster's (needed to complete launch lifecycle actions)",
		bind: strOpt(func(c *Config) *string { return &c.ClusterName })},
	{name: "queue-url", modes: []Mode{ModeQueue}, usage: "URL of the SQS queue fed by EventBridge or Auto Scaling (required in queue mode)",
		bind: strOpt(func(c *Config) *string { return &c.QueueURL })},
	{name: "region", modes: []Mode{ModeQueue, ModeIMDS}, usage: "AWS region; empty means the SDK's default chain (AWS_REGION, profile)",
		bind: strOpt(func(c *Config) *string { return &c.Region })},
	{name: "aws-endpoint", modes: []Mode{ModeQueue, ModeIMDS}, usage: "override an AWS endpoint, as service=URL (services: sqs, autoscaling, ec2, eventbridge, sts, elasticloadbalancing), or a bare URL for all; repeatable or comma-separated",
		bind: funcOpt(func(c *Config, v string) error { return parseEndpoints(c, v) })},
	{name: "workers", modes: []Mode{ModeQueue}, def: "10", usage: "messages handled in parallel (drains run outside these slots)",
		bind: intOpt(func(c *Config) *int { return &c.Workers })},
	{name: "queue-receivers", modes: []Mode{ModeQueue}, def: "4", usage: "long polls of the queue in parallel; one receive returns at most ten messages, so a burst of notices is read this many receives at a time",
		bind: intOpt(func(c *Config) *int { return &c.QueueReceivers })},
	{name: "visibility-timeout", modes: []Mode{ModeQueue}, def: "30s", usage: "visibility of a received message, extended every third of it while its work runs; bounds how long a killed leader's messages stay hidden",
		bind: durOpt(func(c *Config) *time.Duration { return &c.VisibilityTimeout })},
	{name: "unknown-instance", modes: []Mode{ModeQueue}, def: string(UnknownLeave), usage: "what to do with a message about an instance that is not a node of this cluster: leave (for its owner, until retention) or delete",
		bind: typedOpt(func(c *Config) *UnknownPolicy { return &c.UnknownInstance })},
	{name: "private-dns-lookup", modes: []Mode{ModeQueue}, def: "false", usage: "when no node has the instance's providerID, look the instance's private DNS name up in EC2 and match it to a node name",
		bind: boolOpt(func(c *Config) *bool { return &c.PrivateDNSLookup })},
	{name: "managed-asg", modes: []Mode{ModeQueue}, usage: "Auto Scaling group names whose launch actions this cluster owns (comma-separated), in addition to groups tagged for --cluster-name",
		bind: funcOpt(func(c *Config, v string) error { c.ManagedASGs = appendList(c.ManagedASGs, v); return nil })},
	{name: "node-selector", modes: []Mode{ModeQueue}, usage: "label selector of the nodes lifeboat acts on (e.g. team=a,lifeboat!=off); other nodes are not watched, and a message about one is treated like one about another cluster's instance (--unknown-instance); empty means every node",
		bind: strOpt(func(c *Config) *string { return &c.NodeSelector })},
	{name: "karpenter-nodes", modes: []Mode{ModeQueue}, def: string(KarpenterSkip), usage: "nodes Karpenter manages (label karpenter.sh/nodepool): skip (left to Karpenter's own interruption handling, like nodes outside --node-selector) or handle",
		bind: typedOpt(func(c *Config) *KarpenterNodes { return &c.KarpenterNodes })},
	{name: "managed-tag", modes: []Mode{ModeQueue}, usage: "act only on nodes whose EC2 instance carries this tag key (any value); events of other nodes follow --unknown-instance; empty means every node of this cluster",
		bind: strOpt(func(c *Config) *string { return &c.ManagedTag })},
	{name: "imds-endpoint", modes: []Mode{ModeIMDS}, usage: "instance metadata endpoint; empty means the SDK's: AWS_EC2_METADATA_SERVICE_ENDPOINT, else by AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE http://169.254.169.254 (IPv4, the default) or http://[fd00:ec2::254] (IPv6)",
		bind: strOpt(func(c *Config) *string { return &c.IMDSEndpoint })},
	{name: "imds-poll-interval", modes: []Mode{ModeIMDS}, def: "1s", usage: "how often instance metadata is polled: the Spot notice at every poll, the rebalance recommendation and target-lifecycle-state at every 5th, scheduled maintenance at every 30th",
		bind: durOpt(func(c *Config) *time.Duration { return &c.IMDSPoll })},
	{name: "imds-allow-v1", modes: []Mode{ModeIMDS}, def: "false", usage: "fall back to IMDSv1 when no IMDSv2 token can be obtained",
		bind: boolOpt(func(c *Config) *bool { return &c.IMDSAllowV1 })},
	{name: "imds-complete-lifecycle", modes: []Mode{ModeIMDS}, def: "false", usage: "when the metadata's target-lifecycle-state is Terminated, heartbeat the node's own terminate lifecycle action while draining and complete it with CONTINUE after (by instance ID; the instance role needs autoscaling:DescribeAutoScalingInstances, DescribeLifecycleHooks, RecordLifecycleActionHeartbeat and CompleteLifecycleAction); the lifeboat binary only, not lifeboat-imds",
		bind: boolOpt(func(c *Config) *bool { return &c.IMDSCompleteLifecycle })},
	{name: "drain-on", def: "spot-interruption,scheduled-change,state-change,capacity-reservation-interruption,lifecycle-terminate", usage: "event kinds that drain the node; the other kinds only cordon and taint it (add rebalance-recommendation to drain on rebalance)",
		bind: funcOpt(func(c *Config, v string) error { return parseKinds(c, v) })},
	{name: "scheduled-change-lead", def: "10m", usage: "act this long before a scheduled change's start time",
		bind: durOpt(func(c *Config) *time.Duration { return &c.ScheduledChangeLead })},
	{name: "maintenance-windows", def: "", usage: "weekly windows in which to drain for a scheduled change (a reboot, stop or retirement, days ahead) rather than --scheduled-change-lead before its start: 'DAYS HH:MM-HH:MM [ZONE]' separated by ';', e.g. 'Sat,Sun 02:00-06:00 UTC; Mon-Fri 22:00-02:00 Europe/Berlin'; lifeboat acts at the start of the last opening that begins before the change's start less the lead and has not ended (at once inside one), and at the start less the lead when none does",
		bind: strOpt(func(c *Config) *string { return &c.MaintenanceWindowsSpec })},
	{name: "force-delete-at-deadline", def: "false", usage: "when AWS's deadline is about to pass, delete the pods still running (they would be killed anyway); needs pods/delete",
		bind: boolOpt(func(c *Config) *bool { return &c.ForceDeleteAtDeadline })},
	{name: "delete-blocked-pods-before-deadline", def: "true", usage: "when a deadline AWS enforces nears (a Spot interruption, a terminating state change, a terminate lifecycle action's end, a capacity reservation's interruption; not a scheduled change or a rebalance recommendation), delete a pod whose eviction a PodDisruptionBudget or an admission webhook still refuses at the deadline less its grace period less --deadline-margin (at once, its grace cut to the time left, when that moment has passed), so that its preStop hook and SIGTERM handler run to the end before the instance goes (it would be killed anyway); a Warning BlockedPodDeleted on the pod and the node names what blocked it; needs pods/delete",
		bind: boolOpt(func(c *Config) *bool { return &c.DeleteBlockedPods })},
	{name: "annotate-pods-with-deadline", def: "true", usage: "before a drain's first eviction, give each pod it is about to evict the annotations lifeboat.io/deadline (AWS's deadline, RFC 3339 UTC; left out when none is known) and lifeboat.io/reason (what the node is drained for), which a downward-API volume shows to the running process; a failed write is logged and never delays the eviction; needs pods/patch",
		bind: boolOpt(func(c *Config) *bool { return &c.AnnotatePods })},
	{name: "terminating-condition", def: "false", usage: "when a drain begins, set the Node condition lifeboat.io/Terminating (status True, the reason and AWS's deadline; False when lifeboat uncordons the node) for other controllers to watch; one more request per drained node; needs nodes/status patch",
		bind: boolOpt(func(c *Config) *bool { return &c.TerminatingCondition })},
	{name: "replacement-first", modes: []Mode{ModeQueue}, def: "false", usage: "before evicting the last ready replicas of a Deployment (one replica; all its ready replicas on the node; a PodDisruptionBudget allowing no disruption), restart its rollout (the pod-template annotation kubectl rollout restart sets) and wait until new pods, as many as it had Ready, are Ready on other nodes, when the deadline leaves the time the rollout needs for them (maxSurge at a time; a new pod's time from the Deployment's lifeboat.io/replacement-seconds annotation, else the slowest creation-to-Ready of its pods); else evict as today, with a Warning ReplacementSkipped; off for a Deployment annotated lifeboat.io/replacement-first=false; needs deployments get and patch, replicasets get (chart: replacementFirst; docs/replacement-first.md)",
		bind: boolOpt(func(c *Config) *bool { return &c.ReplacementFirst })},
	{name: "stop-daemonset-pods", def: "false", usage: "on a terminate lifecycle action lifeboat completes (--complete-lifecycle, or --imds-complete-lifecycle in imds mode), once the drain has moved every other pod off, evict the node's DaemonSet pods too (ordinary before system-critical; not lifeboat's own, not mirror pods) with their grace period cut to the time left before the deadline less --deadline-margin, and wait for them before CONTINUE, so that a log shipper or mesh agent finishes its shutdown before the instance goes; without it only DaemonSet pods annotated lifeboat.io/stop-before-termination=true (in the pod template) are stopped, and =false opts a DaemonSet out of this flag; a Normal DaemonSetPodStopped per pod says how long its shutdown took",
		bind: boolOpt(func(c *Config) *bool { return &c.StopDaemonSetPods })},
	{name: "plan-with-kubelet-shutdown", def: "false", usage: "on a Spot interruption, plan the drain with the time the node's kubelet graceful node shutdown still gives the pods left after the notice's end (shutdownGracePeriod less shutdownGracePeriodCriticalPods, read once per node from the kubelet's /configz through the API server's node proxy): grace periods are cut to that later end instead of the notice's; only configured, not confirmed active (lifeboat check says why); off until measured; needs nodes/proxy get, a powerful permission (docs/kubelet-shutdown.md)",
		bind: boolOpt(func(c *Config) *bool { return &c.PlanWithKubeletShutdown })},
	{name: "deadline-margin", def: "5s", usage: "time kept in reserve before AWS's deadline: a drain whose lifecycle action is completed after it ends this long before the action times out, and grace periods are capped to end this long before the drain does",
		bind: durOpt(func(c *Config) *time.Duration { return &c.DeadlineMargin })},
	{name: "eviction-backoff", def: "5s", usage: "delay before an eviction refused by a PodDisruptionBudget (429) is tried again",
		bind: durOpt(func(c *Config) *time.Duration { return &c.EvictionBackoff })},
	{name: "rebalance-cordon-expiry", def: "0s", usage: "uncordon a node cordoned for a rebalance recommendation (and remove lifeboat's taint) this long after, unless an interruption or termination followed; kept on the node across restarts; 0 means never",
		bind: durOpt(func(c *Config) *time.Duration { return &c.RebalanceCordonExpiry })},
	{name: "pod-grace-period", def: "0s", usage: "grace period of every eviction instead of the pod's own terminationGracePeriodSeconds; 0 means the pod's own; AWS's deadline still cuts it",
		bind: durOpt(func(c *Config) *time.Duration { return &c.PodGracePeriod })},
	{name: "node-grace-period", def: "0s", usage: "cap on a whole drain, counted from its start: the drain's deadline is the earlier of AWS's and this; 0 means AWS's deadline only",
		bind: durOpt(func(c *Config) *time.Duration { return &c.NodeGracePeriod })},
	{name: "taint-effect", def: "NoSchedule", usage: "effect of lifeboat's taints: NoSchedule, PreferNoSchedule or NoExecute (NoExecute evicts pods without a toleration at once, bypassing PodDisruptionBudgets)",
		bind: strOpt(func(c *Config) *string { return &c.TaintEffect })},
	{name: "exclude-from-load-balancers", def: "false", usage: "label cordoned nodes node.kubernetes.io/exclude-from-external-load-balancers (removed again on uncordon, if lifeboat added it)",
		bind: boolOpt(func(c *Config) *bool { return &c.ExcludeFromLB })},
	{name: "out-of-service-taint", modes: []Mode{ModeQueue}, def: "false",
		why: "the taint tells Kubernetes the node has shut down, and a pod on the dying instance cannot confirm its own shutdown; use queue mode", usage: "once EC2 says the instance of a node lifeboat cordoned has stopped or terminated (its state-change notification, or ec2:DescribeInstances 30 s after lifeboat cordoned it, then every 30 s), taint the node node.kubernetes.io/out-of-service=nodeshutdown:NoExecute (the pods left are deleted and their volumes detached); the taint goes when the instance runs again",
		bind: boolOpt(func(c *Config) *bool { return &c.OutOfServiceTaint })},
	{name: "ghost-node-after", modes: []Mode{ModeQueue}, def: "10m", usage: "report a node lifeboat cordoned whose instance EC2 said is terminated when the Node is still there this long after (Warning Event GhostNode, gauge lifeboat_ghost_nodes; the cloud controller normally deletes it within minutes); 0 disables",
		bind: durOpt(func(c *Config) *time.Duration { return &c.GhostNodeAfter })},
	{name: "delete-ghost-nodes", modes: []Mode{ModeQueue}, def: "false", usage: "delete the Node object of such a ghost node (never a Ready one); needs delete on nodes (chart: deleteGhostNodes)",
		bind: boolOpt(func(c *Config) *bool { return &c.DeleteGhostNodes })},
	{name: "complete-lifecycle", modes: []Mode{ModeQueue}, def: "true", tokenOp: true, usage: "heartbeat and complete Auto Scaling lifecycle actions",
		bind: boolOpt(func(c *Config) *bool { return &c.CompleteLifecycle })},
	{name: "heartbeat-interval", modes: []Mode{ModeQueue}, def: "0s", tokenOp: true, usage: "interval of lifecycle heartbeats; 0 means half the hook's heartbeat timeout",
		bind: durOpt(func(c *Config) *time.Duration { return &c.HeartbeatInterval })},
	{name: "heartbeat-until", modes: []Mode{ModeQueue}, def: "0s", tokenOp: true, usage: "stop heartbeating a terminate action this long after it started (the action then times out one heartbeat timeout later with the hook's default result); 0 means until the drain ends or the hook's global timeout",
		bind: durOpt(func(c *Config) *time.Duration { return &c.HeartbeatUntil })},
	{name: "complete-lifecycle-action-delay", modes: []Mode{ModeQueue}, def: "0s", tokenOp: true, usage: "wait this long after a node's drain before completing its terminate action (heartbeats continue; never past AWS's deadline); 0 means at once",
		bind: durOpt(func(c *Config) *time.Duration { return &c.CompleteLifecycleDelay })},
	{name: "lifecycle-timeout-result", modes: []Mode{ModeQueue}, def: string(lifecycle.Continue), tokenOp: true, usage: "result of a terminate action whose drain cannot finish before the hook's global timeout: CONTINUE or ABANDON",
		bind: typedOpt(func(c *Config) *lifecycle.Result { return &c.LifecycleTimeoutResult })},
	{name: "launch-ready-timeout", modes: []Mode{ModeQueue}, def: "15m", tokenOp: true, usage: "how long a launching instance may take to become a Ready node before its launch action gets --launch-timeout-result",
		bind: durOpt(func(c *Config) *time.Duration { return &c.LaunchReadyTimeout })},
	{name: "launch-timeout-result", modes: []Mode{ModeQueue}, def: string(lifecycle.Abandon), tokenOp: true, usage: "result of a launch action whose node never became Ready: ABANDON or CONTINUE",
		bind: typedOpt(func(c *Config) *lifecycle.Result { return &c.LaunchTimeoutResult })},
	{name: "scale-in-protection", modes: []Mode{ModeQueue}, def: "false", usage: "protect the instance of a node running pods annotated lifeboat.io/do-not-disrupt=true (or karpenter.sh/do-not-disrupt=true) from scale-in in its Auto Scaling group, and lift it when they are gone (docs/scale-in-protection.md)",
		bind: boolOpt(func(c *Config) *bool { return &c.ScaleInProtection })},
	{name: "scale-in-protection-interval", modes: []Mode{ModeQueue}, def: "10s", usage: "how often pods are compared with the scale-in protection lifeboat set",
		bind: durOpt(func(c *Config) *time.Duration { return &c.ScaleInProtectionInterval })},
	{name: "volume-detach-timeout", modes: []Mode{ModeQueue}, def: "1m", tokenOp: true, usage: "after a drain, wait up to this long (and never past AWS's deadline) for the node's VolumeAttachments to go before completing its terminate action with CONTINUE, so that EBS volumes are free for the replacement pods; 0 does not wait",
		bind: durOpt(func(c *Config) *time.Duration { return &c.VolumeDetachTimeout })},
	{name: "wait-for-load-balancers", modes: []Mode{ModeQueue}, def: "false", tokenOp: true, usage: "after a drain, hold a terminate action's CONTINUE until no Elastic Load Balancing v2 target group lists the node's instance or its pods' IPs as anything but unused (deregistered and drained), never past AWS's deadline less --deadline-margin; reads target groups (elasticloadbalancing:DescribeTargetGroups, DescribeTargetHealth), deregisters nothing: use with --exclude-from-load-balancers (docs/operations.md)",
		bind: boolOpt(func(c *Config) *bool { return &c.WaitForLoadBalancers })},
	{name: "kube-qps", def: "200", usage: "queries per second of the main Kubernetes client (reads, evictions, deletions); node writes (500), Events (20), the drain forecast (10) and the Lease (5) have limits of their own (docs/operations.md); sized so a 200-node burst drains in seconds, see docs/benchmarks.md",
		bind: funcOpt(func(c *Config, v string) error { _, err := fmt.Sscan(v, &c.KubeQPS); return err })},
	{name: "kube-burst", def: "400", usage: "burst of the main Kubernetes client (see --kube-qps)",
		bind: intOpt(func(c *Config) *int { return &c.KubeBurst })},
	{name: "listen", def: ":8080", usage: "address of /metrics, /healthz and /readyz; empty disables",
		bind: strOpt(func(c *Config) *string { return &c.ListenAddr })},
	{name: "leader-elect", modes: []Mode{ModeQueue}, def: "true", usage: "only the holder of a Lease consumes the queue",
		bind: boolOpt(func(c *Config) *bool { return &c.LeaderElect })},
	{name: "lease-name", modes: []Mode{ModeQueue}, def: "lifeboat", usage: "name of the leader-election Lease",
		bind: strOpt(func(c *Config) *string { return &c.LeaseName })},
	{name: "lease-namespace", modes: []Mode{ModeQueue}, usage: "namespace of the Lease; empty means --pod-namespace, else the ServiceAccount's namespace in a pod, else the kubeconfig context's (default when it names none)",
		bind: strOpt(func(c *Config) *string { return &c.LeaseNamespace })},
	{name: "lease-duration", modes: []Mode{ModeQueue}, def: "15s", usage: "leader-election lease duration",
		bind: durOpt(func(c *Config) *time.Duration { return &c.LeaseDuration })},
	{name: "failover-journal", modes: []Mode{ModeQueue}, def: "false", usage: "with --leader-elect: keep the receipt handles of the messages the leader holds in the ConfigMaps <lease-name>-inflight-0 to -3 beside the Lease (newly received messages within 250 ms, the rest every 2 s), so that the next leader makes them visible at once when this one dies without handing them back (SIGKILL, OOM kill, a lost node) instead of after --visibility-timeout; off by default in the binary because it needs create, get and update on those ConfigMaps; the chart turns it on and grants them (docs/operations.md)",
		bind: boolOpt(func(c *Config) *bool { return &c.FailoverJournal })},
	{name: "log-format", def: "json", usage: "json or text",
		bind: strOpt(func(c *Config) *string { return &c.LogFormat })},
	{name: "log-level", def: "info", usage: "debug, info, warn or error",
		bind: strOpt(func(c *Config) *string { return &c.LogLevel })},
	{name: "events-annotations", usage: "annotations added to every Kubernetes Event lifeboat records, as key=value, comma-separated",
		bind: funcOpt(func(c *Config, v string) error { return parseAnnotations(c, v) })},
	{name: "webhook-url", usage: "webhook that is told when an interruption is received and when it is finished; a secret: prefer LIFEBOAT_WEBHOOK_URL from a Secret or --webhook-url-file; empty disables webhooks",
		bind: funcOpt(func(c *Config, v string) error { c.WebhookURL = Secret(v); return nil })},
	{name: "webhook-url-file", usage: "file holding the webhook URL (a mounted Secret)",
		bind: strOpt(func(c *Config) *string { return &c.WebhookURLFile })},
	{name: "webhook-template", def: "slack", usage: "body of webhook requests: slack, teams (Workflows, Adaptive Card), json (the notification itself), the path of a Go text/template file rendering JSON from a notification, or such a template's text itself (it holds \"{{\"; aws-node-termination-handler's WEBHOOK_TEMPLATE)",
		bind: strOpt(func(c *Config) *string { return &c.WebhookTemplate })},
	{name: "webhook-headers", usage: "extra HTTP headers of webhook requests, one \"Name: value\" a line (a secret: prefer LIFEBOAT_WEBHOOK_HEADERS from a Secret or --webhook-headers-file)",
		bind: funcOpt(func(c *Config, v string) error { c.WebhookHeaders = Secret(v); return nil })},
	{name: "webhook-headers-file", usage: "file of extra HTTP headers of webhook requests, one \"Name: value\" a line (a mounted Secret)",
		bind: strOpt(func(c *Config) *string { return &c.WebhookHeadersFile })},
	{name: "webhook-proxy", usage: "HTTP(S) proxy for webhook requests; empty means HTTPS_PROXY, HTTP_PROXY and NO_PROXY",
		bind: strOpt(func(c *Config) *string { return &c.WebhookProxy })},
	{name: "webhook-dedupe-window", def: "30m", usage: "a node's notification of one phase (received, finished) is sent at most once in this window, however many signals arrive",
		bind: durOpt(func(c *Config) *time.Duration { return &c.WebhookDedupeWindow })},
}

// EnvName is the environment variable that backs a flag: --queue-url -> LIFEBOAT_QUEUE_URL.
func EnvName(flagName string) string {
	return "LIFEBOAT_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}
