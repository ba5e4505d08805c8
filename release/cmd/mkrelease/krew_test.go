package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestKrewVersion(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		wantErr  bool
	}{
		{"v1.2.3", "v1.2.3", false},
		{"v0.1", "v0.1.0", false},
		{"v2", "v2.0.0", false},
		{"v1.2.3-rc1", "v1.2.3-rc1", false},
		{"v1.2.3-4-gabcdef0-dirty", "v1.2.3+4.gabcdef0.dirty", false},
		{"166842e", "v0.0.0-git.166842e", false},
		{"dev", "v0.0.0-dev", false},
		{"v1.2.3.4", "", true},
		{"release-2024", "", true},
	} {
		got, err := krewVersion(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("krewVersion(%q) = %q, %v; want %q (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestKrewBaseURL(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		wantErr  bool
	}{
		{"", "https://github.com/nodesnap/nodesnap/releases/download/v1.2.3", false},
		{"https://example.com/dl/", "https://example.com/dl", false},
		{"http://mirror.local/nodesnap/v1.2.3", "http://mirror.local/nodesnap/v1.2.3", false},
		{"ftp://example.com/dl", "", true},
		{"example.com/dl", "", true},
		{"https://example.com/dl?x=1", "", true},
	} {
		got, err := krewBaseURL(tc.in, "v1.2.3")
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("krewBaseURL(%q) = %q, %v; want %q (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// krewManifestDoc is the part of a krew Plugin manifest the tests check.
type krewManifestDoc struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		Version   string `yaml:"version"`
		Platforms []struct {
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			URI    string `yaml:"uri"`
			SHA256 string `yaml:"sha256"`
			Bin    string `yaml:"bin"`
		} `yaml:"platforms"`
	} `yaml:"spec"`
}

// readTarGz returns the entries of a tar.gz by name.
func readTarGz(t *testing.T, b []byte) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	if !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("gzip header carries time %v, name %q", zr.ModTime, zr.Name)
	}
	tr := tar.NewReader(zr)
	hdrs, data := map[string]*tar.Header{}, map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading the archive: %v", err)
		}
		d, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		hdrs[h.Name], data[h.Name] = h, d
	}
	return hdrs, data
}

func TestKrewReleaseFiles(t *testing.T) {
	_, bins := fakeInputs(t, "amd64", "arm64")
	root := repoRoot(t)
	spec := pkgSpec{Version: "v1.2.3-4-gabcdef0", Root: root, Binaries: bins, MTime: testEpoch}
	build := func(base string) (string, []string) {
		dir := t.TempDir()
		paths, err := writeKrew(dir, spec, base)
		if err != nil {
			t.Fatal(err)
		}
		return dir, paths
	}
	a, paths := build("")
	b, _ := build("")
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	want := "nodesnap-v1.2.3-4-gabcdef0-linux-amd64.tar.gz nodesnap-v1.2.3-4-gabcdef0-linux-arm64.tar.gz nodesnap.yaml"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("written %s, want %s", got, want)
	}
	files := map[string][]byte{}
	for _, n := range names {
		fa, err := os.ReadFile(filepath.Join(a, n))
		if err != nil {
			t.Fatal(err)
		}
		fb, err := os.ReadFile(filepath.Join(b, n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fa, fb) {
			t.Errorf("%s differs between two builds of the same inputs", n)
		}
		files[n] = fa
	}
	if left, _ := filepath.Glob(filepath.Join(a, ".mkrelease-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}

	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		name := krewArchiveName(spec.Version, arch)
		hdrs, data := readTarGz(t, files[name])
		h := hdrs[krewBinName]
		if h == nil {
			t.Fatalf("%s has no %s: %v", name, krewBinName, hdrs)
		}
		bin, _ := os.ReadFile(bins[arch])
		if !bytes.Equal(data[krewBinName], bin) {
			t.Errorf("%s: %s is not the %s binary", name, krewBinName, arch)
		}
		if h.Typeflag != tar.TypeReg || h.Mode != 0o755 || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || !h.ModTime.Equal(testEpoch) {
			t.Errorf("%s: %s type %c mode %o owner %d:%d %q time %v; want a 0755 file of 0:0 at %v",
				name, krewBinName, h.Typeflag, h.Mode, h.Uid, h.Gid, h.Uname, h.ModTime, testEpoch)
		}
		if !bytes.Equal(data["README.md"], readme) || hdrs["README.md"].Mode != 0o644 {
			t.Errorf("%s: README.md missing, different or not 0644", name)
		}
		for n := range hdrs {
			switch n {
			case krewBinName, "README.md", "LICENSE", "LICENSE.md", "COPYING":
			default:
				t.Errorf("%s holds %s, which the plugin does not need", name, n)
			}
		}
	}

	var m krewManifestDoc
	if err := yaml.Unmarshal(files[krewManifestName], &m); err != nil {
		t.Fatalf("the manifest is not YAML: %v\n%s", err, files[krewManifestName])
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "nodesnap" {
		t.Errorf("manifest header %s %s %s", m.APIVersion, m.Kind, m.Metadata.Name)
	}
	if m.Spec.Version != "v1.2.3+4.gabcdef0" {
		t.Errorf("manifest version %q, want v1.2.3+4.gabcdef0", m.Spec.Version)
	}
	if len(m.Spec.Platforms) != 2 {
		t.Fatalf("manifest has %d platforms, want 2:\n%s", len(m.Spec.Platforms), files[krewManifestName])
	}
	for i, arch := range []string{"amd64", "arm64"} {
		p := m.Spec.Platforms[i]
		name := krewArchiveName(spec.Version, arch)
		sum := sha256.Sum256(files[name])
		if p.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: manifest sha256 %s, archive's %x", arch, p.SHA256, sum)
		}
		if want := "https://github.com/nodesnap/nodesnap/releases/download/v1.2.3-4-gabcdef0/" + name; p.URI != want {
			t.Errorf("%s: uri %s, want %s", arch, p.URI, want)
		}
		if p.Bin != krewBinName || p.Selector.MatchLabels["os"] != "linux" || p.Selector.MatchLabels["arch"] != arch {
			t.Errorf("%s: bin %q, selector %v", arch, p.Bin, p.Selector.MatchLabels)
		}
	}
	if bytes.Contains(files[krewManifestName], []byte("{{")) || bytes.Contains(files[krewManifestName], []byte("Go text/template")) {
		t.Errorf("the manifest still holds template text:\n%s", files[krewManifestName])
	}

	// Another base URL changes the URIs and nothing else.
	c, _ := build("https://mirror.example/nodesnap/")
	mc, _ := os.ReadFile(filepath.Join(c, krewManifestName))
	if got, want := string(mc), strings.ReplaceAll(string(files[krewManifestName]), "https://github.com/nodesnap/nodesnap/releases/download/v1.2.3-4-gabcdef0/", "https://mirror.example/nodesnap/"); got != want {
		t.Errorf("--krew-base-url: manifest\n%s\nwant\n%s", got, want)
	}
}

// TestPackagesCommandWritesKrew runs the command as make release does: the
// krew files land beside the packages, and sums covers them.
func TestPackagesCommandWritesKrew(t *testing.T) {
	_, bins := fakeInputs(t, "amd64")
	dir := t.TempDir()
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	var out, errb bytes.Buffer
	if rc := run([]string{"packages", "--out-dir", dir, "--version", "v1.2.3", "--root", repoRoot(t), "--binary", "amd64=" + bins["amd64"]}, &out, &errb); rc != 0 {
		t.Fatalf("mkrelease packages: %d\n%s", rc, errb.String())
	}
	if rc := run([]string{"sums", dir}, &out, &errb); rc != 0 {
		t.Fatalf("mkrelease sums: %d\n%s", rc, errb.String())
	}
	s, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"  nodesnap-v1.2.3-linux-amd64.tar.gz\n", "  nodesnap.yaml\n", "  nodesnap_1.2.3-1_amd64.deb\n"} {
		if !strings.Contains(string(s), n) {
			t.Errorf("SHA256SUMS lacks%q:\n%s", strings.TrimSuffix(n, "\n"), s)
		}
	}
	if rc := run([]string{"packages", "--out-dir", dir, "--version", "v1.2.3", "--root", repoRoot(t), "--krew-base-url", "file:///x", "--binary", "amd64=" + bins["amd64"]}, &out, &errb); rc != 2 {
		t.Errorf("a file:// --krew-base-url: exit %d, want 2 (usage)", rc)
	}
}
