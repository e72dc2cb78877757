// Package monitoring checks lifeboat's Prometheus side without a testbed:
// the chart's Prometheus Operator objects (rendered with the Helm SDK and
// decoded strictly into the operator's own Go types), the alert rule file
// (promtool check and unit tests, run in `make test`), and that
// docs/metrics.md and docs/operations.md describe the alerts the file
// holds. test/prom runs the same objects and rules against a real
// kube-apiserver and a real Prometheus scraping lifeboat.
package monitoring

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"lifeboat.dev/lifeboat/test/testenv"
)

const exampleQueue = "https://sqs.us-east-1.amazonaws.com/123456789012/lifeboat"

// monitoringKinds are the Prometheus Operator kinds the chart can create.
var monitoringKinds = []string{"ServiceMonitor", "PodMonitor", "PrometheusRule"}

func render(t *testing.T, values map[string]any) *testenv.Rendered {
	t.Helper()
	r, err := testenv.RenderChart("lb", "ops", values)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func find(r *testenv.Rendered, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.Objects {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func one(t *testing.T, r *testenv.Rendered, kind string) *unstructured.Unstructured {
	t.Helper()
	objs := find(r, kind)
	if len(objs) != 1 {
		t.Fatalf("%d objects of kind %s rendered, want 1", len(objs), kind)
	}
	return objs[0]
}

// strict decodes a rendered object into T, refusing fields T does not have
// (a misspelt field would be dropped by the API server's pruning).
func strict[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	b, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var out T
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("%s %s does not decode into the operator's type: %v\n%s", u.GetKind(), u.GetName(), err, b)
	}
	return &out
}

func queueValues(extra map[string]any) map[string]any {
	v := map[string]any{"queueURL": exampleQueue}
	maps.Copy(v, extra)
	return v
}

func imdsValues(extra map[string]any) map[string]any {
	v := map[string]any{"mode": "imds"}
	maps.Copy(v, extra)
	return v
}

// Off by default: a default install in either mode creates no Prometheus
// Operator object (the CRDs may not exist) and no Service.
func TestMonitoringOffByDefault(t *testing.T) {
	for name, values := range map[string]map[string]any{"queue": queueValues(nil), "imds": imdsValues(nil)} {
		t.Run(name, func(t *testing.T) {
			r := render(t, values)
			for _, k := range append([]string{"Service"}, monitoringKinds...) {
				if n := len(find(r, k)); n != 0 {
					t.Errorf("%d %s rendered by default", n, k)
				}
			}
		})
	}
}

// kubePrometheusStack is how kube-prometheus-stack's Prometheus finds
// monitors and rules: by its release label.
var kubePrometheusStack = map[string]any{"release": "kube-prometheus-stack"}

// Queue mode: a Service over every replica and a ServiceMonitor selecting
// it, scraping the container's http port, with the labels, interval,
// timeout and sample limit of the values.
func TestServiceMonitor(t *testing.T) {
	r := render(t, queueValues(map[string]any{
		"customLabels": map[string]any{"team": "platform"},
		"serviceMonitor": map[string]any{
			"create": true, "namespace": "monitoring", "labels": map[string]any{"nth": "kept"},
			"additionalLabels": kubePrometheusStack, "interval": "15s", "scrapeTimeout": "5s", "sampleLimit": 2000,
		},
	}))
	sm := strict[monitoringv1.ServiceMonitor](t, one(t, r, "ServiceMonitor"))
	svc := strict[corev1.Service](t, one(t, r, "Service"))
	dep := strict[appsv1.Deployment](t, one(t, r, "Deployment"))

	if sm.Namespace != "monitoring" || svc.Namespace != "ops" {
		t.Errorf("ServiceMonitor in %q, Service in %q; want monitoring and the release namespace ops", sm.Namespace, svc.Namespace)
	}
	for k, v := range map[string]string{"release": "kube-prometheus-stack", "nth": "kept", "team": "platform", "app.kubernetes.io/instance": "lb"} {
		if sm.Labels[k] != v {
			t.Errorf("ServiceMonitor label %s=%q, want %q (labels %v)", k, sm.Labels[k], v, sm.Labels)
		}
	}
	if d := cmp.Diff([]string{"ops"}, sm.Spec.NamespaceSelector.MatchNames); d != "" || sm.Spec.NamespaceSelector.Any {
		t.Errorf("namespaceSelector selects other than the release namespace:\n%s", d)
	}
	sel, err := metaSelector(sm.Spec.Selector.MatchLabels)
	if err != nil || !sel.Matches(labels.Set(svc.Labels)) {
		t.Errorf("the ServiceMonitor's selector %v does not select the Service (labels %v): %v", sm.Spec.Selector.MatchLabels, svc.Labels, err)
	}
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("the Service's selector %v does not select the Deployment's pods (labels %v)", svc.Spec.Selector, dep.Spec.Template.Labels)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "http" || svc.Spec.Ports[0].TargetPort.String() != "http" || svc.Spec.Ports[0].Port != 8080 {
		t.Errorf("Service ports %+v, want http 8080 -> the container's http port", svc.Spec.Ports)
	}
	checkContainerPort(t, dep.Spec.Template.Spec, "http")
	if !svc.Spec.PublishNotReadyAddresses {
		t.Error("the Service leaves out replicas that are not ready: a leader whose queue fails is not ready, and its lifeboat_source_healthy 0 is what LifeboatQueueSourceFailing needs")
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("%d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Port != "http" || ep.Path != "/metrics" || ep.Interval != "15s" || ep.ScrapeTimeout != "5s" {
		t.Errorf("endpoint %+v, want port http, /metrics, every 15s, timeout 5s", ep)
	}
	if sm.Spec.SampleLimit == nil || *sm.Spec.SampleLimit != 2000 {
		t.Errorf("sampleLimit %v, want 2000", sm.Spec.SampleLimit)
	}
}

// IMDS mode: a PodMonitor selecting the DaemonSet's pods (on the host
// network: their address is the node's), with a node label.
func TestPodMonitor(t *testing.T) {
	r := render(t, imdsValues(map[string]any{
		"podMonitor": map[string]any{"create": true, "additionalLabels": kubePrometheusStack},
	}))
	pm := strict[monitoringv1.PodMonitor](t, one(t, r, "PodMonitor"))
	ds := strict[appsv1.DaemonSet](t, one(t, r, "DaemonSet"))
	if n := len(find(r, "Service")); n != 0 {
		t.Errorf("%d Services rendered in IMDS mode, want none (the PodMonitor needs none)", n)
	}
	if pm.Namespace != "ops" || pm.Labels["release"] != "kube-prometheus-stack" {
		t.Errorf("PodMonitor in %q with labels %v; want the release namespace and release=kube-prometheus-stack", pm.Namespace, pm.Labels)
	}
	if !ds.Spec.Template.Spec.HostNetwork {
		t.Error("the DaemonSet is not on the host network by default: this test is about that case")
	}
	sel, err := metaSelector(pm.Spec.Selector.MatchLabels)
	if err != nil || !sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
		t.Errorf("the PodMonitor's selector %v does not select the DaemonSet's pods (labels %v): %v", pm.Spec.Selector.MatchLabels, ds.Spec.Template.Labels, err)
	}
	if d := cmp.Diff([]string{"ops"}, pm.Spec.NamespaceSelector.MatchNames); d != "" {
		t.Errorf("namespaceSelector:\n%s", d)
	}
	checkContainerPort(t, ds.Spec.Template.Spec, "http")
	if len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("%d podMetricsEndpoints, want 1", len(pm.Spec.PodMetricsEndpoints))
	}
	ep := pm.Spec.PodMetricsEndpoints[0]
	if ep.Port == nil || *ep.Port != "http" || ep.Path != "/metrics" || ep.Interval != "30s" || ep.ScrapeTimeout != "" {
		t.Errorf("podMetricsEndpoint %+v, want port http, /metrics, the default 30s and no timeout", ep)
	}
	if pm.Spec.SampleLimit == nil || *pm.Spec.SampleLimit != 5000 {
		t.Errorf("sampleLimit %v, want NTH's default 5000", pm.Spec.SampleLimit)
	}
	node := false
	for _, rl := range ep.RelabelConfigs {
		node = node || (rl.TargetLabel == "node" && len(rl.SourceLabels) == 1 && rl.SourceLabels[0] == "__meta_kubernetes_pod_node_name")
	}
	if !node {
		t.Errorf("no node label from __meta_kubernetes_pod_node_name: %+v", ep.RelabelConfigs)
	}
}

// A monitor of the other mode's workload selects nothing: refused, naming
// the value to use.
func TestMonitorOfTheOtherModeRefused(t *testing.T) {
	for _, tc := range []struct {
		values map[string]any
		want   string
	}{
		{imdsValues(map[string]any{"serviceMonitor": map[string]any{"create": true}}), "serviceMonitor applies only in queue mode (mode is imds): the DaemonSet's pods are scraped through podMonitor"},
		{queueValues(map[string]any{"podMonitor": map[string]any{"create": true}}), "podMonitor applies only in imds mode (mode is queue): the Deployment's replicas are scraped through serviceMonitor"},
	} {
		_, err := testenv.RenderChart("lb", "ops", tc.values)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("rendering %v: %v; want %q", tc.values, err, tc.want)
		}
	}
}

// The PrometheusRule carries files/alerts.yaml's groups unchanged, in
// either mode.
func TestPrometheusRule(t *testing.T) {
	file := readRuleFile(t)
	for name, values := range map[string]map[string]any{
		"queue": queueValues(map[string]any{"prometheusRule": map[string]any{"create": true, "additionalLabels": kubePrometheusStack}}),
		"imds":  imdsValues(map[string]any{"prometheusRule": map[string]any{"create": true, "additionalLabels": kubePrometheusStack}}),
	} {
		t.Run(name, func(t *testing.T) {
			pr := strict[monitoringv1.PrometheusRule](t, one(t, render(t, values), "PrometheusRule"))
			if pr.Labels["release"] != "kube-prometheus-stack" || pr.Namespace != "ops" {
				t.Errorf("PrometheusRule in %q with labels %v", pr.Namespace, pr.Labels)
			}
			if d := cmp.Diff(file.Groups, pr.Spec.Groups); d != "" {
				t.Errorf("the PrometheusRule's groups differ from files/alerts.yaml (-file +rendered):\n%s", d)
			}
		})
	}
}

func checkContainerPort(t *testing.T, spec corev1.PodSpec, name string) {
	t.Helper()
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return
			}
		}
	}
	t.Errorf("no container port named %s", name)
}

func metaSelector(m map[string]string) (labels.Selector, error) {
	return labels.ValidatedSelectorFromSet(m)
}

// ruleFile is a Prometheus rule file, in the operator's types (the same
// fields as Prometheus' own rulefmt).
type ruleFile struct {
	Groups []monitoringv1.RuleGroup `json:"groups"`
}

// ruleFilePath is the alerts' one source: the chart's rule file.
func ruleFilePath() string {
	return filepath.Join(testenv.RepoRoot(), "deploy", "helm", "lifeboat", "files", "alerts.yaml")
}

func readRuleFile(t *testing.T) ruleFile {
	t.Helper()
	b, err := os.ReadFile(ruleFilePath())
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("files/alerts.yaml: %v", err)
	}
	if len(f.Groups) == 0 {
		t.Fatal("files/alerts.yaml has no groups")
	}
	return f
}

// alerts returns the alerting rules of the rule file.
func alerts(t *testing.T) []monitoringv1.Rule {
	t.Helper()
	var out []monitoringv1.Rule
	for _, g := range readRuleFile(t).Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("files/alerts.yaml has no alerts")
	}
	return out
}
