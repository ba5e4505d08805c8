package faults

// A bundle proves every byte: the attack of issue 38 (round two) changed
// one byte inside manifest.json's compressed block, or in the gzip
// trailer, and `nodesnap validate` still said "valid".

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sameArchive says whether b, a changed copy of a gzip bundle whose
// archive (the decompressed tar stream) is orig, still decompresses, CRC
// and length checked, to exactly orig. Two kinds of byte can change so:
// the gzip header's MTIME (bytes 4 to 7), XFL (8) and OS (9), which
// nothing hashes (RFC 1952, 2.3; FHCRC is set by no writer in use), and,
// rarely, a byte of a deflate block's Huffman table that codes the same
// bytes another way. The archive, every byte a reader reads, is then
// unchanged: validate is right to find nothing wrong with it. The .sha256
// collect writes beside a bundle covers the file itself, so with it
// present these changes are refused too.
func sameArchive(t *testing.T, b, orig []byte) bool {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return false
	}
	got, err := io.ReadAll(zr)
	return err == nil && bytes.Equal(got, orig)
}

// Every byte of a real bundle, changed alone (each bit inverted), makes
// `nodesnap validate` refuse the bundle: with its .sha256 beside it,
// every position; without, every position whose change reaches the
// archive (sameArchive).
func TestValidateRefusesEveryChangedByte(t *testing.T) {
	src := realBundle(t)
	orig, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(src + ".sha256")
	if err != nil {
		t.Fatalf("collect wrote no .sha256 beside the bundle: %v", err)
	}
	if r := nodesnap(t, 60*time.Second, nil, "validate", src); r.code != 0 {
		t.Fatalf("the untouched bundle: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	bare, summed := t.TempDir(), t.TempDir()
	var paths []string
	for i := range orig {
		b := bytes.Clone(orig)
		b[i] ^= 0xff
		name := fmt.Sprintf("b%06d.tar.gz", i)
		for _, dir := range []string{bare, summed} {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, p)
		}
		if err := os.WriteFile(filepath.Join(summed, name+".sha256"), sum, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	accepted := map[string]bool{}
	for len(paths) > 0 {
		batch := paths[:min(len(paths), 400)]
		paths = paths[len(batch):]
		r := nodesnap(t, 5*time.Minute, nil, append([]string{"validate", "--output", "json"}, batch...)...)
		if r.code == 0 {
			t.Errorf("validate exit 0 for a batch of changed bundles")
		}
		n := 0
		sc := bufio.NewScanner(strings.NewReader(r.stdout))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var res struct {
				Bundle string `json:"bundle"`
				Valid  bool   `json:"valid"`
			}
			if err := json.Unmarshal(sc.Bytes(), &res); err != nil {
				t.Fatalf("validate --output json: %v: %q", err, sc.Text())
			}
			n++
			if res.Valid {
				accepted[res.Bundle] = true
			}
		}
		if n != len(batch) {
			t.Fatalf("validate answered for %d of %d bundles (exit %d): %s", n, len(batch), r.code, r.stderr)
		}
	}
	zr, err := gzip.NewReader(bytes.NewReader(orig))
	if err != nil {
		t.Fatal(err)
	}
	archive, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	passed, header := 0, 0
	for i := range orig {
		name := fmt.Sprintf("b%06d.tar.gz", i)
		if accepted[filepath.Join(summed, name)] {
			t.Errorf("byte %d of %d changed, the .sha256 beside: valid", i, len(orig))
		}
		if accepted[filepath.Join(bare, name)] {
			b := bytes.Clone(orig)
			b[i] ^= 0xff
			if !sameArchive(t, b, archive) {
				t.Errorf("byte %d of %d changed, the archive with it: valid", i, len(orig))
			}
			passed++
			if i >= 4 && i <= 9 {
				header++
			}
		}
	}
	if header != 6 {
		t.Errorf("%d of the gzip header's MTIME, XFL and OS bytes passed without the .sha256, want all 6 (is the test still changing what it thinks?)", header)
	}
	t.Logf("%d bytes, %d bundles validated: every one changed alone refused with the .sha256 beside; without it %d passed whose archive is unchanged (%d of gzip's MTIME, XFL and OS, %d deflate codes for the same bytes)",
		len(orig), len(orig)*2, passed, header, passed-header)
}

// What validate refuses no other reader reads: analyze, inspect, redact
// and upload refuse a bundle whose gzip trailer or manifest changed.
func TestReadersRefuseAChangedByte(t *testing.T) {
	src := realBundle(t)
	orig, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	manifest := forge(t, src, nil, nil, false) // sealed, then one byte of its manifest changed below
	_, names, files := unpack(t, manifest)
	raw := files["manifest.json"]
	i := bytes.Index(raw, []byte(`"status":"`))
	if i < 0 {
		t.Fatalf("no status in the manifest: %s", raw)
	}
	raw[i+len(`"status":"`)] ^= 0x20 // "complete" → "Complete": one byte, still JSON
	files["manifest.json"] = raw
	prefix, _, _ := unpack(t, src)
	cases := map[string]string{
		"gzip CRC":      writeBytes(t, flipAt(orig, len(orig)-8)),
		"gzip length":   writeBytes(t, flipAt(orig, len(orig)-2)),
		"manifest byte": pack(t, prefix, names, files),
	}
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	defer srv.Close()
	for name, p := range cases {
		for _, args := range [][]string{
			{"validate", p}, {"analyze", p}, {"inspect", p},
			{"redact", "--output-file", filepath.Join(t.TempDir(), "r.tar.gz"), p},
			{"upload", "--retries", "1", p, srv.URL + "/b"},
		} {
			t.Run(name+"/"+args[0], func(t *testing.T) {
				r := nodesnap(t, 60*time.Second, nil, args...)
				if r.code == 0 {
					t.Errorf("%s read the changed bundle (exit 0):\n%s", args[0], r.stdout)
				}
				if args[0] == "upload" && (hits != 0 || !strings.Contains(r.stderr, "not uploading it")) {
					t.Errorf("upload: %d request(s) sent, %s", hits, r.stderr)
				}
				t.Logf("exit %d: %s", r.code, strings.TrimSpace(r.stderr))
			})
		}
	}
}

func flipAt(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0xff
	return c
}

func writeBytes(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "changed.tar.gz")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
