// Package imagebuild builds lifeboat's container image from Go, with no
// container engine: both binaries cross-compiled for each platform, on a
// base equivalent to distroless/static:nonroot, with an SPDX SBOM, as an
// OCI image index. `make image` writes it as an OCI layout, `make
// image-push` pushes it, and test/testenv imports exactly what it builds
// (for the machine's own platform) into the real nodes' containerd.
//
// It uses go-containerregistry (the library ko and Karpenter's image
// builds rest on) for the image format, the layout and the registry.
package imagebuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's layout, as the Dockerfile's: binaries on PATH, user nonroot.
const (
	BinDir     = "/usr/local/bin"
	SBOMPath   = "/usr/share/doc/lifeboat/sbom.spdx.json"
	User       = "65532:65532"
	Entrypoint = BinDir + "/lifeboat"
)

// DefaultPlatforms are the platforms a release builds.
var DefaultPlatforms = []string{"linux/amd64", "linux/arm64"}

// Options say what to build.
type Options struct {
	// Root is the module's root (the directory holding go.mod).
	Root string
	// Version goes into the binaries (main.version) and the image's labels.
	Version string
	// Platforms, "linux/<arch>"; empty: DefaultPlatforms.
	Platforms []string
	// Created is the image's and the SBOM's creation time (the commit's
	// time, so that a build is reproducible); zero: the Unix epoch.
	Created time.Time
	// CACerts is the CA bundle the image carries (distroless/static has
	// Debian's); empty: /etc/ssl/certs/ca-certificates.crt of this machine.
	CACerts []byte
	// WorkDir holds the built binaries; empty: a temporary directory,
	// removed when Build returns.
	WorkDir string
}

// Binary is one of the image's binaries: `go build` of the command with
// the Makefile's flags (test/deploy holds the two to each other).
type Binary struct {
	Name string // file name under BinDir
	Tags []string
}

// Binaries are the image's: lifeboat, the entrypoint, and lifeboat-imds,
// IMDS mode only (the chart's DaemonSet command).
var Binaries = []Binary{{Name: "lifeboat"}, {Name: "lifeboat-imds", Tags: []string{"imdsonly"}}}

// GoBuildArgs are the arguments of `go build` for b, as the Makefile's
// build and build-imds targets give them (with CGO_ENABLED=0 in the
// environment, and GOOS/GOARCH for the platform).
func GoBuildArgs(b Binary, version, out string) []string {
	args := []string{"build"}
	if len(b.Tags) > 0 {
		args = append(args, "-tags", strings.Join(b.Tags, ","))
	}
	return append(args, "-trimpath", "-ldflags", "-s -w -X main.version="+version, "-o", out, "./cmd/lifeboat")
}

// Build builds the image index, one image per platform, and returns it
// with the SBOM of the first platform's image (every platform's lists the
// same modules).
func Build(o Options) (v1.ImageIndex, []byte, error) {
	if o.Version == "" {
		return nil, nil, fmt.Errorf("no version")
	}
	if len(o.Platforms) == 0 {
		o.Platforms = DefaultPlatforms
	}
	if o.Created.IsZero() {
		o.Created = time.Unix(0, 0)
	}
	if len(o.CACerts) == 0 {
		ca, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
		if err != nil {
			return nil, nil, fmt.Errorf("the image needs CA certificates (Debian's ca-certificates package): %w", err)
		}
		o.CACerts = ca
	}
	if o.WorkDir == "" {
		dir, err := os.MkdirTemp("", "lifeboat-image-")
		if err != nil {
			return nil, nil, err
		}
		defer os.RemoveAll(dir)
		o.WorkDir = dir
	}
	base, err := baseLayer(o.CACerts)
	if err != nil {
		return nil, nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var first []byte
	for _, p := range o.Platforms {
		plat, err := v1.ParsePlatform(p)
		if err != nil || plat.OS != "linux" || plat.Architecture == "" {
			return nil, nil, fmt.Errorf("platform %q: want linux/<arch>", p)
		}
		img, sbom, err := platformImage(o, *plat, base)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", p, err)
		}
		if first == nil {
			first = sbom
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: plat}})
	}
	return idx, first, nil
}

// platformImage builds both binaries for plat and the image holding them,
// and returns it with its SBOM.
func platformImage(o Options, plat v1.Platform, base v1.Layer) (v1.Image, []byte, error) {
	var files []File
	var paths []string
	for _, b := range Binaries {
		out := filepath.Join(o.WorkDir, plat.Architecture, b.Name)
		cmd := exec.Command("go", GoBuildArgs(b, o.Version, out)...)
		cmd.Dir = o.Root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+plat.Architecture)
		if msg, err := cmd.CombinedOutput(); err != nil {
			return nil, nil, fmt.Errorf("go %s: %w\n%s", strings.Join(cmd.Args[1:], " "), err, msg)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, File{Path: BinDir + "/" + b.Name, Mode: 0o755, Data: data})
		paths = append(paths, out)
	}
	sbom, err := SBOM(paths, o.Version, o.Created)
	if err != nil {
		return nil, nil, err
	}
	files = append(files, File{Path: SBOMPath, Mode: 0o644, Data: sbom})
	app, err := Layer(files)
	if err != nil {
		return nil, nil, err
	}
	img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), base, app)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = plat.OS, plat.Architecture, plat.Variant
	cfg.Config = v1.Config{
		User:       User,
		Entrypoint: []string{Entrypoint},
		Cmd:        []string{"run"},
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		WorkingDir: "/home/nonroot",
		Labels: map[string]string{
			"org.opencontainers.image.title":   "lifeboat",
			"org.opencontainers.image.version": o.Version,
			"org.opencontainers.image.source":  "https://github.com/lifeboat-dev/lifeboat",
		},
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, nil, err
	}
	img, err = mutate.CreatedAt(img, v1.Time{Time: o.Created})
	return img, sbom, err
}
