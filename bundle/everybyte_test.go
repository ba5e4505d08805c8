package bundle_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/nodesnap/nodesnap/bundle"
)

// sameArchive says whether b, a changed copy of the gzip bundle orig,
// decompresses (CRC and length checked) to exactly what orig does: the
// change is in the gzip header's MTIME, XFL or OS byte (RFC 1952, 2.3:
// nothing hashes them without FHCRC, which no writer in use sets) or, rarely,
// in a deflate code for the same bytes. The archive is then unchanged and
// validate is right to find nothing wrong; the .sha256 beside a bundle
// covers the file, and with it such a change is refused too.
func sameArchive(b, orig []byte) bool {
	un := func(x []byte) ([]byte, error) {
		zr, err := gzip.NewReader(bytes.NewReader(x))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(zr)
	}
	got, err1 := un(b)
	want, err2 := un(orig)
	return err1 == nil && err2 == nil && bytes.Equal(got, want)
}

// A bundle proves every byte: each byte of a small bundle, changed alone,
// makes Validate refuse the bundle unless the archive it holds is unchanged
// (sameArchive), and with the bundle's .sha256 beside it every byte without
// exception. The changed byte is each bit inverted, so the byte differs
// in every bit a decoder might ignore.
func TestValidateRefusesEveryChangedByte(t *testing.T) {
	for _, format := range []string{bundle.Gzip, bundle.Zstd} {
		t.Run(format, func(t *testing.T) {
			p, _ := writeBundle(t, map[string]string{"host/a.txt": "alpha\n", "host/empty": ""}, format)
			orig, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := bundle.Validate(context.Background(), p); err != nil {
				t.Fatalf("the untouched bundle: %v", err)
			}
			sum := sha256.Sum256(orig)
			dir := t.TempDir()
			bad, withSum := filepath.Join(dir, "bad.tar"), filepath.Join(dir, "summed.tar")
			if err := os.WriteFile(withSum+bundle.SumSuffix, []byte(hex.EncodeToString(sum[:])+"  summed.tar\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			passed := 0
			for i := range orig {
				b := bytes.Clone(orig)
				b[i] ^= 0xff
				for _, q := range []string{bad, withSum} {
					if err := os.WriteFile(q, b, 0o600); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := bundle.Validate(context.Background(), withSum); err == nil {
					t.Errorf("byte %d of %d changed, with the .sha256 beside: valid", i, len(orig))
				}
				_, err := bundle.Validate(context.Background(), bad)
				switch {
				case err == nil && format == bundle.Gzip && sameArchive(b, orig):
					passed++
				case err == nil:
					t.Errorf("byte %d of %d changed: valid", i, len(orig))
				}
			}
			t.Logf("%s: %d bytes, each changed alone refused but %d that pass without the .sha256, their archive unchanged", format, len(orig), passed)
		})
	}
}

// The stream is read to its end: a changed CRC or length in the gzip
// trailer, or junk inside the stream after the archive's end, is refused
// by every reader, not only validate.
func TestEveryReaderChecksTheTrailer(t *testing.T) {
	p, _ := writeBundle(t, map[string]string{"host/a.txt": "alpha\n"}, bundle.Gzip)
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"CRC":    flip(orig, len(orig)-8),
		"length": flip(orig, len(orig)-1),
		"junk after the archive's end": func() []byte {
			// The same archive with bytes appended inside the compressed
			// stream: a CRC that matches, data no manifest accounts for.
			var raw bytes.Buffer
			zr, err := gzip.NewReader(bytes.NewReader(orig))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := raw.ReadFrom(zr); err != nil {
				t.Fatal(err)
			}
			raw.WriteString("not padding")
			var out bytes.Buffer
			zw := gzip.NewWriter(&out)
			zw.Write(raw.Bytes())
			zw.Close()
			return out.Bytes()
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			q := filepath.Join(t.TempDir(), "b.tar.gz")
			if err := os.WriteFile(q, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := bundle.ReadAll(context.Background(), q, 0); err == nil {
				t.Errorf("ReadAll read the damaged bundle")
			}
			err := bundle.Walk(context.Background(), q, bundle.DefaultLimits, func(bundle.Entry) error { return nil })
			if err == nil {
				t.Errorf("Walk walked the damaged bundle")
			}
			t.Logf("%v", err)
		})
	}
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0xff
	return c
}

// A manifest of schema version 1 (no manifest_sha256) still reads, and
// one of version 2 (sealed, before mounts.json's format 2); one of version
// 2 or 3 without it, or whose bytes changed after it was sealed, is
// refused by the decode every reader does, and so is a version newer
// than this code's.
func TestManifestChecksumVersions(t *testing.T) {
	sealed, err := bundle.MarshalManifest(minimalManifest())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bundle.ParseManifest(sealed); err != nil {
		t.Fatalf("a sealed manifest: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(sealed, &m); err != nil {
		t.Fatal(err)
	}
	if m["schema_version"] != float64(bundle.SchemaVersion) || bundle.SchemaVersion != 3 || len(m["manifest_sha256"].(string)) != 64 {
		t.Fatalf("written as %v, %v", m["schema_version"], m["manifest_sha256"])
	}
	sealed2 := bytes.Replace(sealed, []byte(`"schema_version": 3`), []byte(`"schema_version": 2`), 1)
	if err := bundle.SealManifest(sealed2); err != nil {
		t.Fatal(err)
	}
	if _, err := bundle.ParseManifest(sealed2); err != nil || bytes.Equal(sealed2, sealed) {
		t.Errorf("a sealed version 2 manifest: %v", err)
	}
	newer := bytes.Replace(sealed, []byte(`"schema_version": 3`), []byte(`"schema_version": 4`), 1)
	if err := bundle.SealManifest(newer); err != nil {
		t.Fatal(err)
	}
	if _, err := bundle.ParseManifest(newer); err == nil || !strings.Contains(err.Error(), "version 4 is not supported") {
		t.Errorf("a version 4 manifest: %v", err)
	}
	delete(m, "manifest_sha256")
	v3, _ := json.Marshal(m)
	m["schema_version"] = 2
	v2, _ := json.Marshal(m)
	m["schema_version"] = 1
	v1, _ := json.Marshal(m)
	if _, err := bundle.ParseManifest(v1); err != nil {
		t.Errorf("a version 1 manifest without a checksum: %v", err)
	}
	for _, b := range [][]byte{v2, v3} {
		if _, err := bundle.ParseManifest(b); err == nil || !strings.Contains(err.Error(), "no checksum") {
			t.Errorf("a manifest without a checksum (%.40s...): %v", b, err)
		}
	}
	edited := bytes.Replace(sealed, []byte(`"n1"`), []byte(`"n2"`), 1)
	if _, err := bundle.ParseManifest(edited); err == nil || !strings.Contains(err.Error(), "own checksum") {
		t.Errorf("an edited manifest: %v", err)
	}
	// A bundle of version 1, as nodesnap wrote before, validates.
	old := filepath.Join(t.TempDir(), "old.tar.gz")
	writeRaw(t, old, v1)
	if rep, err := bundle.Validate(context.Background(), old); err != nil {
		t.Errorf("a version 1 bundle: %v %v", err, rep.Problems)
	}
}

// writeRaw writes a bundle holding only manifest (raw bytes, as given).
func writeRaw(t *testing.T, p string, manifest []byte) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: "old/manifest.json", Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(manifest))}); err != nil {
		t.Fatal(err)
	}
	tw.Write(manifest)
	tw.Close()
	zw.Close()
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The .sha256 beside a bundle is believed only as one sha256sum line in a
// regular file: anything else is a problem of its own, said.
func TestValidateChecksumFile(t *testing.T) {
	p, _ := writeBundle(t, map[string]string{"host/a.txt": "alpha\n"}, bundle.Gzip)
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(orig)
	good := hex.EncodeToString(sum[:]) + "  b.tar.gz\n"
	for name, c := range map[string]struct {
		sidecar string
		link    bool
		want    string // "" valid
	}{
		"matching":           {sidecar: good},
		"upper case":         {sidecar: strings.ToUpper(hex.EncodeToString(sum[:])) + "  b.tar.gz\n"},
		"another file's sum": {sidecar: strings.Repeat("ab", 32) + "  b.tar.gz\n", want: "says abab"},
		"not a sum":          {sidecar: "hello\n", want: "does not hold a sha256"},
		"a link":             {sidecar: good, link: true, want: "not a checksum file"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			q := filepath.Join(dir, "b.tar.gz")
			if err := os.WriteFile(q, orig, 0o600); err != nil {
				t.Fatal(err)
			}
			side := q + bundle.SumSuffix
			if c.link {
				if err := os.WriteFile(filepath.Join(dir, "real"), []byte(c.sidecar), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(filepath.Join(dir, "real"), side); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(side, []byte(c.sidecar), 0o600); err != nil {
				t.Fatal(err)
			}
			rep, err := bundle.Validate(context.Background(), q)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(strings.Join(rep.Problems, "\n"), c.want)):
				t.Errorf("err %v, problems %q; want one saying %q", err, rep.Problems, c.want)
			}
		})
	}
}
