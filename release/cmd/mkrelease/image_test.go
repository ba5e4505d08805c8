package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

var testEpoch = time.Unix(1_700_000_000, 0).UTC()

const testPEM = "-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n"

// fakeInputs writes a CA bundle and one small "binary" per architecture.
func fakeInputs(t *testing.T, arches ...string) (ca string, bins map[string]string) {
	t.Helper()
	dir := t.TempDir()
	ca = filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte(testPEM), 0o644); err != nil {
		t.Fatal(err)
	}
	bins = map[string]string{}
	for _, a := range arches {
		p := filepath.Join(dir, "nodesnap-"+a)
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho nodesnap for "+a+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		bins[a] = p
	}
	return ca, bins
}

func testSpec(t *testing.T) imageSpec {
	ca, bins := fakeInputs(t, "amd64", "arm64")
	return imageSpec{
		Ref: "ghcr.io/nodesnap/nodesnap:v1.2.3", Version: "v1.2.3", Revision: "0123abcd",
		Source: "https://github.com/nodesnap/nodesnap", Created: testEpoch,
		Binaries: bins, CACerts: ca, DockerArch: "arm64",
	}
}

// tarHeaders reads every header (and regular file's content) of a tar.
func tarHeaders(t *testing.T, r io.Reader) ([]*tar.Header, map[string][]byte) {
	t.Helper()
	var hs []*tar.Header
	data := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hs, data
		}
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			data[h.Name] = b
		}
	}
}

func TestLayerTar(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []tarEntry
		want    []string // names in order
		wantErr bool
	}{
		{"sorted whatever the order given", []tarEntry{{Name: "var/tmp/", Mode: 0o1777}, {Name: "etc/", Mode: 0o755}, {Name: "etc/passwd", Mode: 0o644, Data: []byte("x")}, {Name: "var/", Mode: 0o755}},
			[]string{"etc/", "etc/passwd", "var/", "var/tmp/"}, false},
		{"empty", nil, nil, false},
		{"a name twice", []tarEntry{{Name: "etc/", Mode: 0o755}, {Name: "etc/", Mode: 0o700}}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := layerTar(tc.entries, testEpoch)
			if tc.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			hs, data := tarHeaders(t, bytes.NewReader(b))
			var names []string
			for _, h := range hs {
				names = append(names, h.Name)
				if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(testEpoch) {
					t.Errorf("%s: owner %d:%d (%q:%q), mtime %v", h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime)
				}
				for _, e := range tc.entries {
					if e.Name == h.Name && h.Mode != e.Mode {
						t.Errorf("%s: mode %o, want %o", h.Name, h.Mode, e.Mode)
					}
				}
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("entries %q, want %q", names, tc.want)
			}
			if tc.want != nil && string(data["etc/passwd"]) != "x" {
				t.Errorf("etc/passwd holds %q", data["etc/passwd"])
			}
		})
	}
}

func buildArchive(t *testing.T, spec imageSpec) (string, []byte) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "img.oci.tar")
	if err := writeImageArchive(out, spec); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return out, b
}

// The same inputs give the same bytes; another time gives other bytes.
func TestImageArchiveReproducible(t *testing.T) {
	spec := testSpec(t)
	_, a := buildArchive(t, spec)
	_, b := buildArchive(t, spec)
	if !bytes.Equal(a, b) {
		t.Fatal("two builds from the same inputs differ")
	}
	spec.Created = spec.Created.Add(time.Second)
	_, c := buildArchive(t, spec)
	if bytes.Equal(a, c) {
		t.Fatal("the build time does not reach the archive: is SOURCE_DATE_EPOCH used?")
	}
}

func TestImageArchiveContents(t *testing.T) {
	spec := testSpec(t)
	archive, raw := buildArchive(t, spec)

	// The archive itself: sorted, root-owned, stamped with the epoch.
	hs, files := tarHeaders(t, bytes.NewReader(raw))
	var names []string
	for _, h := range hs {
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(testEpoch) {
			t.Errorf("archive entry %s: owner %d:%d, mtime %v", h.Name, h.Uid, h.Gid, h.ModTime)
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("archive entries not sorted: %q", names)
	}
	for _, want := range []string{"oci-layout", "index.json", "manifest.json", "blobs/sha256/"} {
		if !slices.Contains(names, want) {
			t.Errorf("archive lacks %s: %q", want, names)
		}
	}

	// The OCI side, read back with the layout package.
	dir := t.TempDir()
	for n, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(n))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 {
		t.Fatalf("index.json lists %d manifests, want the one multi-arch index", len(tm.Manifests))
	}
	if a := tm.Manifests[0].Annotations; a["org.opencontainers.image.ref.name"] != "v1.2.3" || a[containerdNameAnnotation] != spec.Ref {
		t.Errorf("index.json annotations %v", a)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range im.Manifests {
		platforms = append(platforms, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, img, spec, d.Platform.Architecture)
	}
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64/v8"}) {
		t.Errorf("platforms %q", platforms)
	}

	// The docker side: manifest.json, as docker load reads it.
	dimg, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	checkImage(t, dimg, spec, spec.DockerArch)
	var dm []dockerManifest
	if err := json.Unmarshal(files["manifest.json"], &dm); err != nil || len(dm) != 1 || !slices.Equal(dm[0].RepoTags, []string{spec.Ref}) {
		t.Errorf("manifest.json %s: %v", files["manifest.json"], err)
	}
}

// checkImage checks an image's configuration and its files.
func checkImage(t *testing.T, img v1.Image, spec imageSpec, arch string) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Architecture != arch || cf.OS != "linux" || !cf.Created.Time.Equal(testEpoch) {
		t.Errorf("%s config: %s/%s created %v", arch, cf.OS, cf.Architecture, cf.Created)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{binPath}) || !slices.Contains(cf.Config.Env, envPath) {
		t.Errorf("%s config: entrypoint %q, env %q", arch, cf.Config.Entrypoint, cf.Config.Env)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.version": spec.Version, "org.opencontainers.image.revision": spec.Revision,
		"org.opencontainers.image.source": spec.Source, "org.opencontainers.image.created": "2023-11-14T22:13:20Z",
	} {
		if cf.Config.Labels[k] != want {
			t.Errorf("%s label %s=%q, want %q", arch, k, cf.Config.Labels[k], want)
		}
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 2 || len(cf.RootFS.DiffIDs) != 2 {
		t.Fatalf("%s: %d layers, %d diff ids", arch, len(layers), len(cf.RootFS.DiffIDs))
	}
	modes := map[string]int64{}
	content := map[string][]byte{}
	for i, l := range layers {
		d, err := l.DiffID()
		if err != nil || d != cf.RootFS.DiffIDs[i] {
			t.Errorf("%s layer %d: diff id %v (%v), config says %v", arch, i, d, err, cf.RootFS.DiffIDs[i])
		}
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		hs, data := tarHeaders(t, rc)
		rc.Close()
		for _, h := range hs {
			if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(testEpoch) {
				t.Errorf("%s %s: owner %d:%d, mtime %v", arch, h.Name, h.Uid, h.Gid, h.ModTime)
			}
			modes[h.Name] = h.Mode
		}
		for n, b := range data {
			content[n] = b
		}
	}
	bin, _ := os.ReadFile(spec.Binaries[arch])
	if !bytes.Equal(content["usr/local/bin/nodesnap"], bin) || modes["usr/local/bin/nodesnap"] != 0o755 {
		t.Errorf("%s: /usr/local/bin/nodesnap is not the %s binary with mode 0755 (mode %o)", arch, arch, modes["usr/local/bin/nodesnap"])
	}
	if string(content["etc/ssl/certs/ca-certificates.crt"]) != testPEM {
		t.Errorf("%s: the CA bundle is not the one given", arch)
	}
	for _, d := range []string{"tmp/", "var/tmp/"} {
		if modes[d] != 0o1777 {
			t.Errorf("%s: /%s mode %o, want 1777", arch, d, modes[d])
		}
	}
	if !strings.HasPrefix(string(content["etc/passwd"]), "root:x:0:0:") {
		t.Errorf("%s: /etc/passwd %q", arch, content["etc/passwd"])
	}
}

func TestImageArchiveErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*imageSpec)
		want   string
	}{
		{"reference in capitals", func(s *imageSpec) { s.Ref = "GHCR.io/Nodesnap:v1" }, "image reference"},
		{"no binary for docker load", func(s *imageSpec) { s.DockerArch = "riscv64" }, "no riscv64 binary"},
		{"no CA bundle", func(s *imageSpec) { s.CACerts = filepath.Join(t.TempDir(), "none.crt") }, "CA certificates"},
		{"CA bundle without a certificate", func(s *imageSpec) {
			p := filepath.Join(t.TempDir(), "empty.crt")
			os.WriteFile(p, []byte("not pem"), 0o644)
			s.CACerts = p
		}, "no PEM certificate"},
		{"missing binary", func(s *imageSpec) { s.Binaries["arm64"] = filepath.Join(t.TempDir(), "gone") }, "reading the arm64 binary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSpec(t)
			tc.change(&spec)
			dir := t.TempDir()
			err := writeImageArchive(filepath.Join(dir, "img.oci.tar"), spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("a failed build left %v behind", ents)
			}
		})
	}
}

func TestImageNames(t *testing.T) {
	for _, tc := range []struct {
		ref, full, tag string
		ok             bool
	}{
		{"ghcr.io/nodesnap/nodesnap:v1.2.3", "ghcr.io/nodesnap/nodesnap:v1.2.3", "v1.2.3", true},
		{"example/nodesnap:test", "docker.io/example/nodesnap:test", "test", true},
		{"nodesnap:dev", "docker.io/library/nodesnap:dev", "dev", true},
		{"localhost:5000/nodesnap:1", "localhost:5000/nodesnap:1", "1", true},
		{"localhost:5000/nodesnap", "", "", false},
		{"ghcr.io/nodesnap/nodesnap", "", "", false},
		{"ghcr.io/nodesnap/nodesnap@sha256:0123", "", "", false},
		{"GHCR.io/Nodesnap:v1", "", "", false},
		{"", "", "", false},
	} {
		full, tag, err := imageNames(tc.ref)
		if (err == nil) != tc.ok || full != tc.full || tag != tc.tag {
			t.Errorf("imageNames(%q) = %q, %q, %v", tc.ref, full, tag, err)
		}
	}
}

func TestRunUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{
		{nil, 2},
		{[]string{"bogus"}, 2},
		{[]string{"image"}, 2},
		{[]string{"packages", "--version", "v1"}, 2},
		{[]string{"sums"}, 2},
		{[]string{"help"}, 0},
	} {
		var out, errb bytes.Buffer
		if got := run(tc.args, &out, &errb); got != tc.code {
			t.Errorf("mkrelease %q: exit %d, want %d (%s)", tc.args, got, tc.code, errb.String())
		}
	}
}

func TestSourceDateEpoch(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"1700000000", testEpoch, true},
		{"0", time.Unix(0, 0).UTC(), true},
		{"", time.Time{}, false},
		{"-5", time.Time{}, false},
		{"2023-11-14", time.Time{}, false},
	} {
		got, err := sourceDateEpoch(tc.in)
		if (err == nil) != tc.ok || !got.Equal(tc.want) {
			t.Errorf("sourceDateEpoch(%q) = %v, %v", tc.in, got, err)
		}
	}
}
