package testenv

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"lifeboat.dev/lifeboat/hack/chartpkg"
)

// ChartTestVersion is the release version the tests package the chart as
// (hack/chartpkg, what `make chart` runs): chart version 0.0.0-test,
// appVersion v0.0.0-test.
const ChartTestVersion = "v0.0.0-test"

var packaged struct {
	once sync.Once
	tgz  []byte
	err  error
}

// ChartArchive is the chart packaged as a release packages it (the .tgz
// `make chart` writes), made once per test binary.
func ChartArchive() ([]byte, error) {
	packaged.once.Do(func() {
		dir, err := os.MkdirTemp("", "lifeboat-chart-")
		if err != nil {
			packaged.err = err
			return
		}
		defer os.RemoveAll(dir)
		path, err := chartpkg.Package(filepath.Join(RepoRoot(), "deploy", "helm", "lifeboat"), ChartTestVersion, dir)
		if err != nil {
			packaged.err = fmt.Errorf("packaging the chart: %w", err)
			return
		}
		packaged.tgz, packaged.err = os.ReadFile(path)
	})
	return packaged.tgz, packaged.err
}

// ChartPackage writes the packaged chart into t's temporary directory and
// returns its path, for `helm install`/`helm upgrade` of the release
// artifact.
func ChartPackage(t testing.TB) string {
	t.Helper()
	b, err := ChartArchive()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "lifeboat-"+strings.TrimPrefix(ChartTestVersion, "v")+".tgz")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// LoadChart loads the packaged chart (ChartArchive).
func LoadChart() (*chart.Chart, error) {
	b, err := ChartArchive()
	if err != nil {
		return nil, err
	}
	ch, err := loader.LoadArchive(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("loading the packaged chart: %w", err)
	}
	return ch, nil
}

// withImage returns values with image.repository set to
// LifeboatImageRepository when they set none: the chart requires one
// (no image is published yet), as users must set it; a test that is about
// the image sets its own.
func withImage(values map[string]any) map[string]any {
	img, _ := values["image"].(map[string]any)
	if _, ok := img["repository"]; ok {
		return values
	}
	out := maps.Clone(values)
	if out == nil {
		out = map[string]any{}
	}
	img = maps.Clone(img)
	if img == nil {
		img = map[string]any{}
	}
	img["repository"] = LifeboatImageRepository
	out["image"] = img
	return out
}

// ChartKubeVersion is the testbed's Kubernetes version (Makefile
// K8S_VERSION), as the chart is rendered for it.
var ChartKubeVersion = chartutil.KubeVersion{Version: "v1.34.4", Major: "1", Minor: "34"}

// Rendered is the chart rendered for one release: its objects in install
// order, and NOTES.txt.
type Rendered struct {
	Objects []*unstructured.Unstructured
	Notes   string
}

// RenderChart renders lifeboat's chart, packaged as a release packages it
// (ChartArchive), as `helm template` would, values validated against values.schema.json (as `helm
// install` does), and returns its objects in the order `helm install`
// creates them (ServiceAccount before the Deployment whose pods need it,
// ...). The chart has no hooks; a hook is an error, as this renderer
// applies none. Values without image.repository get
// LifeboatImageRepository (withImage).
func RenderChart(release, namespace string, values map[string]any) (*Rendered, error) {
	ch, err := LoadChart()
	if err != nil {
		return nil, err
	}
	return render(ch, release, namespace, withImage(values))
}

// RenderChartDir renders the chart in dir (another project's, e.g.
// aws-node-termination-handler's for a comparison) as RenderChart renders
// lifeboat's, with values as given.
func RenderChartDir(dir, release, namespace string, values map[string]any) (*Rendered, error) {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("loading the chart in %s: %w", dir, err)
	}
	return render(ch, release, namespace, values)
}

// render renders ch as `helm template` would (RenderChart).
func render(ch *chart.Chart, release, namespace string, values map[string]any) (*Rendered, error) {
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
