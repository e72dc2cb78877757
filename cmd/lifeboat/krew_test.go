package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// krewPlugin is Krew's plugin manifest (krew.googlecontainertools.github.com/v1alpha2
// Plugin, sigs.k8s.io/krew/pkg/index), the fields it defines: read strictly,
// a misspelt field fails.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Caveats          string `json:"caveats"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			Sha256 string `json:"sha256"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
			Bin string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

// deploy/krew/lifeboat.yaml installs, on Linux and macOS, amd64 and arm64,
// the binary kubectl runs for `kubectl lifeboat`: every platform's bin (and
// the file it extracts) is pluginBinary, its archive is named for its
// platform and the release version, and its sha256 placeholder names that
// archive.
func TestKrewManifest(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/krew/lifeboat.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var p krewPlugin
	if err := yaml.UnmarshalStrict(raw, &p); err != nil {
		t.Fatalf("not a Krew plugin manifest: %v", err)
	}
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" {
		t.Errorf("apiVersion %q kind %q", p.APIVersion, p.Kind)
	}
	if want := strings.TrimPrefix(pluginBinary, "kubectl-"); p.Metadata.Name != want {
		t.Errorf("name %q, want %q (kubectl %s runs %s)", p.Metadata.Name, want, want, pluginBinary)
	}
	if !strings.HasPrefix(p.Spec.Version, "v") || p.Spec.ShortDescription == "" || p.Spec.Homepage == "" {
		t.Errorf("version %q (Krew wants vX.Y.Z), shortDescription %q, homepage %q", p.Spec.Version, p.Spec.ShortDescription, p.Spec.Homepage)
	}
	var platforms []string
	for _, pl := range p.Spec.Platforms {
		osArch := pl.Selector.MatchLabels["os"] + "_" + pl.Selector.MatchLabels["arch"]
		platforms = append(platforms, osArch)
		archive := pluginBinary + "_" + osArch + ".tar.gz"
		if pl.Bin != pluginBinary {
			t.Errorf("%s: bin %q, want %q", osArch, pl.Bin, pluginBinary)
		}
		if len(pl.Files) != 1 || pl.Files[0].From != pluginBinary {
			t.Errorf("%s: files %+v, want %s extracted", osArch, pl.Files, pluginBinary)
		}
		if !strings.HasSuffix(pl.URI, "/download/"+p.Spec.Version+"/"+archive) {
			t.Errorf("%s: uri %q, want the release %s's %s", osArch, pl.URI, p.Spec.Version, archive)
		}
		if !strings.Contains(pl.Sha256, archive) {
			t.Errorf("%s: sha256 %q, want the placeholder of %s", osArch, pl.Sha256, archive)
		}
	}
	slices.Sort(platforms)
	if want := []string{"darwin_amd64", "darwin_arm64", "linux_amd64", "linux_arm64"}; !slices.Equal(platforms, want) {
		t.Errorf("platforms %v, want %v", platforms, want)
	}
	if !strings.Contains(statusHeader, "Installed as "+pluginBinary) {
		t.Errorf("lifeboat status --help does not name %s", pluginBinary)
	}
}
