package chartpkg

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
)

func TestVersions(t *testing.T) {
	for _, tc := range []struct {
		version, chart, app, err string
	}{
		{version: "v1.2.3", chart: "1.2.3", app: "v1.2.3"},
		{version: "1.2.3", chart: "1.2.3", app: "1.2.3"},
		{version: "v1.2.3-rc.1", chart: "1.2.3-rc.1", app: "v1.2.3-rc.1"},
		{version: "v1.2.3-4-gabcdef0", chart: "1.2.3-4-gabcdef0", app: "v1.2.3-4-gabcdef0"},
		{version: "abcdef0-dirty", chart: "0.0.0-abcdef0-dirty", app: "abcdef0-dirty"},
		{version: "dev", chart: "0.0.0-dev", app: "dev"},
		{version: "feature/x+y", chart: "0.0.0-feature-x-y", app: "feature/x+y"},
		{version: "", err: "no version"},
		{version: "v1.02.3", err: "no chart version"}, // leading zeros: neither a version nor a pre-release
		{version: "///", err: "no chart version"},
	} {
		chart, app, err := Versions(tc.version)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Versions(%q) = %q, %q, %v; want an error with %q", tc.version, chart, app, err, tc.err)
			}
			continue
		}
		if err != nil || chart != tc.chart || app != tc.app {
			t.Errorf("Versions(%q) = %q, %q, %v; want %q, %q", tc.version, chart, app, err, tc.chart, tc.app)
		}
	}
}

// The package is the chart with the release's versions, loadable as Helm
// loads a chart it pulled.
func TestPackage(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "..", "..", "deploy", "helm", "lifeboat")
	path, err := Package(src, "v2.5.0", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "lifeboat-2.5.0.tgz" {
		t.Errorf("package %s, want lifeboat-2.5.0.tgz", path)
	}
	ch, err := loader.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != "2.5.0" || ch.Metadata.AppVersion != "v2.5.0" {
		t.Errorf("version %q, appVersion %q; want 2.5.0, v2.5.0", ch.Metadata.Version, ch.Metadata.AppVersion)
	}
	if ch.Schema == nil || len(ch.Templates) < 5 {
		t.Errorf("the package lacks the schema or templates: %d templates", len(ch.Templates))
	}
	if _, err := Package(src, "", t.TempDir()); err == nil {
		t.Error("a package without a version was made")
	}
}
