package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	binPath = "/usr/local/bin/nodesnap"
	envPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// containerdNameAnnotation is how containerd (ctr import, and docker
	// save since Docker 25) names an image of an OCI layout: the full
	// reference, where org.opencontainers.image.ref.name holds the tag.
	containerdNameAnnotation = "io.containerd.image.name"
)

// imageSpec is everything an image is built from.
type imageSpec struct {
	Ref      string            // e.g. ghcr.io/nodesnap/nodesnap:v0.1.0
	Version  string            // nodesnap's version (label)
	Revision string            // the git commit (label)
	Source   string            // the repository's URL (label)
	Created  time.Time         // SOURCE_DATE_EPOCH: every timestamp
	Binaries map[string]string // GOARCH → path of a linux binary
	CACerts  string            // a PEM bundle, copied to /etc/ssl/certs/ca-certificates.crt
	// DockerArch is the architecture whose image manifest.json names:
	// docker load takes one single-platform image per entry.
	DockerArch string
}

func cmdImage(args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("image", flag.ContinueOnError)
	fl.SetOutput(stderr)
	spec := imageSpec{Binaries: binaryFlag{}}
	fl.Var(binaryFlag(spec.Binaries), "binary", "ARCH=PATH of a static linux binary (repeat per architecture)")
	fl.StringVar(&spec.Ref, "ref", "", "image reference with a tag, e.g. ghcr.io/nodesnap/nodesnap:v0.1.0")
	fl.StringVar(&spec.Version, "version", "", "nodesnap version (label org.opencontainers.image.version)")
	fl.StringVar(&spec.Revision, "revision", "", "git commit (label org.opencontainers.image.revision)")
	fl.StringVar(&spec.Source, "source", "https://github.com/nodesnap/nodesnap", "source repository URL (label)")
	fl.StringVar(&spec.CACerts, "ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of trusted CAs to put in the image")
	fl.StringVar(&spec.DockerArch, "docker-arch", runtime.GOARCH, "architecture of the image that manifest.json (docker load) names")
	out := fl.String("out", "", "path of the archive to write")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *out == "" || spec.Ref == "" || spec.Version == "" || len(spec.Binaries) == 0 || fl.NArg() > 0 {
		return usageError{"need --out, --ref, --version and at least one --binary ARCH=PATH"}
	}
	var err error
	if spec.Created, err = sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH")); err != nil {
		return err
	}
	if err := writeImageArchive(*out, spec); err != nil {
		return err
	}
	fmt.Fprintln(stdout, *out)
	return nil
}

// tarEntry is one file or directory of a layer.
type tarEntry struct {
	Name string // relative, no leading slash; directories end in "/"
	Mode int64
	Data []byte
}

// layerTar is a layer's uncompressed tar: entries sorted by name, owned by
// root (0:0, no user or group names), every time the same, so that the same
// inputs always give the same bytes.
func layerTar(entries []tarEntry, mtime time.Time) ([]byte, error) {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b tarEntry) int { return strings.Compare(a.Name, b.Name) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i, e := range entries {
		if i > 0 && entries[i-1].Name == e.Name {
			return nil, fmt.Errorf("layer lists %s twice", e.Name)
		}
		h := &tar.Header{
			Name:     e.Name,
			Mode:     e.Mode,
			ModTime:  mtime,
			Typeflag: tar.TypeReg,
			Size:     int64(len(e.Data)),
			Format:   tar.FormatPAX,
		}
		if strings.HasSuffix(e.Name, "/") {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("writing the layer's entry %s: %w", e.Name, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.Data); err != nil {
				return nil, fmt.Errorf("writing the layer's entry %s: %w", e.Name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("finishing a layer: %w", err)
	}
	return buf.Bytes(), nil
}

// baseEntries is the layer every architecture shares: the root filesystem
// a static binary needs and nothing else (no shell, no libc).
func baseEntries(caCerts []byte) []tarEntry {
	return []tarEntry{
		{Name: "etc/", Mode: 0o755},
		{Name: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\n")},
		{Name: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\n")},
		{Name: "etc/ssl/", Mode: 0o755},
		{Name: "etc/ssl/certs/", Mode: 0o755},
		{Name: "etc/ssl/certs/ca-certificates.crt", Mode: 0o644, Data: caCerts},
		{Name: "root/", Mode: 0o700},
		{Name: "tmp/", Mode: 0o1777},
		{Name: "var/", Mode: 0o755},
		{Name: "var/tmp/", Mode: 0o1777},
	}
}

func binaryEntries(bin []byte) []tarEntry {
	return []tarEntry{
		{Name: "usr/", Mode: 0o755},
		{Name: "usr/local/", Mode: 0o755},
		{Name: "usr/local/bin/", Mode: 0o755},
		{Name: strings.TrimPrefix(binPath, "/"), Mode: 0o755, Data: bin},
	}
}

func layerFromTar(b []byte) (v1.Layer, error) {
	l, err := tarball.LayerFromOpener(
		func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer),
		tarball.WithCompressionLevel(gzip.BestCompression),
		tarball.WithCompressedCaching,
	)
	if err != nil {
		return nil, fmt.Errorf("compressing a layer: %w", err)
	}
	return l, nil
}

// platform is the OCI platform of a GOARCH; arm64 carries its variant, as
// docker and buildx write it, so that every runtime matches it the same way.
func platform(arch string) v1.Platform {
	p := v1.Platform{OS: "linux", Architecture: arch}
	if arch == "arm64" {
		p.Variant = "v8"
	}
	return p
}

// buildIndex builds the multi-architecture image index and returns the
// image of each architecture with it.
func buildIndex(spec imageSpec) (v1.ImageIndex, map[string]v1.Image, error) {
	ca, err := os.ReadFile(spec.CACerts)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the CA certificates for the image (install Debian's ca-certificates, or give --ca-certificates): %w", err)
	}
	if !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, nil, fmt.Errorf("%s holds no PEM certificate", spec.CACerts)
	}
	baseTar, err := layerTar(baseEntries(ca), spec.Created)
	if err != nil {
		return nil, nil, err
	}
	base, err := layerFromTar(baseTar)
	if err != nil {
		return nil, nil, err
	}
	created := v1.Time{Time: spec.Created}
	labels := map[string]string{
		"org.opencontainers.image.version":  spec.Version,
		"org.opencontainers.image.revision": spec.Revision,
		"org.opencontainers.image.source":   spec.Source,
		"org.opencontainers.image.created":  spec.Created.Format(time.RFC3339),
		"org.opencontainers.image.title":    "nodesnap",
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	images := map[string]v1.Image{}
	arches := make([]string, 0, len(spec.Binaries))
	for a := range spec.Binaries {
		arches = append(arches, a)
	}
	slices.Sort(arches)
	for _, arch := range arches {
		bin, err := os.ReadFile(spec.Binaries[arch])
		if err != nil {
			return nil, nil, fmt.Errorf("reading the %s binary: %w", arch, err)
		}
		binTar, err := layerTar(binaryEntries(bin), spec.Created)
		if err != nil {
			return nil, nil, err
		}
		binLayer, err := layerFromTar(binTar)
		if err != nil {
			return nil, nil, err
		}
		p := platform(arch)
		img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		img, err = mutate.ConfigFile(img, &v1.ConfigFile{
			Architecture: p.Architecture,
			Variant:      p.Variant,
			OS:           p.OS,
			Created:      created,
			Config: v1.Config{
				Entrypoint: []string{binPath},
				Env:        []string{envPath},
				WorkingDir: "/",
				Labels:     labels,
			},
			RootFS: v1.RootFS{Type: "layers"},
		})
		if err != nil {
			return nil, nil, fmt.Errorf("the %s image's configuration: %w", arch, err)
		}
		img, err = mutate.Append(img,
			mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{
				Created: created, CreatedBy: "nodesnap release: /etc (CA certificates, passwd, group), /tmp, /var/tmp",
			}},
			mutate.Addendum{Layer: binLayer, MediaType: types.OCILayer, History: v1.History{
				Created: created, CreatedBy: "nodesnap release: " + binPath + " " + spec.Version,
			}},
		)
		if err != nil {
			return nil, nil, fmt.Errorf("the %s image's layers: %w", arch, err)
		}
		images[arch] = img
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return idx, images, nil
}

// imageNames checks an image reference, which must have a tag, and
// returns it in full, as containerd and docker name it
// (example/nodesnap:v1 is docker.io/example/nodesnap:v1), and its tag.
func imageNames(ref string) (full, tag string, err error) {
	if !strings.Contains(ref[strings.LastIndex(ref, "/")+1:], ":") {
		return "", "", usageError{fmt.Sprintf("image reference %q has no tag (want e.g. ghcr.io/nodesnap/nodesnap:v0.1.0)", ref)}
	}
	t, err := name.NewTag(ref)
	if err != nil {
		return "", "", usageError{fmt.Sprintf("image reference %q: %v (want e.g. ghcr.io/nodesnap/nodesnap:v0.1.0)", ref, err)}
	}
	// containerd's spelling: docker.io, not index.docker.io.
	registry := t.Context().RegistryStr()
	if registry == name.DefaultRegistry {
		registry = "docker.io"
	}
	return registry + "/" + t.Context().RepositoryStr() + ":" + t.TagStr(), t.TagStr(), nil
}

// dockerManifest is one entry of the manifest.json that docker save writes
// and docker load reads.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

func blobPath(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

// writeImageArchive writes one tar holding an OCI image layout of the
// multi-architecture index (for ctr import, podman load, skopeo) and a
// docker manifest.json naming the DockerArch image (for docker load),
// sharing the same blobs, as docker save has written them since Docker 25.
func writeImageArchive(out string, spec imageSpec) error {
	fullName, tagStr, err := imageNames(spec.Ref)
	if err != nil {
		return err
	}
	if _, ok := spec.Binaries[spec.DockerArch]; !ok {
		return usageError{fmt.Sprintf("no %s binary for manifest.json (docker load); give --binary %s=PATH or --docker-arch", spec.DockerArch, spec.DockerArch)}
	}
	idx, images, err := buildIndex(spec)
	if err != nil {
		return err
	}
	top := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: idx, Descriptor: v1.Descriptor{
		Annotations: map[string]string{
			"org.opencontainers.image.ref.name": tagStr,
			containerdNameAnnotation:            fullName,
		},
	}})

	stage, err := os.MkdirTemp(filepath.Dir(out), ".image-*")
	if err != nil {
		return fmt.Errorf("making a staging directory beside %s: %w", out, err)
	}
	defer os.RemoveAll(stage)
	if _, err := layout.Write(stage, top); err != nil {
		return fmt.Errorf("writing the OCI image layout: %w", err)
	}

	img := images[spec.DockerArch]
	cfgName, err := img.ConfigName()
	if err != nil {
		return fmt.Errorf("the %s image's config digest: %w", spec.DockerArch, err)
	}
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("the %s image's layers: %w", spec.DockerArch, err)
	}
	dm := dockerManifest{Config: blobPath(cfgName), RepoTags: []string{fullName}}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return fmt.Errorf("a layer's digest: %w", err)
		}
		dm.Layers = append(dm.Layers, blobPath(d))
	}
	mj, err := json.Marshal([]dockerManifest{dm})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(stage, "manifest.json"), mj, 0o644); err != nil {
		return fmt.Errorf("writing manifest.json: %w", err)
	}
	return tarDir(out, stage, spec.Created)
}

// tarDir writes the regular files and directories under dir into a tar at
// out, sorted, owned by root, every time the same, every mode 0644 or 0755;
// out appears only complete (written beside it, then renamed).
func tarDir(out, dir string, mtime time.Time) (err error) {
	var names []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			rel += "/"
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is neither a file nor a directory", rel)
		}
		names = append(names, rel)
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing the image layout: %w", err)
	}
	slices.Sort(names)

	f, err := os.CreateTemp(filepath.Dir(out), ".oci-*.tar")
	if err != nil {
		return fmt.Errorf("creating the image archive beside %s: %w", out, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	tw := tar.NewWriter(f)
	for _, n := range names {
		h := &tar.Header{Name: n, ModTime: mtime, Format: tar.FormatPAX}
		if strings.HasSuffix(n, "/") {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
			if err := tw.WriteHeader(h); err != nil {
				return fmt.Errorf("writing the image archive: %w", err)
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(n)))
		if err != nil {
			return fmt.Errorf("reading the layout's %s: %w", n, err)
		}
		h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, int64(len(b))
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("writing the image archive: %w", err)
		}
		if _, err := tw.Write(b); err != nil {
			return fmt.Errorf("writing the image archive: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("writing the image archive: %w", err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("writing the image archive: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing the image archive: %w", err)
	}
	if err := os.Rename(f.Name(), out); err != nil {
		return fmt.Errorf("putting the image archive in place: %w", err)
	}
	return nil
}
