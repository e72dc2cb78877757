package imagebuild

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// The image for this machine's platform, as `make image` builds it: both
// binaries (static, with the version and the imds tag), the base of
// distroless/static:nonroot's properties, the SBOM; its config runs
// lifeboat as nonroot; the same inputs make the same digest; the layout
// and its archive hold it under its name.
func TestBuild(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	plat := "linux/" + runtime.GOARCH
	opts := Options{Root: root, Version: "v9.8.7-test", Platforms: []string{plat}, CACerts: []byte("-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n"),
		Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), WorkDir: t.TempDir()}
	idx, sbom, err := Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Platform == nil || m.Manifests[0].Platform.String() != plat {
		t.Fatalf("index manifests %+v, want one for %s", m.Manifests, plat)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" || !slices.Equal(cfg.Config.Entrypoint, []string{"/usr/local/bin/lifeboat"}) ||
		!slices.Equal(cfg.Config.Cmd, []string{"run"}) || cfg.Architecture != runtime.GOARCH || cfg.OS != "linux" ||
		cfg.Config.Labels["org.opencontainers.image.version"] != "v9.8.7-test" || !cfg.Created.Time.Equal(opts.Created) {
		t.Errorf("config %+v", cfg)
	}
	files := imageFiles(t, img)
	for _, want := range []struct {
		path string
		mode int64
		uid  int
		has  string
	}{
		{"etc/passwd", 0o644, 0, "nonroot:x:65532:65532:"},
		{"etc/group", 0o644, 0, "nonroot:x:65532:"},
		{"etc/nsswitch.conf", 0o644, 0, "hosts: files dns"},
		{"etc/ssl/certs/ca-certificates.crt", 0o644, 0, "BEGIN CERTIFICATE"},
		{"tmp/", 0o1777, 0, ""},
		{"home/nonroot/", 0o700, 65532, ""},
		{"usr/local/bin/lifeboat", 0o755, 0, ""},
		{"usr/local/bin/lifeboat-imds", 0o755, 0, ""},
		{strings.TrimPrefix(SBOMPath, "/"), 0o644, 0, `"spdxVersion": "SPDX-2.3"`},
	} {
		f, ok := files[want.path]
		switch {
		case !ok:
			t.Errorf("%s: not in the image", want.path)
		case f.h.Mode != want.mode || f.h.Uid != want.uid:
			t.Errorf("%s: mode %o uid %d, want %o uid %d", want.path, f.h.Mode, f.h.Uid, want.mode, want.uid)
		case !strings.Contains(string(f.data), want.has):
			t.Errorf("%s does not say %q", want.path, want.has)
		}
	}
	for _, b := range Binaries {
		data := files["usr/local/bin/"+b.Name].data
		checkBinary(t, b, data)
	}
	var doc spdx
	if err := json.Unmarshal(sbom, &doc); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, p := range doc.Packages {
		names[p.Name] = true
	}
	for _, want := range []string{"lifeboat", "lifeboat-imds", "stdlib", "k8s.io/client-go", "github.com/aws/aws-sdk-go-v2"} {
		if !names[want] {
			t.Errorf("the SBOM does not list %s", want)
		}
	}
	if !bytes.Equal(sbom, files[strings.TrimPrefix(SBOMPath, "/")].data) {
		t.Error("the SBOM returned is not the image's")
	}

	again, _, err := Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := idx.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds of the same inputs: %s and %s, want one digest", d1, d2)
	}

	dir := filepath.Join(t.TempDir(), "layout")
	if err := WriteLayout(dir, idx, "registry.example/lifeboat:v9.8.7-test"); err != nil {
		t.Fatal(err)
	}
	p, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.IndexManifest()
	if err != nil || len(top.Manifests) != 1 || top.Manifests[0].Digest != d1 ||
		top.Manifests[0].Annotations["io.containerd.image.name"] != "registry.example/lifeboat:v9.8.7-test" {
		t.Errorf("layout index %+v (%v), want the image index %s named registry.example/lifeboat:v9.8.7-test", top, err, d1)
	}
	archive := filepath.Join(t.TempDir(), "lifeboat.oci.tar")
	if err := WriteArchive(dir, archive); err != nil {
		t.Fatal(err)
	}
	entries := archiveNames(t, archive)
	for _, want := range []string{"oci-layout", "index.json", "blobs/sha256/" + d1.Hex} {
		if !slices.Contains(entries, want) {
			t.Errorf("the archive lacks %s: %v", want, entries)
		}
	}
	if err := WriteLayout(dir, idx, "not a name"); err == nil {
		t.Error("a layout named \"not a name\" was written")
	}
}

// checkBinary: static (no interpreter), built from ./cmd/lifeboat with the
// version and b's tags, as the Makefile builds it.
func checkBinary(t *testing.T, b Binary, data []byte) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", b.Name, err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked", b.Name)
		}
	}
	info, err := buildinfo.Read(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", b.Name, err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if info.Path != "lifeboat.dev/lifeboat/cmd/lifeboat" || settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" ||
		settings["-tags"] != strings.Join(b.Tags, ",") {
		t.Errorf("%s built as %s with %v", b.Name, info.Path, settings)
	}
	// -trimpath leaves -ldflags out of the build information: the version
	// (-X main.version) is looked for in the binary, the stripping (-s -w)
	// in its sections.
	if !bytes.Contains(data, []byte("v9.8.7-test")) {
		t.Errorf("%s does not carry its version", b.Name)
	}
	if f.Section(".symtab") != nil {
		t.Errorf("%s has a symbol table: not built with -s", b.Name)
	}
}

type entry struct {
	h    *tar.Header
	data []byte
}

// imageFiles reads every entry of img's layers, by path.
func imageFiles(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]entry{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			out[h.Name] = entry{h: h, data: data}
		}
		rc.Close()
	}
	return out
}

func archiveNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}
