package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
	"time"
)

// The krew plugin: per architecture a tar.gz holding the release binary as
// kubectl-nodesnap, and the manifest (deploy/krew/nodesnap.yaml, a template)
// filled with the version and each archive's URL and sha256.

// defaultKrewBaseURL is where a release's files are downloaded from: the
// GitHub release of the tag. %s is the version (the tag).
const defaultKrewBaseURL = "https://github.com/nodesnap/nodesnap/releases/download/%s"

// krewBinName is the name krew links into its bin directory; the binary
// reads its argv[0] and calls itself "kubectl nodesnap".
const krewBinName = "kubectl-nodesnap"

// krewManifestName is the filled manifest's name in the output directory.
const krewManifestName = "nodesnap.yaml"

// krewArchiveName is the archive of one architecture, as the release names
// its other files (nodesnap-<version>-linux-<arch>).
func krewArchiveName(version, arch string) string {
	return "nodesnap-" + version + "-linux-" + arch + ".tar.gz"
}

// krewVersion is the version krew wants: semver with a leading v. A tag
// stays itself (v1.2.3, v1.2.3-rc1); commits after a tag get build
// metadata (v1.2.3+4.gabcdef0), an untagged commit sorts before every
// release (v0.0.0-git.abcdef0), as the packages do.
func krewVersion(describe string) (string, error) {
	v, err := parsePkgVersion(describe)
	if err != nil {
		return "", err
	}
	s := "v" + v.Version
	// semver wants MAJOR.MINOR.PATCH exactly.
	switch strings.Count(v.Version, ".") {
	case 0:
		s += ".0.0"
	case 1:
		s += ".0"
	case 2:
	default:
		return "", fmt.Errorf("version %q has more than three numbers: krew wants MAJOR.MINOR.PATCH", describe)
	}
	if v.Prerelease != "" {
		s += "-" + v.Prerelease
	}
	if v.Metadata != "" {
		s += "+" + v.Metadata
	}
	return s, nil
}

// krewBaseURL checks a base URL for the archives (an absolute http or https
// URL; the default is the release's GitHub download URL) and returns it
// without a trailing slash.
func krewBaseURL(base, version string) (string, error) {
	if base == "" {
		return fmt.Sprintf(defaultKrewBaseURL, url.PathEscape(version)), nil
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", usageError{fmt.Sprintf("--krew-base-url %q is not an http(s) URL of a directory (e.g. %s)", base, fmt.Sprintf(defaultKrewBaseURL, "v1.2.3"))}
	}
	return strings.TrimRight(base, "/"), nil
}

// krewArchive is the tar.gz of one architecture: the binary as
// kubectl-nodesnap (0755), README.md and the license (0644), owned by 0:0,
// stamped with mtime, in a gzip stream without a time or a name, so the same
// inputs give the same bytes.
func krewArchive(spec pkgSpec, arch string) ([]byte, error) {
	bin, err := os.ReadFile(spec.Binaries[arch])
	if err != nil {
		return nil, fmt.Errorf("reading the %s binary: %w", arch, err)
	}
	entries := []tarEntry{{Name: krewBinName, Mode: 0o755, Data: bin}}
	readme, err := os.ReadFile(filepath.Join(spec.Root, "README.md"))
	if err != nil {
		return nil, fmt.Errorf("a file for the krew archive: %w", err)
	}
	entries = append(entries, tarEntry{Name: "README.md", Mode: 0o644, Data: readme})
	for _, lic := range []string{"LICENSE", "LICENSE.md", "COPYING"} {
		b, err := os.ReadFile(filepath.Join(spec.Root, lic))
		if err == nil {
			entries = append(entries, tarEntry{Name: lic, Mode: 0o644, Data: b})
			break
		}
		if !os.IsNotExist(err) {
			return nil, fmt.Errorf("a file for the krew archive: %w", err)
		}
	}
	tb, err := layerTar(entries, spec.MTime)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	zw.ModTime = time.Time{} // no time in the header
	if _, err := zw.Write(tb); err != nil {
		return nil, fmt.Errorf("compressing the %s krew archive: %w", arch, err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compressing the %s krew archive: %w", arch, err)
	}
	return buf.Bytes(), nil
}

// krewPlatform is one platform of the manifest.
type krewPlatform struct {
	Arch, URI, SHA256 string
}

// krewManifest fills the template (deploy/krew/nodesnap.yaml).
func krewManifest(tmpl []byte, sourceVersion, version string, platforms []krewPlatform) ([]byte, error) {
	t, err := template.New("krew").Option("missingkey=error").Parse(string(tmpl))
	if err != nil {
		return nil, fmt.Errorf("the krew manifest template: %w", err)
	}
	var b bytes.Buffer
	err = t.Execute(&b, struct {
		SourceVersion, Version string
		Platforms              []krewPlatform
	}{sourceVersion, version, platforms})
	if err != nil {
		return nil, fmt.Errorf("filling the krew manifest: %w", err)
	}
	return b.Bytes(), nil
}

// writeKrew writes every architecture's archive and the filled manifest
// into dir and returns their paths, archives first. Each file is written
// under a temporary name and renamed, so none is ever half-written.
func writeKrew(dir string, spec pkgSpec, baseURL string) ([]string, error) {
	version, err := krewVersion(spec.Version)
	if err != nil {
		return nil, err
	}
	base, err := krewBaseURL(baseURL, spec.Version)
	if err != nil {
		return nil, err
	}
	tmpl, err := os.ReadFile(filepath.Join(spec.Root, "deploy/krew/nodesnap.yaml"))
	if err != nil {
		return nil, fmt.Errorf("the krew manifest template: %w", err)
	}
	arches := make([]string, 0, len(spec.Binaries))
	for a := range spec.Binaries {
		arches = append(arches, a)
	}
	slices.Sort(arches)
	var platforms []krewPlatform
	var paths []string
	for _, arch := range arches {
		b, err := krewArchive(spec, arch)
		if err != nil {
			return nil, err
		}
		name := krewArchiveName(spec.Version, arch)
		p, err := writeAtomic(dir, name, writeBytes(name, b))
		if err != nil {
			return nil, err
		}
		paths = append(paths, p)
		sum := sha256.Sum256(b)
		platforms = append(platforms, krewPlatform{Arch: arch, URI: base + "/" + url.PathEscape(name), SHA256: hex.EncodeToString(sum[:])})
	}
	m, err := krewManifest(tmpl, spec.Version, version, platforms)
	if err != nil {
		return nil, err
	}
	p, err := writeAtomic(dir, krewManifestName, writeBytes(krewManifestName, m))
	if err != nil {
		return nil, err
	}
	return append(paths, p), nil
}

// writeBytes is a writeAtomic body that writes b.
func writeBytes(name string, b []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
		return nil
	}
}
