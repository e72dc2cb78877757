package testenv

import (
	"fmt"
	"io"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// BenchmarkLifeboatImage reports the size of lifeboat's own image for
// this machine's platform as `make image` builds it (hack/imagebuild):
// its layer of both binaries and the SBOM, uncompressed and as a registry
// stores it (gzip), and the whole image compressed (with the base layer:
// users, CA certificates).
//
//	go test ./test/testenv -run '^$' -bench LifeboatImage -benchtime 1x
func BenchmarkLifeboatImage(b *testing.B) {
	for range b.N {
		dir := b.TempDir()
		if _, err := BuildLifeboatImage(dir, "bench"); err != nil {
			b.Fatal(err)
		}
		idx, err := layout.ImageIndexFromPath(LifeboatImageLayout(dir, "bench"))
		if err != nil {
			b.Fatal(err)
		}
		m, err := idx.IndexManifest()
		if err != nil || len(m.Manifests) != 1 {
			b.Fatalf("layout index: %v, %d entries", err, len(m.Manifests))
		}
		inner, err := idx.ImageIndex(m.Manifests[0].Digest)
		if err != nil {
			b.Fatal(err)
		}
		im, err := inner.IndexManifest()
		if err != nil || len(im.Manifests) != 1 {
			b.Fatalf("image index: %v, %d platforms", err, len(im.Manifests))
		}
		img, err := inner.Image(im.Manifests[0].Digest)
		if err != nil {
			b.Fatal(err)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 2 {
			b.Fatalf("layers: %v, %d (want base and binaries)", err, len(layers))
		}
		var total int64
		for _, l := range layers {
			n, err := l.Size()
			if err != nil {
				b.Fatal(err)
			}
			total += n
		}
		app := layers[1]
		gz, err := app.Size()
		if err != nil {
			b.Fatal(err)
		}
		rc, err := app.Uncompressed()
		if err != nil {
			b.Fatal(err)
		}
		raw, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(raw)/1e6, "layer-MB")
		b.ReportMetric(float64(gz)/1e6, "layer-gzip-MB")
		b.ReportMetric(float64(total)/1e6, "image-gzip-MB")
		fmt.Printf("lifeboat's image (%s): binaries layer %.1f MB, %.1f MB gzip-compressed; whole image %.1f MB compressed\n",
			im.Manifests[0].Platform, float64(raw)/1e6, float64(gz)/1e6, float64(total)/1e6)
	}
}
