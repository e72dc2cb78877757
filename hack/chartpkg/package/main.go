// Command package makes the chart's release artifact (`make chart`):
//
//	go run ./hack/chartpkg/package -version v1.2.3 -out dist
//
// writes dist/lifeboat-1.2.3.tgz (appVersion v1.2.3, the image tag), ready
// for `helm push dist/lifeboat-1.2.3.tgz oci://<registry>/charts`.
package main

import (
	"flag"
	"fmt"
	"os"

	"lifeboat.dev/lifeboat/hack/chartpkg"
)

func main() {
	version := flag.String("version", "", "the release's version (git describe); the image tag and the chart's appVersion")
	src := flag.String("chart", "deploy/helm/lifeboat", "the chart's folder")
	out := flag.String("out", "dist", "where the .tgz goes")
	flag.Parse()
	path, err := chartpkg.Package(*src, *version, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "package:", err)
		os.Exit(1)
	}
	fmt.Println(path)
}
