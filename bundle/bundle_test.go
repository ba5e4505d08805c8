package bundle_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
)

// writeBundle stages files and writes a bundle with a manifest listing them.
func writeBundle(t *testing.T, files map[string]string, format string) (string, *bundle.Manifest) {
	t.Helper()
	staging := t.TempDir()
	m := minimalManifest()
	m.Settings.Compression = format
	col := &m.Collectors[0]
	for _, name := range sortedKeys(files) {
		p := filepath.Join(staging, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(files[name]), 0o600); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(files[name]))
		m.Files = append(m.Files, bundle.FileEntry{Path: name, Collector: "host", Size: int64(len(files[name])), SHA256: hex.EncodeToString(sum[:]), Kind: bundle.KindText})
		col.Files = append(col.Files, name)
	}
	out := filepath.Join(t.TempDir(), "b."+format)
	w, err := bundle.Write(context.Background(), out, format, m, staging, time.Unix(1763700000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if w.Path != out || w.Size <= 0 || len(w.SHA256) != 64 {
		t.Fatalf("Write returned %+v", w)
	}
	st, err := os.Stat(out)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("bundle mode: %v %v", st, err)
	}
	return out, m
}

func minimalManifest() *bundle.Manifest {
	now := time.Unix(1763700000, 0).UTC()
	return &bundle.Manifest{
		SchemaVersion: bundle.SchemaVersion,
		Tool:          bundle.Tool{Name: "nodesnap", Version: "test", GoVersion: "go"},
		CommandLine:   []string{"nodesnap", "collect"},
		Host:          bundle.Host{Hostname: "n1"},
		StartedAt:     now, FinishedAt: now,
		Status:     "complete",
		Settings:   bundle.Settings{Root: "/", TimeoutSeconds: 120, MaxFileBytes: 1, MaxBundleBytes: 1, Concurrency: 1, Compression: bundle.Gzip},
		Collectors: []bundle.CollectorResult{{Name: "host", Status: bundle.StatusOK, Files: []string{}}},
		Files:      []bundle.FileEntry{},
		Redaction:  bundle.RedactionSummary{Rules: map[string]int{}},
		HungMounts: []bundle.HungItem{},
		Omitted:    []bundle.Omitted{},
	}
}

func sortedKeys(m map[string]string) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	for i := range k {
		for j := i + 1; j < len(k); j++ {
			if k[j] < k[i] {
				k[i], k[j] = k[j], k[i]
			}
		}
	}
	return k
}

func TestWriteValidateRoundTrip(t *testing.T) {
	for _, format := range []string{bundle.Gzip, bundle.Zstd} {
		t.Run(format, func(t *testing.T) {
			p, _ := writeBundle(t, map[string]string{"host/a.txt": "alpha\n", "host/sub/b.txt": "beta\n", "host/empty": ""}, format)
			rep, err := bundle.Validate(context.Background(), p)
			if err != nil {
				t.Fatalf("Validate: %v %v", err, rep.Problems)
			}
			if rep.Checked != 3 {
				t.Errorf("checked %d files, want 3", rep.Checked)
			}
			c, err := bundle.ReadAll(context.Background(), p, 0)
			if err != nil || string(c.Files["host/sub/b.txt"]) != "beta\n" {
				t.Fatalf("ReadAll: %v %q", err, c.Files)
			}
		})
	}
}

// rawArchive builds a tar.gz by hand, for hostile bundles.
type rawEntry struct {
	hdr  tar.Header
	body string
}

func rawArchive(t *testing.T, entries []rawEntry, cut int) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := e.hdr
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(e.body))
		}
		h.Mode = 0o600
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	gz.Close()
	b := buf.Bytes()
	if cut > 0 && cut < len(b) {
		b = b[:cut]
	}
	p := filepath.Join(t.TempDir(), "hostile.tar.gz")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidateRefusesHostileArchives(t *testing.T) {
	manifest := rawEntry{hdr: tar.Header{Name: "manifest.json"}, body: `{"schema_version":1}`}
	cases := []struct {
		name    string
		entries []rawEntry
		want    string
	}{
		{"traversal", []rawEntry{manifest, {hdr: tar.Header{Name: "../../etc/evil"}, body: "x"}}, "leaves the bundle"},
		{"traversal inside", []rawEntry{manifest, {hdr: tar.Header{Name: "host/../../evil"}, body: "x"}}, "leaves the bundle"},
		{"absolute", []rawEntry{manifest, {hdr: tar.Header{Name: "/etc/evil"}, body: "x"}}, "absolute"},
		{"symlink", []rawEntry{manifest, {hdr: tar.Header{Name: "host/link", Typeflag: tar.TypeSymlink, Linkname: "/etc/shadow"}}}, "symbolic link"},
		{"hardlink", []rawEntry{manifest, {hdr: tar.Header{Name: "host/link", Typeflag: tar.TypeLink, Linkname: "manifest.json"}}}, "hard link"},
		{"device", []rawEntry{manifest, {hdr: tar.Header{Name: "host/dev", Typeflag: tar.TypeChar}}}, "device"},
		{"duplicate", []rawEntry{manifest, {hdr: tar.Header{Name: "a"}, body: "1"}, {hdr: tar.Header{Name: "a"}, body: "2"}}, "twice"},
		{"noncanonical", []rawEntry{manifest, {hdr: tar.Header{Name: "host//a"}, body: "1"}}, "canonical"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := listTmp(t)
			p := rawArchive(t, tc.entries, 0)
			err := bundle.Walk(context.Background(), p, bundle.DefaultLimits, func(bundle.Entry) error { return nil })
			if !errors.Is(err, bundle.ErrUnsafe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Walk: %v, want ErrUnsafe mentioning %q", err, tc.want)
			}
			if _, err := bundle.Validate(context.Background(), p); err == nil {
				t.Fatalf("Validate accepted a hostile archive")
			}
			if _, err := os.Lstat("/etc/evil"); err == nil {
				t.Fatalf("a file was written outside")
			}
			if after := listTmp(t); after != before {
				t.Errorf("reading wrote to the temp dir: %s -> %s", before, after)
			}
		})
	}
}

func listTmp(t *testing.T) string {
	ents, _ := os.ReadDir(os.TempDir())
	var n []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "nodesnap") || strings.HasPrefix(e.Name(), ".nodesnap") {
			n = append(n, e.Name())
		}
	}
	return strings.Join(n, ",")
}

func TestWalkRefusesOversizedAndBombs(t *testing.T) {
	// An entry that claims 10 GiB is refused from its header alone.
	p := rawArchive(t, []rawEntry{{hdr: tar.Header{Name: "manifest.json", Size: 10 << 30}}}, 300)
	err := bundle.Walk(context.Background(), p, bundle.DefaultLimits, func(bundle.Entry) error { return nil })
	if !errors.Is(err, bundle.ErrUnsafe) || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("10 GiB claim: %v", err)
	}
	// A highly compressible entry past the total limit is stopped.
	big := strings.Repeat("0", 4<<20)
	p = rawArchive(t, []rawEntry{{hdr: tar.Header{Name: "a"}, body: big}, {hdr: tar.Header{Name: "b"}, body: big}}, 0)
	lim := bundle.Limits{MaxEntryBytes: 8 << 20, MaxTotalBytes: 6 << 20, MaxEntries: 10}
	err = bundle.Walk(context.Background(), p, lim, func(bundle.Entry) error { return nil })
	if !errors.Is(err, bundle.ErrUnsafe) || !strings.Contains(err.Error(), "decompresses to more") {
		t.Fatalf("bomb: %v", err)
	}
}

func TestValidateDetectsTampering(t *testing.T) {
	p, _ := writeBundle(t, map[string]string{"host/a.txt": strings.Repeat("alpha\n", 100)}, bundle.Gzip)
	// Rewrite the archive with one byte of a.txt changed.
	c, err := bundle.ReadAll(context.Background(), p, 0)
	if err != nil {
		t.Fatal(err)
	}
	raw, _, err := bundle.ReadManifest(context.Background(), p)
	if err != nil || raw == nil {
		t.Fatal(err)
	}
	_, mraw, _ := bundle.ReadManifest(context.Background(), p)
	body := []byte(c.Files["host/a.txt"])
	body[10] ^= 1
	tampered := rawArchive(t, []rawEntry{{hdr: tar.Header{Name: "manifest.json"}, body: string(mraw)}, {hdr: tar.Header{Name: "host/a.txt"}, body: string(body)}}, 0)
	rep, err := bundle.Validate(context.Background(), tampered)
	if !errors.Is(err, bundle.ErrInvalid) || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], "sha256") {
		t.Fatalf("tampered: %v %v", err, rep)
	}
	// An extra file, and a missing one.
	extra := rawArchive(t, []rawEntry{{hdr: tar.Header{Name: "manifest.json"}, body: string(mraw)}, {hdr: tar.Header{Name: "host/other"}, body: "x"}}, 0)
	rep, err = bundle.Validate(context.Background(), extra)
	if !errors.Is(err, bundle.ErrInvalid) || len(rep.Problems) != 2 {
		t.Fatalf("extra+missing: %v %v", err, rep.Problems)
	}
	// Truncated archive.
	whole, _ := os.ReadFile(p)
	cut := filepath.Join(t.TempDir(), "cut.tar.gz")
	os.WriteFile(cut, whole[:len(whole)/2], 0o600)
	_, err = bundle.Validate(context.Background(), cut)
	if !errors.Is(err, bundle.ErrUnsafe) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("truncated: %v", err)
	}
}

func TestValidateSchemaAndVersion(t *testing.T) {
	for name, body := range map[string]string{
		"broken json":     `{"schema_version":1,`,
		"unknown version": `{"schema_version":99}`,
		"schema mismatch": `{"schema_version":1,"tool":{}}`,
		"not first":       "",
	} {
		t.Run(name, func(t *testing.T) {
			var entries []rawEntry
			if name == "not first" {
				entries = []rawEntry{{hdr: tar.Header{Name: "host/a"}, body: "x"}}
			} else {
				entries = []rawEntry{{hdr: tar.Header{Name: "manifest.json"}, body: body}}
			}
			_, err := bundle.Validate(context.Background(), rawArchive(t, entries, 0))
			if err == nil {
				t.Fatal("accepted")
			}
			t.Logf("%s: %v", name, err)
		})
	}
	if _, err := bundle.ParseManifest([]byte(`{"schema_version":99}`)); err == nil || !strings.Contains(err.Error(), "version 99 is not supported") {
		t.Errorf("unknown version: %v", err)
	}
}

func FuzzWalkReader(f *testing.F) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: "manifest.json", Size: 2, Mode: 0o600, Typeflag: tar.TypeReg})
	tw.Write([]byte("{}"))
	tw.Close()
	gz.Close()
	f.Add(buf.Bytes())
	f.Add([]byte{0x1f, 0x8b})
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := bundle.Limits{MaxEntryBytes: 1 << 20, MaxTotalBytes: 4 << 20, MaxEntries: 100}
		var total int64
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				panic(fmt.Sprintf("WalkReader did not return within 5s on %d bytes of input", len(data)))
			}
		}()
		_ = bundle.WalkReader(context.Background(), bytes.NewReader(data), lim, func(e bundle.Entry) error {
			if strings.HasPrefix(e.Name, "/") || strings.Contains(e.Name, "..") {
				t.Fatalf("unsafe name passed: %q", e.Name)
			}
			n, _ := bytes.NewBuffer(nil).ReadFrom(e.Reader)
			total += n
			if total > lim.MaxTotalBytes {
				t.Fatalf("read %d bytes past the limit", total)
			}
			return nil
		})
	})
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"schema_version":1}`))
	f.Add([]byte(`{"schema_version":1,"files":[{"path":"a","size":-1}]}`))
	// A sealed manifest: its own checksum is located and checked.
	if sealed, err := bundle.MarshalManifest(minimalManifest()); err == nil {
		f.Add(sealed)
	}
	f.Add([]byte(`{"schema_version":2,"manifest_sha256" : "` + strings.Repeat("0", 64) + `"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := bundle.ParseManifest(data)
		if err == nil && m.SchemaVersion >= 2 && len(m.ManifestSHA256) != 64 {
			t.Errorf("a version %d manifest without its checksum was accepted", m.SchemaVersion)
		}
	})
}
