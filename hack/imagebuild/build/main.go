// Command build builds lifeboat's image with no container engine (`make
// image`, `make image-push`; hack/imagebuild):
//
//	go run ./hack/imagebuild/build -version v1.2.3 -image REPO/lifeboat:v1.2.3 [-out out/image] [-push]
//
// writes the multi-platform image as an OCI layout in -out (and its SBOM
// beside it), and with -push pushes it to -image.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"lifeboat.dev/lifeboat/hack/imagebuild"
)

func main() {
	version := flag.String("version", "", "the version (main.version, the image's label)")
	image := flag.String("image", "", "the image's name, REPO/lifeboat:TAG")
	out := flag.String("out", "out/image", "the OCI layout's directory")
	platforms := flag.String("platforms", strings.Join(imagebuild.DefaultPlatforms, ","), "linux/<arch>, comma-separated")
	created := flag.String("created", "", "the image's creation time, RFC 3339 (the commit's: reproducible builds); empty: the Unix epoch")
	push := flag.Bool("push", false, "push the image to -image")
	flag.Parse()
	if err := run(*version, *image, *out, *platforms, *created, *push); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(version, image, out, platforms, created string, push bool) error {
	if image == "" {
		return fmt.Errorf("-image is required (REPO/lifeboat:TAG)")
	}
	var at time.Time
	if created != "" {
		t, err := time.Parse(time.RFC3339, created)
		if err != nil {
			return fmt.Errorf("-created: %w", err)
		}
		at = t
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	idx, sbom, err := imagebuild.Build(imagebuild.Options{Root: root, Version: version, Platforms: strings.Split(platforms, ","), Created: at})
	if err != nil {
		return err
	}
	if err := imagebuild.WriteLayout(out, idx, image); err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s: OCI layout of %s@%s (%s)\n", out, image, digest, platforms)
	sbomPath := filepath.Clean(out) + ".spdx.json"
	if err := os.WriteFile(sbomPath, sbom, 0o644); err != nil {
		return err
	}
	fmt.Printf("%s: its SBOM (SPDX 2.3; in the image at %s)\n", sbomPath, imagebuild.SBOMPath)
	if push {
		if err := imagebuild.Push(idx, image); err != nil {
			return err
		}
		fmt.Printf("pushed %s@%s\n", image, digest)
	}
	return nil
}
