package prom

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"lifeboat.dev/lifeboat/test/testenv"
)

// The Prometheus Operator's CRDs come from its module on the Go proxy
// (example/prometheus-operator-crd), pinned by version and by the module's
// checksum (go.sum's h1: form); the Go types test/monitoring decodes into
// (go.mod: .../pkg/apis/monitoring) are of the same version.
const (
	operatorModule  = "github.com/prometheus-operator/prometheus-operator"
	operatorVersion = "v0.89.0"
	operatorSum     = "h1:2HA351OwWBa10H6TDhjeSdHOA7wiY71sEivg+z2cykk="
	typesModule     = operatorModule + "/pkg/apis/monitoring"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// monitoringResources are the kinds the chart creates, and their resources.
var monitoringResources = map[string]schema.GroupVersionResource{
	"Service":        {Version: "v1", Resource: "services"},
	"ServiceMonitor": {Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"},
	"PodMonitor":     {Group: "monitoring.coreos.com", Version: "v1", Resource: "podmonitors"},
	"PrometheusRule": {Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"},
}

// operatorCRDs downloads the pinned module (go mod download checks it
// against the checksum database, and the test against operatorSum) and
// returns the paths of the CRDs of the kinds the chart creates.
func operatorCRDs(t *testing.T) []string {
	t.Helper()
	list := exec.Command("go", "list", "-m", "-f", "{{.Version}}", typesModule)
	list.Dir = testenv.RepoRoot()
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", typesModule, err)
	}
	if v := strings.TrimSpace(string(out)); v != operatorVersion {
		t.Fatalf("go.mod has %s %s, the CRDs are of %s: keep them at one version", typesModule, v, operatorVersion)
	}
	cmd := exec.Command("go", "mod", "download", "-json", operatorModule+"@"+operatorVersion)
	cmd.Dir = testenv.RepoRoot()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s@%s (the Go module proxy): %v\n%s%s", operatorModule, operatorVersion, err, raw, stderr.Bytes())
	}
	var mod struct{ Dir, Sum, Error string }
	if err := json.Unmarshal(raw, &mod); err != nil || mod.Error != "" {
		t.Fatalf("go mod download: %v %s", err, mod.Error)
	}
	if mod.Sum != operatorSum {
		t.Fatalf("%s@%s has checksum %s, want %s", operatorModule, operatorVersion, mod.Sum, operatorSum)
	}
	var paths []string
	for _, r := range []string{"servicemonitors", "podmonitors", "prometheusrules"} {
		paths = append(paths, filepath.Join(mod.Dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_"+r+".yaml"))
	}
	return paths
}

// The chart's ServiceMonitor (and its Service), PodMonitor and
// PrometheusRule are accepted by a real API server with the Prometheus
// Operator's CRDs, field validation strict (an unknown or misspelt field
// is an error, not pruned), and read back unchanged.
func TestMonitoringObjectsInstall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dc, err := dynamic.NewForConfig(kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range operatorCRDs(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var crd unstructured.Unstructured
		if err := yaml.Unmarshal(b, &crd.Object); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if err := applyObject(ctx, dc, crdGVR, &crd); err != nil {
			t.Fatal(err)
		}
		if err := waitEstablished(ctx, dc, crd.GetName()); err != nil {
			t.Fatal(err)
		}
	}

	ns := kube.Namespace(t)
	monitoring := map[string]any{"create": true, "additionalLabels": map[string]any{"release": "kube-prometheus-stack"}}
	for name, values := range map[string]map[string]any{
		"queue": {"queueURL": "https://sqs.us-east-1.amazonaws.com/123456789012/lifeboat", "serviceMonitor": monitoring, "prometheusRule": monitoring},
		"imds":  {"mode": "imds", "podMonitor": monitoring, "prometheusRule": monitoring},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := testenv.RenderChart("lb-"+name, ns, values)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, o := range r.Objects {
				gvr, ok := monitoringResources[o.GetKind()]
				if !ok {
					continue
				}
				n++
				if err := applyObject(ctx, dc, gvr, o); err != nil {
					t.Fatal(err)
				}
				got, err := dc.Resource(gvr).Namespace(o.GetNamespace()).Get(ctx, o.GetName(), metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if o.GetKind() == "Service" {
					continue // the API server fills in clusterIP and more
				}
				if d := cmp.Diff(normal(t, o.Object["spec"]), normal(t, got.Object["spec"])); d != "" {
					t.Errorf("%s %s read back differs (-rendered +stored):\n%s", o.GetKind(), o.GetName(), d)
				}
			}
			if want := map[string]int{"queue": 3, "imds": 2}[name]; n != want {
				t.Errorf("%d monitoring objects applied, want %d", n, want)
			}
		})
	}
}

// applyObject creates or updates o with server-side apply as the cluster
// admin, as helm or kubectl would, with strict field validation.
func applyObject(ctx context.Context, dc dynamic.Interface, gvr schema.GroupVersionResource, o *unstructured.Unstructured) error {
	data, err := json.Marshal(o.Object)
	if err != nil {
		return err
	}
	var res dynamic.ResourceInterface = dc.Resource(gvr)
	if o.GetNamespace() != "" {
		res = dc.Resource(gvr).Namespace(o.GetNamespace())
	}
	_, err = res.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: "prom-test", Force: ptr.To(true), FieldValidation: "Strict"})
	if err != nil {
		return fmt.Errorf("applying %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
	return nil
}

// waitEstablished waits until the API server serves a CRD.
func waitEstablished(ctx context.Context, dc dynamic.Interface, name string) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		crd, err := dc.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

// normal is v after a JSON round trip: numbers are float64 on both sides.
func normal(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
