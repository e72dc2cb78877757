package testenv

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// BenchmarkLifeboatImage reports the size of lifeboat's own image layer
// (both binaries, release flags, as BuildLifeboatImage builds it for the
// real node): uncompressed, and gzip-compressed at the default level as a
// registry stores it. The image's base (distroless/static, the Dockerfile's)
// is not pulled here and not in the figure.
//
//	go test ./test/testenv -run '^$' -bench LifeboatImage -benchtime 1x
func BenchmarkLifeboatImage(b *testing.B) {
	for range b.N {
		archive, err := BuildLifeboatImage(b.TempDir(), "bench")
		if err != nil {
			b.Fatal(err)
		}
		layer, err := readLayer(archive)
		if err != nil {
			b.Fatal(err)
		}
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		if _, err := zw.Write(layer); err != nil {
			b.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(layer))/1e6, "layer-MB")
		b.ReportMetric(float64(gz.Len())/1e6, "layer-gzip-MB")
		fmt.Printf("lifeboat's image layer (lifeboat + lifeboat-imds): %.1f MB, %.1f MB gzip-compressed\n", float64(len(layer))/1e6, float64(gz.Len())/1e6)
	}
}

// readLayer returns the one layer of an image archive WriteImageArchive wrote.
func readLayer(archive string) ([]byte, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: no layer.tar", archive)
		}
		if err != nil {
			return nil, err
		}
		if strings.HasSuffix(h.Name, "/layer.tar") {
			return io.ReadAll(tr)
		}
	}
}
