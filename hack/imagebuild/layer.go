package imagebuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"path"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one entry of a layer: a regular file, or a directory (Dir).
type File struct {
	Path     string // absolute path in the image
	Mode     int64
	Data     []byte
	Dir      bool
	UID, GID int
}

// layerTime is every entry's time, so that a layer is the same bytes
// whenever its files are.
var layerTime = time.Unix(0, 0)

// baseLayer is what distroless/static:nonroot gives lifeboat: the users
// (root, nobody, nonroot 65532), name resolution from files then DNS, CA
// certificates, /tmp and nonroot's home. Not carried: tzdata (the
// binaries embed Go's zone database, time/tzdata, for the maintenance
// windows' zones) and distroless' /etc/os-release and Debian package
// records (the SBOM says what the image holds).
func baseLayer(caCerts []byte) (v1.Layer, error) {
	return Layer([]File{
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{Path: "/etc/nsswitch.conf", Mode: 0o644, Data: []byte("hosts: files dns\n")},
		{Path: "/etc/ssl/certs/ca-certificates.crt", Mode: 0o644, Data: caCerts},
		{Path: "/tmp", Mode: 0o1777, Dir: true},
		{Path: "/home/nonroot", Mode: 0o700, Dir: true, UID: 65532, GID: 65532},
		{Path: "/root", Mode: 0o700, Dir: true},
	})
}

// Layer is an OCI layer (gzip) holding files and their parent
// directories (root's, 0755), every entry dated the Unix epoch, so that a
// layer is the same bytes whenever its files are.
func Layer(files []File) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	made := map[string]bool{}
	for _, f := range files {
		rel := strings.TrimPrefix(path.Clean(f.Path), "/")
		parts := strings.Split(path.Dir(rel), "/")
		for i := range parts {
			d := strings.Join(parts[:i+1], "/")
			if d == "." || made[d] {
				continue
			}
			made[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: layerTime, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: f.Mode, Size: int64(len(f.Data)), Uid: f.UID, Gid: f.GID, ModTime: layerTime, Format: tar.FormatPAX}
		if f.Dir {
			made[rel] = true
			h.Typeflag, h.Name, h.Size = tar.TypeDir, rel+"/", 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	// gzip's default level, not go-containerregistry's default (best
	// speed): the layer is built once and pulled by every node; measured
	// 30.3 MB against 35.7 MB for the binaries (docs/benchmarks.md).
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.DefaultCompression))
}
