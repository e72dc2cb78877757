package imagebuild

import (
	"cmp"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// spdx is the part of an SPDX 2.3 document (JSON) the SBOM fills.
type spdx struct {
	Version       string             `json:"spdxVersion"`
	DataLicense   string             `json:"dataLicense"`
	ID            string             `json:"SPDXID"`
	Name          string             `json:"name"`
	Namespace     string             `json:"documentNamespace"`
	Creation      spdxCreation       `json:"creationInfo"`
	Packages      []spdxPackage      `json:"packages"`
	Relationships []spdxRelationship `json:"relationships"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	ID               string       `json:"SPDXID"`
	Name             string       `json:"name"`
	Version          string       `json:"versionInfo"`
	DownloadLocation string       `json:"downloadLocation"`
	FilesAnalyzed    bool         `json:"filesAnalyzed"`
	ExternalRefs     []spdxExtRef `json:"externalRefs,omitempty"`
	Checksums        []spdxSum    `json:"checksums,omitempty"`
	Comment          string       `json:"comment,omitempty"`
}

type spdxExtRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxSum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

// SBOM is an SPDX 2.3 document of the binaries at paths, read from the
// build information Go records in each (the main module, every module
// linked in, the Go toolchain): what is in the image, by module and
// version, as package URLs (pkg:golang/...).
func SBOM(paths []string, version string, created time.Time) ([]byte, error) {
	doc := spdx{
		Version: "SPDX-2.3", DataLicense: "CC0-1.0", ID: "SPDXRef-DOCUMENT",
		Name:      "lifeboat-" + version,
		Namespace: "https://lifeboat.dev/spdx/lifeboat-" + version,
		Creation:  spdxCreation{Created: created.UTC().Format(time.RFC3339), Creators: []string{"Tool: lifeboat hack/imagebuild"}},
	}
	seen := map[string]bool{}
	add := func(p spdxPackage, by string) {
		if !seen[p.ID] {
			seen[p.ID] = true
			doc.Packages = append(doc.Packages, p)
		}
		doc.Relationships = append(doc.Relationships, spdxRelationship{Element: by, Type: "DEPENDS_ON", Related: p.ID})
	}
	for _, path := range paths {
		info, err := buildinfo.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading the build information of %s: %w", path, err)
		}
		bin := spdxPackage{ID: "SPDXRef-Binary-" + spdxID(filepath.Base(path)), Name: filepath.Base(path), Version: version,
			DownloadLocation: "NOASSERTION", Comment: "built from " + info.Main.Path + " (" + info.Path + ")"}
		for _, s := range info.Settings {
			if s.Key == "-tags" || s.Key == "GOARCH" {
				bin.Comment += "; " + s.Key + "=" + s.Value
			}
		}
		doc.Packages = append(doc.Packages, bin)
		doc.Relationships = append(doc.Relationships, spdxRelationship{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: bin.ID})
		goVersion := strings.TrimPrefix(info.GoVersion, "go")
		add(spdxPackage{ID: "SPDXRef-Go-stdlib", Name: "stdlib", Version: goVersion, DownloadLocation: "https://go.dev/dl/",
			ExternalRefs: []spdxExtRef{purl("stdlib", goVersion)}}, bin.ID)
		for _, m := range info.Deps {
			if m.Replace != nil {
				m = m.Replace
			}
			p := spdxPackage{ID: "SPDXRef-Module-" + spdxID(m.Path+"-"+m.Version), Name: m.Path, Version: m.Version,
				DownloadLocation: "https://proxy.golang.org/" + m.Path + "/@v/" + m.Version + ".zip",
				ExternalRefs:     []spdxExtRef{purl(m.Path, m.Version)}}
			if m.Sum != "" {
				p.Comment = "go.sum " + m.Sum
			}
			add(p, bin.ID)
		}
	}
	slices.SortStableFunc(doc.Relationships, func(a, b spdxRelationship) int {
		return cmp.Or(cmp.Compare(a.Element, b.Element), cmp.Compare(a.Related, b.Related))
	})
	return json.MarshalIndent(doc, "", "  ")
}

// purl is a Go module's package URL.
func purl(module, version string) spdxExtRef {
	return spdxExtRef{Category: "PACKAGE-MANAGER", Type: "purl", Locator: "pkg:golang/" + module + "@" + version}
}

// spdxID makes s an SPDX identifier's tail (letters, digits, '.', '-').
func spdxID(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '-'
	}, s)
}
