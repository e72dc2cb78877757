package testenv

import (
	"fmt"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// ChartKubeVersion is the testbed's Kubernetes version (Makefile
// K8S_VERSION), as the chart is rendered for it.
var ChartKubeVersion = chartutil.KubeVersion{Version: "v1.34.4", Major: "1", Minor: "34"}

// Rendered is the chart rendered for one release: its objects in install
// order, and NOTES.txt.
type Rendered struct {
	Objects []*unstructured.Unstructured
	Notes   string
}

// RenderChart renders lifeboat's chart (deploy/helm/lifeboat) as `helm
// template` would, values validated against values.schema.json (as `helm
// install` does), and returns its objects in the order `helm install`
// creates them (ServiceAccount before the Deployment whose pods need it,
// ...). The chart has no hooks; a hook is an error, as this renderer
// applies none.
func RenderChart(release, namespace string, values map[string]any) (*Rendered, error) {
	ch, err := loader.Load(filepath.Join(RepoRoot(), "deploy", "helm", "lifeboat"))
	if err != nil {
		return nil, fmt.Errorf("loading chart: %w", err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = ChartKubeVersion
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true}, caps)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return nil, fmt.Errorf("rendering: %w", err)
	}
	out := &Rendered{}
	for name, content := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			out.Notes = content
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("sorting manifests: %w", err)
	}
	if len(hooks) > 0 {
		return nil, fmt.Errorf("the chart has %d hooks; this renderer applies none", len(hooks))
	}
	for _, m := range manifests {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(m.Content), &obj); err != nil {
			return nil, fmt.Errorf("%s: %w\n%s", m.Name, err, m.Content)
		}
		if len(obj) > 0 {
			out.Objects = append(out.Objects, &unstructured.Unstructured{Object: obj})
		}
	}
	return out, nil
}
