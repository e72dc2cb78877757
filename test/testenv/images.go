package testenv

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
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
	// (BuildLifeboatImage): the binary built with the Dockerfile's flags, run
	// as user 65532, entrypoint lifeboat, command run.
	LifeboatImageRepository = "lifeboat.test/lifeboat"
)

// ImageFile is one file of an image's single layer.
type ImageFile struct {
	Path string // absolute path in the image
	Mode int64
	Data []byte
}

// ImageSpec describes an image of one layer.
type ImageSpec struct {
	Ref        string // name:tag, imported under this name
	Files      []ImageFile
	Entrypoint []string
	Cmd        []string
	User       string
	Env        []string
}

// imageEpoch is the time of every file in a layer, so that an image is the
// same bytes whenever its files are.
var imageEpoch = time.Unix(0, 0)

// WriteImageArchive writes spec as an image archive (the docker-archive
// layout: manifest.json, the image config and one layer tar), which
// `ctr images import` reads, to path.
func WriteImageArchive(path string, spec ImageSpec) error {
	layer, err := layerTar(spec.Files)
	if err != nil {
		return err
	}
	diffID := sha256.Sum256(layer)
	config := map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      imageEpoch.UTC().Format(time.RFC3339),
		"config": map[string]any{
			"Entrypoint": spec.Entrypoint,
			"Cmd":        spec.Cmd,
			"User":       spec.User,
			"Env":        append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, spec.Env...),
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])}},
	}
	configJSON, err := json.Marshal(config)
	if err != nil {
		return err
	}
	configSum := sha256.Sum256(configJSON)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	layerName := hex.EncodeToString(diffID[:]) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{
		"Config": configName, "RepoTags": []string{spec.Ref}, "Layers": []string{layerName},
	}})
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		data []byte
	}{{configName, configJSON}, {layerName, layer}, {"manifest.json", manifest}} {
		if dir := filepath.Dir(f.name); dir != "." {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: imageEpoch}); err != nil {
				return err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: imageEpoch}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing image archive %s: %w", path, err)
	}
	return nil
}

// layerTar returns a layer holding files and their parent directories.
func layerTar(files []ImageFile) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		rel := strings.TrimPrefix(filepath.Clean(f.Path), "/")
		parts := strings.Split(filepath.Dir(rel), "/")
		for i := range parts {
			d := strings.Join(parts[:i+1], "/")
			if d == "." || dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: imageEpoch}); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: f.Mode, Size: int64(len(f.Data)), ModTime: imageEpoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
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
		{Ref: SandboxImage, Files: []ImageFile{{Path: "/pause", Mode: 0o755, Data: pause}}, Entrypoint: []string{"/pause"}},
		{Ref: WorkloadImage, Files: []ImageFile{{Path: "/workload", Mode: 0o755, Data: workload}}, Entrypoint: []string{"/workload"}},
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
// also its version), into dir and returns the path of its archive: the
// binaries built with the Dockerfile's build lines, CGO_ENABLED=0 go build
// [-tags imdsonly] -trimpath -ldflags "-s -w -X main.version=${VERSION}"
// (test/deploy checks that they match the Makefile's), at the Dockerfile's
// paths, as its user, with its entrypoint and command.
func BuildLifeboatImage(dir, tag string) (string, error) {
	lifeboat, err := goBinary(dir, "./cmd/lifeboat", "-s -w -X main.version="+tag)
	if err != nil {
		return "", err
	}
	imds, err := goBinary(dir, "./cmd/lifeboat", "-s -w -X main.version="+tag, "imdsonly")
	if err != nil {
		return "", err
	}
	files := []ImageFile{
		{Path: "/usr/local/bin/lifeboat", Mode: 0o755, Data: lifeboat},
		{Path: "/usr/local/bin/lifeboat-imds", Mode: 0o755, Data: imds},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnonroot:x:65532:\n")},
	}
	// distroless/static carries CA certificates; lifeboat needs them for
	// real AWS endpoints only (the testbed's are plain HTTP).
	if ca, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		files = append(files, ImageFile{Path: "/etc/ssl/certs/ca-certificates.crt", Mode: 0o644, Data: ca})
	}
	return writeImage(dir, ImageSpec{Ref: LifeboatImageRepository + ":" + tag, Files: files,
		Entrypoint: []string{"/usr/local/bin/lifeboat"}, Cmd: []string{"run"}, User: "65532:65532"})
}

// writeImage writes an image's archive into dir, named after the image.
func writeImage(dir string, s ImageSpec) (string, error) {
	p := filepath.Join(dir, strings.ReplaceAll(filepath.Base(s.Ref), ":", "_")+".image.tar")
	if err := WriteImageArchive(p, s); err != nil {
		return "", err
	}
	return p, nil
}
