package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"lifeboat.dev/lifeboat/hack/imagebuild"
)

// The images of the real node. No registry is reachable: each is built from
// Go source in the repository, packed as an image archive and imported into
// the node's containerd; pods use imagePullPolicy Never.
const (
	// SandboxImage is the pod sandbox ("pause") image, test/images/pause.
	SandboxImage = "lifeboat.test/pause:1"
	// WorkloadImage records its own life (test/images/workload; see
	// WorkloadRecord).
	WorkloadImage = "lifeboat.test/workload:1"
	// LifeboatImageRepository is the repository of lifeboat's own image
	// (BuildLifeboatImage): the release image (hack/imagebuild) for this
	// machine's platform, run as user 65532, entrypoint lifeboat, command run.
	LifeboatImageRepository = "lifeboat.test/lifeboat"
)

// ImageSpec describes an image of one layer.
type ImageSpec struct {
	Ref        string // name:tag, imported under this name
	Files      []imagebuild.File
	Entrypoint []string
	Cmd        []string
	User       string
	Env        []string
}

// imageEpoch is the creation time of the test images, so that an image is the
// same bytes whenever its files are.
var imageEpoch = time.Unix(0, 0)

// WriteImageArchive writes spec as an image archive (the docker-archive
// format, go-containerregistry's tarball.Write), which `ctr images import`
// reads, to path.
func WriteImageArchive(path string, spec ImageSpec) error {
	layer, err := imagebuild.Layer(spec.Files)
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config = v1.Config{Entrypoint: spec.Entrypoint, Cmd: spec.Cmd, User: spec.User,
		Env: append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, spec.Env...)}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	if img, err = mutate.CreatedAt(img, v1.Time{Time: imageEpoch}); err != nil {
		return err
	}
	ref, err := name.NewTag(spec.Ref)
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(path, ref, img); err != nil {
		return fmt.Errorf("writing image archive %s: %w", path, err)
	}
	return nil
}

// goBinary builds a static binary of a package of this module for Linux on
// this machine's architecture and returns its bytes.
func goBinary(dir, pkg string, ldflags string, tags ...string) ([]byte, error) {
	out := filepath.Join(dir, strings.Join(append([]string{filepath.Base(pkg)}, tags...), "-")+".bin")
	args := []string{"build", "-trimpath", "-o", out}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building %s: %w\n%s", pkg, err, b)
	}
	return os.ReadFile(out)
}

// BuildImages builds the sandbox and workload images from source into dir
// and returns the paths of their archives, by image reference.
func BuildImages(dir string) (map[string]string, error) {
	pause, err := goBinary(dir, "./test/images/pause", "-s -w")
	if err != nil {
		return nil, err
	}
	workload, err := goBinary(dir, "./test/images/workload", "-s -w")
	if err != nil {
		return nil, err
	}
	paths := map[string]string{}
	for _, s := range []ImageSpec{
		{Ref: SandboxImage, Files: []imagebuild.File{{Path: "/pause", Mode: 0o755, Data: pause}}, Entrypoint: []string{"/pause"}},
		{Ref: WorkloadImage, Files: []imagebuild.File{{Path: "/workload", Mode: 0o755, Data: workload}}, Entrypoint: []string{"/workload"}},
	} {
		p, err := writeImage(dir, s)
		if err != nil {
			return nil, err
		}
		paths[s.Ref] = p
	}
	return paths, nil
}

// BuildLifeboatImage builds lifeboat's own image, tagged tag (which is
// also its version), into dir, for this machine's platform, with exactly
// the code `make image` builds a release with (hack/imagebuild: the
// Makefile's build lines, the distroless-equivalent base, the SBOM), and
// returns the path of its OCI archive for `ctr images import`. The OCI
// layout it archives is LifeboatImageLayout(dir, tag).
func BuildLifeboatImage(dir, tag string) (string, error) {
	idx, _, err := imagebuild.Build(imagebuild.Options{Root: RepoRoot(), Version: tag,
		Platforms: []string{"linux/" + runtime.GOARCH}, WorkDir: filepath.Join(dir, "build-"+tag)})
	if err != nil {
		return "", err
	}
	layoutDir := LifeboatImageLayout(dir, tag)
	if err := imagebuild.WriteLayout(layoutDir, idx, LifeboatImageRepository+":"+tag); err != nil {
		return "", err
	}
	archive := filepath.Join(dir, "lifeboat_"+tag+".oci.tar")
	return archive, imagebuild.WriteArchive(layoutDir, archive)
}

// LifeboatImageLayout is where BuildLifeboatImage(dir, tag) writes the
// image's OCI layout.
func LifeboatImageLayout(dir, tag string) string { return filepath.Join(dir, "lifeboat_"+tag+".oci") }

// writeImage writes an image's archive into dir, named after the image.
func writeImage(dir string, s ImageSpec) (string, error) {
	p := filepath.Join(dir, strings.ReplaceAll(filepath.Base(s.Ref), ":", "_")+".image.tar")
	if err := WriteImageArchive(p, s); err != nil {
		return "", err
	}
	return p, nil
}
