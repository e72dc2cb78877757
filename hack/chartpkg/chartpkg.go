// Package chartpkg packages lifeboat's Helm chart as the release artifact:
// the .tgz `helm package` makes, with the chart's version and appVersion
// set from the release's version. `make chart` runs it (hack/chartpkg/package),
// and test/testenv renders and installs the package it makes, not the
// folder, so the tests install what a release publishes.
//
// It uses Helm's own packaging code (chartutil.Save, the code behind `helm
// package`) rather than the helm binary, so that tests need no helm build.
package chartpkg

import (
	"fmt"
	"os"
	"strings"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

// Versions returns the chart version and appVersion of a release whose
// version (git describe: v1.2.3, v1.2.3-4-gabcdef0, abcdef0-dirty) is
// version. The appVersion is the version as given: the image's tag (`make
// image` tags images with it), which the chart's image defaults to. The
// chart version is SemVer 2, as Helm and OCI registries require: the tag
// without its "v"; a version that is not SemVer (a commit) becomes a
// pre-release of 0.0.0.
func Versions(version string) (chart, app string, err error) {
	if version == "" {
		return "", "", fmt.Errorf("no version")
	}
	if v, err := semver.StrictNewVersion(strings.TrimPrefix(version, "v")); err == nil {
		return v.String(), version, nil
	}
	pre := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' || r == '.' {
			return r
		}
		return '-'
	}, version)
	v, err := semver.StrictNewVersion("0.0.0-" + strings.Trim(pre, ".-"))
	if err != nil {
		return "", "", fmt.Errorf("version %q: no chart version can be made of it: %w", version, err)
	}
	return v.String(), version, nil
}

// Package writes the chart in src as dir/lifeboat-<chart version>.tgz for
// the release version and returns the file's path. The chart is checked
// first as `helm lint` would load it (Chart.yaml valid, templates parse).
func Package(src, version, dir string) (string, error) {
	chartVersion, appVersion, err := Versions(version)
	if err != nil {
		return "", err
	}
	ch, err := loader.LoadDir(src)
	if err != nil {
		return "", fmt.Errorf("loading the chart %s: %w", src, err)
	}
	ch.Metadata.Version = chartVersion
	ch.Metadata.AppVersion = appVersion
	if err := ch.Validate(); err != nil {
		return "", fmt.Errorf("chart %s: %w", src, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return chartutil.Save(ch, dir)
}
