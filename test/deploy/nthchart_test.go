package deploy

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/test/testenv"
)

// Every key of NTH's chart (../shared/reference/nth/chart-values.tsv) has a
// row in the migration table (TestMigrationTable checks what the row says).
func TestChartNTHKeysDecided(t *testing.T) {
	path := filepath.Join(testenv.RepoRoot(), "..", "shared", "reference", "nth", "chart-values.tsv")
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the NTH reference file is missing: %v", err)
	}
	defer f.Close()
	var rows []string
	for _, r := range tableRows(t, "migration-from-nth.md", "## Chart values") {
		rows = append(rows, r[0])
	}
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "key\t") {
			continue
		}
		key, _, _ := strings.Cut(line, "\t")
		n++
		if !slices.ContainsFunc(rows, func(r string) bool { return key == r || strings.HasPrefix(key, r+".") }) {
			t.Errorf("NTH chart value %s has no row in docs/migration-from-nth.md's chart table", key)
		}
	}
	if err := sc.Err(); err != nil || n < 100 {
		t.Fatalf("read %d keys from %s: %v", n, path, err)
	}
}

func envByName(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		out[e.Name] = e
	}
	return out
}

// NTH's webhook values become lifeboat's settings: the URL from a Secret
// (key webhookurl, as NTH), the JSON headers as lines.
func TestChartWebhookValues(t *testing.T) {
	r := mustRender(t, "lb", "lifeboat", map[string]any{"queueURL": exampleQueue,
		"webhookURLSecretName": "hooks", "webhookHeaders": `{"Authorization":"Bearer t","X-Team":"infra"}`,
		"webhookProxy": "http://proxy.internal:3128", "webhookTemplate": `{"text":"{{ .EventID }}"}`,
		"kubernetesEventsExtraAnnotations": "team=infra,route=pager"})
	d := into[appsv1.Deployment](t, r.one(t, "Deployment"))
	env := envByName(d.Spec.Template.Spec.Containers[0])
	url := env["LIFEBOAT_WEBHOOK_URL"]
	if url.ValueFrom == nil || url.ValueFrom.SecretKeyRef == nil || url.ValueFrom.SecretKeyRef.Name != "hooks" || url.ValueFrom.SecretKeyRef.Key != "webhookurl" {
		t.Errorf("LIFEBOAT_WEBHOOK_URL = %+v, want from Secret hooks key webhookurl", url)
	}
	got := map[string]string{}
	for _, k := range []string{"LIFEBOAT_WEBHOOK_HEADERS", "LIFEBOAT_WEBHOOK_PROXY", "LIFEBOAT_WEBHOOK_TEMPLATE", "LIFEBOAT_EVENTS_ANNOTATIONS"} {
		got[k] = env[k].Value
	}
	want := map[string]string{"LIFEBOAT_WEBHOOK_HEADERS": "Authorization: Bearer t\nX-Team: infra",
		"LIFEBOAT_WEBHOOK_PROXY": "http://proxy.internal:3128", "LIFEBOAT_WEBHOOK_TEMPLATE": `{"text":"{{ .EventID }}"}`,
		"LIFEBOAT_EVENTS_ANNOTATIONS": "team=infra,route=pager"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("webhook settings (-want +got):\n%s", d)
	}
	if _, err := render("lb", "lifeboat", map[string]any{"queueURL": exampleQueue, "webhookURL": "https://h", "webhookURLSecretName": "hooks"}); err == nil ||
		!strings.Contains(err.Error(), "webhookURL and webhookURLSecretName") {
		t.Errorf("both URL values: err = %v, want refused", err)
	}
}

// The DaemonSet keeps off Windows and Fargate nodes unless told otherwise.
func TestChartDaemonSetAffinity(t *testing.T) {
	ds := into[appsv1.DaemonSet](t, mustRender(t, "lb", "lifeboat", map[string]any{"mode": "imds"}).one(t, "DaemonSet"))
	a := ds.Spec.Template.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Fatalf("no required node affinity: %+v", a)
	}
	want := []corev1.NodeSelectorRequirement{
		{Key: "kubernetes.io/os", Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
		{Key: "eks.amazonaws.com/compute-type", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"fargate"}},
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 {
		t.Fatalf("terms %+v, want one", terms)
	}
	if d := cmp.Diff(want, terms[0].MatchExpressions); d != "" {
		t.Errorf("node affinity (-want +got):\n%s", d)
	}
	custom := map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{
		map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In", "values": []any{"spot"}}}}}}}}
	ds = into[appsv1.DaemonSet](t, mustRender(t, "lb", "lifeboat", map[string]any{"mode": "imds", "daemonsetAffinity": custom}).one(t, "DaemonSet"))
	got := ds.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions
	if len(got) != 1 || got[0].Key != "pool" {
		t.Errorf("daemonsetAffinity not used as given: %+v", got)
	}
}

// NTH's image.pullSecrets (names) and lifeboat's imagePullSecrets both reach the pod.
func TestChartPullSecrets(t *testing.T) {
	r := mustRender(t, "lb", "lifeboat", map[string]any{"queueURL": exampleQueue,
		"image":            map[string]any{"pullSecrets": []any{"nth-style"}},
		"imagePullSecrets": []any{map[string]any{"name": "lifeboat-style"}}})
	d := into[appsv1.Deployment](t, r.one(t, "Deployment"))
	want := []corev1.LocalObjectReference{{Name: "lifeboat-style"}, {Name: "nth-style"}}
	if diff := cmp.Diff(want, d.Spec.Template.Spec.ImagePullSecrets); diff != "" {
		t.Errorf("image pull secrets (-want +got):\n%s", diff)
	}
}

// Every NTH value the chart refuses is marked in values.schema.json and
// let through to templates/validate.yaml, which fails the install naming
// it, why, and what to use instead (hack/docdrift holds the message to the
// migration table word for word).
func TestChartNTHRefusalsDescribed(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir(), "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	type prop struct {
		Description string          `json:"description"`
		Properties  map[string]prop `json:"properties"`
	}
	var schema prop
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	for _, r := range tableRows(t, "migration-from-nth.md", "## Chart values") {
		nth, target := r[0], r[1]
		if target == "same" {
			continue
		}
		top, sub, nested := strings.Cut(nth, ".")
		p, ok := schema.Properties[top]
		if nested {
			p, ok = p.Properties[sub]
		}
		if !ok || !strings.HasPrefix(p.Description, "aws-node-termination-handler value the chart refuses") {
			t.Errorf("%s: values.schema.json does not mark it refused (%+v)", nth, p)
			continue
		}
		values := map[string]any{"queueURL": exampleQueue, top: "x"}
		if nested {
			values[top] = map[string]any{sub: "x"}
		}
		_, err := render("lb", "lifeboat", values)
		if target != "—" && (err == nil || !strings.Contains(err.Error(), "use "+strings.ReplaceAll(target, "`", "")+" instead")) {
			t.Errorf("installing with %s set: %v; want it to say to use %s", nth, err, target)
		}
		if err == nil || !strings.Contains(err.Error(), nth+": ") {
			t.Errorf("installing with %s set: %v; want it refused by name", nth, err)
		}
	}
}
