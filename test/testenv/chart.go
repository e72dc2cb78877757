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

// RenderChart renders lifeboat's chart (deploy/helm/lifeboat) as `helm
// template` would, values validated against values.schema.json, and
// returns its objects in install order. test/deploy has the same renderer
// for its chart tests; this one serves suites that run what the chart
// configures.
func RenderChart(release, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
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
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
		}
	}
	_, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("sorting manifests: %w", err)
	}
	var out []*unstructured.Unstructured
	for _, m := range manifests {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(m.Content), &obj); err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		if len(obj) > 0 {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
	return out, nil
}
