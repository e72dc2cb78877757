package imagebuild

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Annotations of the index in an OCI layout that name the image: the OCI
// reference name, and the one containerd's `ctr images import` names the
// image by.
const (
	annotationRefName       = "org.opencontainers.image.ref.name"
	annotationContainerdRef = "io.containerd.image.name"
)

// WriteLayout writes idx as an OCI image layout in dir (created, or
// replaced), named ref (e.g. registry/lifeboat:v1.2.3).
func WriteLayout(dir string, idx v1.ImageIndex, ref string) error {
	if _, err := name.ParseReference(ref); err != nil {
		return fmt.Errorf("image name %q: %w", ref, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing the OCI layout %s: %w", dir, err)
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{annotationRefName: ref, annotationContainerdRef: ref}))
}

// WriteArchive writes the OCI layout in dir as a tar archive (an OCI
// archive), which `ctr images import` reads.
func WriteArchive(dir, archive string) error {
	f, err := os.Create(archive)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname = filepath.ToSlash(rel), layerTime, 0, 0, "", ""
		if d.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", archive, err)
	}
	return nil
}

// Push pushes idx to ref with the credentials of the machine's Docker
// configuration and credential helpers (as `docker login` or `crane auth
// login` leave them; no Docker engine needed).
func Push(idx v1.ImageIndex, ref string) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("image name %q: %w", ref, err)
	}
	if err := remote.WriteIndex(r, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}
