package deploy

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"lifeboat.dev/lifeboat/test/testenv"
)

// chartDir is the chart under test.
func chartDir() string { return filepath.Join(testenv.RepoRoot(), "deploy", "helm", "lifeboat") }

// kubeVersion is the testbed's (Makefile K8S_VERSION).
var kubeVersion = testenv.ChartKubeVersion

// rendered is the chart rendered for one release, as `helm template` would.
type rendered struct{ *testenv.Rendered }

// render renders the chart (testenv.RenderChart).
func render(release, namespace string, values map[string]any) (*rendered, error) {
	r, err := testenv.RenderChart(release, namespace, values)
	if err != nil {
		return nil, err
	}
	return &rendered{r}, nil
}

// mustRender renders or fails t.
func mustRender(t testing.TB, release, namespace string, values map[string]any) *rendered {
	t.Helper()
	r, err := render(release, namespace, values)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// find returns the objects of a kind.
func (r *rendered) find(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.Objects {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// one returns the only object of a kind, or fails t.
func (r *rendered) one(t testing.TB, kind string) *unstructured.Unstructured {
	t.Helper()
	objs := r.find(kind)
	if len(objs) != 1 {
		t.Fatalf("rendered %d objects of kind %s, want 1", len(objs), kind)
	}
	return objs[0]
}

// into converts an unstructured object into a typed one.
func into[T any](t testing.TB, u *unstructured.Unstructured) *T {
	t.Helper()
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &out, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return &out
}

func kinds(r *rendered) []string {
	var out []string
	for _, o := range r.Objects {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}

const exampleQueue = "https://sqs.us-east-1.amazonaws.com/123456789012/lifeboat"

// The chart renders for both modes, with the pod settings the issue asks for.
func TestChartModes(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]any
		check  func(t *testing.T, r *rendered)
	}{
		{
			name:   "queue mode by default: Deployment, PDB, leader election, no host network or port",
			values: map[string]any{"queueURL": exampleQueue, "awsRegion": "us-east-1", "clusterName": "prod"},
			check: func(t *testing.T, r *rendered) {
				if len(r.find("DaemonSet")) != 0 {
					t.Errorf("queue mode rendered a DaemonSet: %v", kinds(r))
				}
				d := into[appsv1.Deployment](t, r.one(t, "Deployment"))
				if *d.Spec.Replicas != 2 {
					t.Errorf("replicas = %d, want 2", *d.Spec.Replicas)
				}
				ps := d.Spec.Template.Spec
				if ps.PriorityClassName != "system-cluster-critical" {
					t.Errorf("priorityClassName = %q", ps.PriorityClassName)
				}
				if ps.HostNetwork {
					t.Error("queue mode uses hostNetwork")
				}
				checkPodSecurity(t, ps)
				for _, c := range ps.Containers {
					for _, p := range c.Ports {
						if p.HostPort != 0 {
							t.Errorf("container %s has hostPort %d", c.Name, p.HostPort)
						}
					}
				}
				if ps.Affinity != nil && ps.Affinity.PodAntiAffinity != nil && len(ps.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
					t.Error("queue mode has a required pod anti-affinity")
				}
				if len(ps.TopologySpreadConstraints) != 2 {
					t.Errorf("topology spread constraints = %d, want zone and hostname", len(ps.TopologySpreadConstraints))
				}
				for _, c := range ps.TopologySpreadConstraints {
					if c.WhenUnsatisfiable != corev1.ScheduleAnyway {
						t.Errorf("spread over %s is %s, want ScheduleAnyway (preferred)", c.TopologyKey, c.WhenUnsatisfiable)
					}
				}
				s := d.Spec.Strategy
				if s.Type != appsv1.RollingUpdateDeploymentStrategyType || s.RollingUpdate.MaxSurge.IntValue() != 1 || s.RollingUpdate.MaxUnavailable.IntValue() != 0 {
					t.Errorf("strategy = %+v, want RollingUpdate maxSurge 1 maxUnavailable 0", s)
				}
				if d := cmp.Diff([]string{"run"}, ps.Containers[0].Args); d != "" {
					t.Errorf("args (-want +got):\n%s", d)
				}
				checkSettings(t, ps.Containers[0], map[string]string{"MODE": "queue", "QUEUE_URL": exampleQueue, "REGION": "us-east-1", "CLUSTER_NAME": "prod",
					"LEADER_ELECT": "true", "LEASE_NAME": "lb-lifeboat", "LEASE_DURATION": "15s", "FAILOVER_JOURNAL": "true", "LISTEN": ":8080", "DRY_RUN": "false", "LOG_LEVEL": "info"})
				checkDownwardEnv(t, ps.Containers[0].Env, map[string]string{"LIFEBOAT_POD_NAME": "metadata.name", "LIFEBOAT_POD_NAMESPACE": "metadata.namespace"})
				pdb := r.one(t, "PodDisruptionBudget")
				if mu, _, _ := unstructured.NestedFieldNoCopy(pdb.Object, "spec", "maxUnavailable"); fmt.Sprint(mu) != "1" {
					t.Errorf("PDB maxUnavailable = %v, want 1", mu)
				}
				if p := r.find("ValidatingAdmissionPolicy"); len(p) != 0 {
					t.Errorf("queue mode rendered node-scope policies %v: its one acting replica works on every node", names(p))
				}
				roles := names(r.find("Role"))
				if !slices.Contains(roles, "lb-lifeboat-leader-election") {
					t.Errorf("no leader-election Role: %v", roles)
				}
			},
		},
		{
			name:   "imds mode: DaemonSet tolerating everything, node name from the downward API, host network (hop limit 1) and node-scope policies by default",
			values: map[string]any{"mode": "imds"},
			check: func(t *testing.T, r *rendered) {
				if len(r.find("Deployment")) != 0 || len(r.find("PodDisruptionBudget")) != 0 {
					t.Errorf("imds mode rendered queue objects: %v", kinds(r))
				}
				ds := into[appsv1.DaemonSet](t, r.one(t, "DaemonSet"))
				ps := ds.Spec.Template.Spec
				if ps.PriorityClassName != "system-node-critical" {
					t.Errorf("priorityClassName = %q", ps.PriorityClassName)
				}
				if !ps.HostNetwork || ps.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
					t.Errorf("hostNetwork %v dnsPolicy %q, want true ClusterFirstWithHostNet (IMDSv2 with the default hop limit 1)", ps.HostNetwork, ps.DNSPolicy)
				}
				if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru == nil || ru.MaxSurge.IntValue() != 0 || ru.MaxUnavailable.IntValue() != 1 {
					t.Errorf("updateStrategy %+v, want maxSurge 0, maxUnavailable 1 (the old pod frees the node's port first)", ds.Spec.UpdateStrategy)
				}
				checkNodeScope(t, r, "lb-lifeboat", "system:serviceaccount:lifeboat:lb-lifeboat")
				if !slices.ContainsFunc(ps.Tolerations, func(tol corev1.Toleration) bool {
					return tol.Key == "" && tol.Operator == corev1.TolerationOpExists && tol.Effect == ""
				}) {
					t.Errorf("tolerations %v do not tolerate everything", ps.Tolerations)
				}
				checkPodSecurity(t, ps)
				checkDownwardEnv(t, ps.Containers[0].Env, map[string]string{"LIFEBOAT_POD_NAME": "metadata.name", "LIFEBOAT_POD_NAMESPACE": "metadata.namespace", "LIFEBOAT_NODE_NAME": "spec.nodeName"})
				checkSettings(t, ps.Containers[0], map[string]string{"MODE": "imds", "LISTEN": ":8080", "DRY_RUN": "false", "LOG_LEVEL": "info"})
				if slices.Contains(names(r.find("Role")), "lb-lifeboat-leader-election") {
					t.Error("imds mode grants leases")
				}
			},
		},
		{
			name:   "imds mode runs lifeboat-imds; imdsCompleteLifecycle runs the full binary with the flag, region and endpoint",
			values: map[string]any{"mode": "imds"},
			check: func(t *testing.T, r *rendered) {
				c := into[appsv1.DaemonSet](t, r.one(t, "DaemonSet")).Spec.Template.Spec.Containers[0]
				if d := cmp.Diff([]string{"/usr/local/bin/lifeboat-imds"}, c.Command); d != "" {
					t.Errorf("command (-want +got):\n%s", d)
				}
				goEnv := map[string]string{}
				for _, e := range c.Env {
					if strings.HasPrefix(e.Name, "GO") {
						goEnv[e.Name] = e.Value
					}
				}
				if d := cmp.Diff(map[string]string{"GOGC": "50", "GOMEMLIMIT": "20MiB", "GOMAXPROCS": "1"}, goEnv); d != "" {
					t.Errorf("the DaemonSet's Go runtime settings (-want +got):\n%s", d)
				}
				on, err := render("lb", "lifeboat", map[string]any{"mode": "imds", "imdsCompleteLifecycle": true, "awsRegion": "eu-west-1", "awsEndpoint": "autoscaling=http://127.0.0.1:5000"})
				if err != nil {
					t.Fatal(err)
				}
				c = into[appsv1.DaemonSet](t, on.one(t, "DaemonSet")).Spec.Template.Spec.Containers[0]
				if len(c.Command) != 0 {
					t.Errorf("command %v with imdsCompleteLifecycle, want none (the image's entrypoint, lifeboat: lifeboat-imds refuses the flag)", c.Command)
				}
				checkSettings(t, c, map[string]string{"MODE": "imds", "LISTEN": ":8080", "DRY_RUN": "false", "LOG_LEVEL": "info",
					"IMDS_COMPLETE_LIFECYCLE": "true", "REGION": "eu-west-1", "AWS_ENDPOINT": "autoscaling=http://127.0.0.1:5000"})
				// A command of the user's own is kept.
				own, err := render("lb", "lifeboat", map[string]any{"mode": "imds", "imdsCompleteLifecycle": true, "daemonsetCommand": []any{"/opt/wrapper", "lifeboat"}})
				if err != nil {
					t.Fatal(err)
				}
				c = into[appsv1.DaemonSet](t, own.one(t, "DaemonSet")).Spec.Template.Spec.Containers[0]
				if d := cmp.Diff([]string{"/opt/wrapper", "lifeboat"}, c.Command); d != "" {
					t.Errorf("own command (-want +got):\n%s", d)
				}
			},
		},
		{
			name:   "imds mode on the pod network, without node-scope policies",
			values: map[string]any{"mode": "imds", "useHostNetwork": false, "rbac": map[string]any{"nodeScoped": false}},
			check: func(t *testing.T, r *rendered) {
				ps := into[appsv1.DaemonSet](t, r.one(t, "DaemonSet")).Spec.Template.Spec
				if ps.HostNetwork || ps.DNSPolicy == corev1.DNSClusterFirstWithHostNet {
					t.Errorf("hostNetwork %v dnsPolicy %q, want the pod network", ps.HostNetwork, ps.DNSPolicy)
				}
				if p := r.find("ValidatingAdmissionPolicy"); len(p) != 0 {
					t.Errorf("rbac.nodeScoped=false rendered policies %v", names(p))
				}
			},
		},
		{
			name: "NTH value names: IMDS DaemonSet",
			values: map[string]any{"enableSqsTerminationDraining": false, "daemonsetPriorityClassName": "node-critical-custom", "instanceMetadataURL": "http://127.0.0.1:1338",
				"jsonLogging": false, "logLevel": "debug", "dryRun": true, "cordonOnly": true, "daemonsetNodeSelector": map[string]any{"lifecycle": "Ec2Spot"}},
			check: func(t *testing.T, r *rendered) {
				ps := into[appsv1.DaemonSet](t, r.one(t, "DaemonSet")).Spec.Template.Spec
				if ps.PriorityClassName != "node-critical-custom" || ps.NodeSelector["lifecycle"] != "Ec2Spot" {
					t.Errorf("priorityClassName %q nodeSelector %v", ps.PriorityClassName, ps.NodeSelector)
				}
				if d := cmp.Diff([]string{"run", "--drain-on="}, ps.Containers[0].Args); d != "" {
					t.Errorf("cordonOnly: args (-want +got):\n%s", d)
				}
				checkSettings(t, ps.Containers[0], map[string]string{"MODE": "imds", "IMDS_ENDPOINT": "http://127.0.0.1:1338", "LOG_FORMAT": "text", "LOG_LEVEL": "debug",
					"DRY_RUN": "true", "LISTEN": ":8080"})
			},
		},
		{
			name: "NTH value names: queue Deployment",
			values: map[string]any{"enableSqsTerminationDraining": true, "queueURL": exampleQueue, "awsRegion": "eu-west-1", "replicas": 3, "workers": 4,
				"deleteSqsMsgIfNodeNotFound": true, "enableRebalanceDraining": true, "heartbeatInterval": 30, "jsonLogging": true,
				"serviceAccount":      map[string]any{"annotations": map[string]any{"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/lifeboat"}},
				"podDisruptionBudget": map[string]any{"minAvailable": 1}, "priorityClassName": "custom"},
			check: func(t *testing.T, r *rendered) {
				d := into[appsv1.Deployment](t, r.one(t, "Deployment"))
				if *d.Spec.Replicas != 3 || d.Spec.Template.Spec.PriorityClassName != "custom" {
					t.Errorf("replicas %d priorityClassName %q", *d.Spec.Replicas, d.Spec.Template.Spec.PriorityClassName)
				}
				checkSettings(t, d.Spec.Template.Spec.Containers[0], map[string]string{"MODE": "queue", "QUEUE_URL": exampleQueue, "REGION": "eu-west-1", "WORKERS": "4",
					"UNKNOWN_INSTANCE": "delete", "HEARTBEAT_INTERVAL": "30s", "LOG_FORMAT": "json", "LOG_LEVEL": "info", "DRY_RUN": "false", "LISTEN": ":8080",
					"LEADER_ELECT": "true", "LEASE_NAME": "lb-lifeboat", "LEASE_DURATION": "15s", "FAILOVER_JOURNAL": "true",
					"DRAIN_ON": "spot-interruption,scheduled-change,state-change,capacity-reservation-interruption,lifecycle-terminate,rebalance-recommendation"})
				sa := r.one(t, "ServiceAccount")
				if sa.GetAnnotations()["eks.amazonaws.com/role-arn"] == "" {
					t.Error("IRSA annotation missing on the ServiceAccount")
				}
			},
		},
		{
			name:   "force delete at deadline grants pods delete, and only it or deleting blocked pods does",
			values: map[string]any{"queueURL": exampleQueue, "forceDeleteAtDeadline": true},
			check: func(t *testing.T, r *rendered) {
				cr := into[rbacv1.ClusterRole](t, r.one(t, "ClusterRole"))
				if !grants(cr.Rules, "", "pods", "delete") {
					t.Errorf("ClusterRole %v does not grant pods delete", cr.Rules)
				}
				if v := settings(into[appsv1.Deployment](t, r.one(t, "Deployment")).Spec.Template.Spec.Containers[0])["FORCE_DELETE_AT_DEADLINE"]; v != "true" {
					t.Errorf("LIFEBOAT_FORCE_DELETE_AT_DEADLINE = %q, want true", v)
				}
				def := mustRender(t, "lb", "lifeboat", map[string]any{"queueURL": exampleQueue})
				if !grants(into[rbacv1.ClusterRole](t, def.one(t, "ClusterRole")).Rules, "", "pods", "delete") {
					t.Error("pods delete not granted by default (deleteBlockedPodsBeforeDeadline is on)")
				}
				off := mustRender(t, "lb", "lifeboat", map[string]any{"queueURL": exampleQueue, "deleteBlockedPodsBeforeDeadline": false})
				if grants(into[rbacv1.ClusterRole](t, off.one(t, "ClusterRole")).Rules, "", "pods", "delete") {
					t.Error("pods delete granted without forceDeleteAtDeadline or deleteBlockedPodsBeforeDeadline")
				}
				if v := settings(into[appsv1.Deployment](t, off.one(t, "Deployment")).Spec.Template.Spec.Containers[0])["DELETE_BLOCKED_PODS_BEFORE_DEADLINE"]; v != "false" {
					t.Errorf("LIFEBOAT_DELETE_BLOCKED_PODS_BEFORE_DEADLINE = %q, want false", v)
				}
			},
		},
		{
			name:   "deleting ghost nodes grants nodes delete, and only then",
			values: map[string]any{"queueURL": exampleQueue, "deleteGhostNodes": true},
			check: func(t *testing.T, r *rendered) {
				cr := into[rbacv1.ClusterRole](t, r.one(t, "ClusterRole"))
				if !grants(cr.Rules, "", "nodes", "delete") {
					t.Errorf("ClusterRole %v does not grant nodes delete", cr.Rules)
				}
				if v := settings(into[appsv1.Deployment](t, r.one(t, "Deployment")).Spec.Template.Spec.Containers[0])["DELETE_GHOST_NODES"]; v != "true" {
					t.Errorf("LIFEBOAT_DELETE_GHOST_NODES = %q, want true", v)
				}
				def := mustRender(t, "lb", "lifeboat", map[string]any{"queueURL": exampleQueue})
				if grants(into[rbacv1.ClusterRole](t, def.one(t, "ClusterRole")).Rules, "", "nodes", "delete") {
					t.Error("nodes delete granted without deleteGhostNodes")
				}
			},
		},
		{
			name:   "no PDB, no spreading, leader election off",
			values: map[string]any{"queueURL": exampleQueue, "podDisruptionBudget": nil, "topologySpreadConstraints": []any{}, "leaderElection": map[string]any{"enabled": false}, "replicas": 1},
			check: func(t *testing.T, r *rendered) {
				if len(r.find("PodDisruptionBudget")) != 0 {
					t.Error("PDB rendered with podDisruptionBudget null")
				}
				ps := into[appsv1.Deployment](t, r.one(t, "Deployment")).Spec.Template.Spec
				if len(ps.TopologySpreadConstraints) != 0 {
					t.Errorf("spread constraints with []: %v", ps.TopologySpreadConstraints)
				}
				if v := settings(ps.Containers[0])["LEADER_ELECT"]; v != "false" {
					t.Errorf("LIFEBOAT_LEADER_ELECT = %q, want false", v)
				}
				if slices.Contains(names(r.find("Role")), "lb-lifeboat-leader-election") {
					t.Error("leases granted without leader election")
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, mustRender(t, "lb", "lifeboat", tt.values))
		})
	}
}

// Invalid or contradictory values are refused at install time, never
// rendered into a crash-looping pod or silently ignored.
func TestChartRefuses(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"queue mode without queue", map[string]any{}, "queueURL is required in queue mode"},
		// values.yaml's image.repository is "" (TestImageRequired): no
		// image is published yet, so a default install must not end in
		// ImagePullBackOff.
		{"no image", map[string]any{"queueURL": exampleQueue, "image": map[string]any{"repository": ""}}, "image.repository is required: no lifeboat image is published yet. Build and push one with `make image-push"},
		{"no image, imds mode", map[string]any{"mode": "imds", "image": map[string]any{"repository": ""}}, "image.repository is required"},
		{"unknown value (an NTH value lifeboat does not support)", map[string]any{"queueURL": exampleQueue, "taintNode": true}, "taintNode"},
		{"unknown mode", map[string]any{"mode": "lambda"}, "mode"},
		{"contradicting mode names", map[string]any{"mode": "imds", "enableSqsTerminationDraining": true}, "mode=imds contradicts enableSqsTerminationDraining=true"},
		{"queue option in imds mode", map[string]any{"mode": "imds", "queueURL": exampleQueue}, "queueURL applies only in queue mode"},
		{"ghost node deletion in imds mode", map[string]any{"mode": "imds", "deleteGhostNodes": true}, "deleteGhostNodes applies only in queue mode"},
		{"lifecycle option in imds mode", map[string]any{"mode": "imds", "heartbeatInterval": 30}, "heartbeatInterval applies only in queue mode"},
		{"AWS endpoint in imds mode without lifecycle completion", map[string]any{"mode": "imds", "awsEndpoint": "http://127.0.0.1:5000"}, "awsEndpoint applies only in queue mode, or in imds mode with imdsCompleteLifecycle"},
		{"imds lifecycle completion in queue mode", map[string]any{"queueURL": exampleQueue, "imdsCompleteLifecycle": true}, "imdsCompleteLifecycle applies only in imds mode"},
		{"bad duration", map[string]any{"queueURL": exampleQueue, "deadlineMargin": "five seconds"}, "deadlineMargin"},
		{"bad drain kind", map[string]any{"queueURL": exampleQueue, "drainOn": []any{"spot"}}, "drainOn"},
		{"cordon only with drainOn", map[string]any{"queueURL": exampleQueue, "cordonOnly": true, "drainOn": []any{"spot-interruption"}}, "cordonOnly=true drains nothing"},
		{"contradicting log format", map[string]any{"queueURL": exampleQueue, "logFormat": "text", "jsonLogging": true}, "logFormat=text contradicts jsonLogging=true"},
		{"bad lifecycle result", map[string]any{"queueURL": exampleQueue, "lifecycleTimeoutResult": "continue"}, "lifecycleTimeoutResult"},
		{"queue URL that is not a URL", map[string]any{"queueURL": "lifeboat-queue"}, "queueURL"},
		{"out-of-service taint in imds mode", map[string]any{"mode": "imds", "enableOutOfServiceTaint": true},
			"enableOutOfServiceTaint (--out-of-service-taint) is refused with mode=imds (--mode imds)"},
		{"a node-write option in extraArgs under the own-node policy", map[string]any{"mode": "imds", "extraArgs": []any{"--exclude-from-load-balancers"}},
			"extraArgs sets --exclude-from-load-balancers: with rbac.nodeScoped the own-node policy is rendered from the value excludeFromLoadBalancers"},
		{"a node-write option in extraArgs, two words", map[string]any{"mode": "imds", "extraArgs": []any{"-taint-effect", "NoExecute"}}, "extraArgs sets --taint-effect"},
		{"a node-write NTH variable in extraEnv under the own-node policy", map[string]any{"mode": "imds", "extraEnv": []any{map[string]any{"name": "TAINT_EFFECT", "value": "NoExecute"}}},
			"extraEnv sets TAINT_EFFECT: with rbac.nodeScoped the own-node policy is rendered from the value taintEffect"},
		{"the Lease's name in extraArgs", map[string]any{"queueURL": exampleQueue, "extraArgs": []any{"--lease-name=other"}},
			"extraArgs sets --lease-name=other: the chart's Role grants only the Lease leaderElection.leaseName"},
		{"the failover journal in extraArgs", map[string]any{"queueURL": exampleQueue, "extraArgs": []any{"--failover-journal"}},
			"extraArgs sets --failover-journal: set leaderElection.failoverJournal instead"},
		{"the failover journal in extraEnv", map[string]any{"queueURL": exampleQueue, "extraEnv": []any{map[string]any{"name": "LIFEBOAT_FAILOVER_JOURNAL", "value": "true"}}},
			"extraEnv sets LIFEBOAT_FAILOVER_JOURNAL: set leaderElection.failoverJournal instead"},
		{"surge on the host network", map[string]any{"mode": "imds", "updateStrategy": map[string]any{"rollingUpdate": map[string]any{"maxSurge": 1, "maxUnavailable": 0}}},
			"updateStrategy.rollingUpdate.maxSurge=1 with useHostNetwork"},
		{"surge in percent on the host network", map[string]any{"mode": "imds", "updateStrategy": map[string]any{"rollingUpdate": map[string]any{"maxSurge": "10%"}}},
			"maxSurge=10% with useHostNetwork"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := render("lb", "lifeboat", tt.values)
			if err == nil {
				t.Fatal("rendered; want an error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

// checkNodeScope checks the IMDS-mode admission policies of the chart's
// defaults: three (own-node-status only with terminatingCondition), each
// bound with Deny, failing closed, and matching only the chart's
// ServiceAccount (TestNodeScopePolicy shows what they allow and refuse).
func checkNodeScope(t *testing.T, r *rendered, fullname, user string) {
	t.Helper()
	policies := r.find("ValidatingAdmissionPolicy")
	want := []string{fullname + "-own-node", fullname + "-own-node-events", fullname + "-own-node-pods"}
	got := names(policies)
	slices.Sort(got)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("policies (-want +got):\n%s", d)
	}
	for _, p := range policies {
		vap := into[admissionregistrationv1.ValidatingAdmissionPolicy](t, p)
		if vap.Spec.FailurePolicy == nil || *vap.Spec.FailurePolicy != admissionregistrationv1.Fail {
			t.Errorf("%s: failurePolicy %v, want Fail", vap.Name, vap.Spec.FailurePolicy)
		}
		if len(vap.Spec.MatchConditions) != 1 || vap.Spec.MatchConditions[0].Expression != "request.userInfo.username == '"+user+"'" {
			t.Errorf("%s: matchConditions %+v, want only the user %s", vap.Name, vap.Spec.MatchConditions, user)
		}
	}
	var bound []string
	for _, b := range r.find("ValidatingAdmissionPolicyBinding") {
		vb := into[admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, b)
		if d := cmp.Diff([]admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, vb.Spec.ValidationActions); d != "" {
			t.Errorf("binding %s: validationActions (-want +got):\n%s", vb.Name, d)
		}
		bound = append(bound, vb.Spec.PolicyName)
	}
	slices.Sort(bound)
	if d := cmp.Diff(want, bound); d != "" {
		t.Errorf("bound policies (-want +got):\n%s", d)
	}
}

func checkPodSecurity(t *testing.T, ps corev1.PodSpec) {
	t.Helper()
	psc := ps.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and seccomp RuntimeDefault", psc)
	}
	if psc != nil && (psc.RunAsUser == nil || *psc.RunAsUser == 0) {
		t.Error("pod runs as uid 0")
	}
	for _, c := range ps.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || (sc.Privileged != nil && *sc.Privileged) {
			t.Errorf("container %s securityContext %+v: want read-only root, no privilege escalation, capabilities dropped", c.Name, sc)
		}
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" ||
			c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("container %s probes: want /healthz and /readyz", c.Name)
		}
		// The readiness probe is seldom (each probe costs an idle pod CPU);
		// the startup probe asks /readyz every second, so a new pod is Ready
		// as soon as it is ready (test/realnode measures it).
		if p := c.StartupProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.PeriodSeconds != 1 {
			t.Errorf("container %s startup probe %+v: want /readyz every second", c.Name, p)
		}
	}
}

func checkDownwardEnv(t *testing.T, env []corev1.EnvVar, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, e := range env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			got[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("env %s from %q, want the downward API's %s", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("downward env %v, want exactly %v", got, want)
	}
}

// settings are the container's LIFEBOAT_* variables with plain values, by
// flag (QUEUE_URL for LIFEBOAT_QUEUE_URL).
func settings(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		if k, ok := strings.CutPrefix(e.Name, "LIFEBOAT_"); ok && e.ValueFrom == nil {
			out[k] = e.Value
		}
	}
	return out
}

// checkSettings checks that the container's configuration is exactly want:
// lifeboat's defaults apply to everything else.
func checkSettings(t *testing.T, c corev1.Container, want map[string]string) {
	t.Helper()
	if d := cmp.Diff(want, settings(c)); d != "" {
		t.Errorf("LIFEBOAT_* settings (-want +got):\n%s", d)
	}
}

func names(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	return out
}

func grants(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}

// exampleImage is an image the chart accepts: image.repository is required.
var exampleImage = map[string]any{"repository": "123456789012.dkr.ecr.us-east-1.amazonaws.com/lifeboat", "tag": "v0.1.0"}

// TestImageRequired: values.yaml names no image, since none is published
// yet (a default that named one would end in ImagePullBackOff); the
// chart refuses to render without one, naming how to make one
// (TestChartRefuses), and with one renders that image, the tag defaulting
// to the packaged chart's appVersion.
func TestImageRequired(t *testing.T) {
	vals, err := chartutil.ReadValuesFile(filepath.Join(chartDir(), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if repo, err := vals.PathValue("image.repository"); err != nil || repo != "" {
		t.Errorf("values.yaml's image.repository = %v (%v), want \"\"", repo, err)
	}
	r, err := testenv.RenderChart("lifeboat", "kube-system", map[string]any{"queueURL": exampleQueue,
		"image": map[string]any{"repository": exampleImage["repository"]}})
	if err != nil {
		t.Fatal(err)
	}
	want := exampleImage["repository"].(string) + ":" + testenv.ChartTestVersion
	var images []string
	for _, o := range r.Objects {
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range cs {
			images = append(images, c.(map[string]any)["image"].(string))
		}
	}
	if len(images) == 0 || slices.ContainsFunc(images, func(s string) bool { return s != want }) {
		t.Errorf("rendered images %v, want %s", images, want)
	}
}

// `helm lint` (the Helm SDK's linter) finds nothing to warn about, in
// either mode.
func TestChartLint(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]any
	}{
		{"queue", map[string]any{"queueURL": exampleQueue, "image": exampleImage}},
		{"imds", map[string]any{"mode": "imds", "image": exampleImage}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := lint.AllWithKubeVersion(chartDir(), tt.values, "lifeboat", &kubeVersion)
			for _, m := range l.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m)
				} else {
					t.Logf("helm lint: %s", m)
				}
			}
		})
	}
}
