package bundle_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
)

// A bundle's entries sit in one directory named after the file, so that
// tar xzf makes one directory; readers see the names without it.
func TestWriteTopLevelDirectory(t *testing.T) {
	p, _ := writeBundle(t, map[string]string{"host/a.txt": "alpha\n"}, bundle.Gzip)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	if got := strings.Join(names, ","); got != "b/manifest.json,b/host/a.txt" {
		t.Errorf("entries %s, want b/manifest.json,b/host/a.txt", got)
	}
	c, err := bundle.ReadAll(context.Background(), p, 0)
	if err != nil || string(c.Files["host/a.txt"]) != "alpha\n" {
		t.Fatalf("ReadAll: %v %q", err, c.Files)
	}
}

func TestTopDir(t *testing.T) {
	for in, want := range map[string]string{
		"nodesnap-n-20261121T101500Z.tar.gz":               "nodesnap-n-20261121T101500Z",
		"nodesnap-n-20261121T101500Z.case-1.x.tar.zst.age": "nodesnap-n-20261121T101500Z.case-1.x",
		"nodesnap-n-20261121T101500Z.redacted.tar.gz":      "nodesnap-n-20261121T101500Z.redacted",
		"clean":   "clean",
		".tar.gz": "nodesnap",
	} {
		if got := bundle.TopDir(in); got != want {
			t.Errorf("TopDir(%q) = %q, want %q", in, got, want)
		}
	}
}

// Bundles written before the top-level directory, kept in testdata as
// nodesnap wrote them then, still read and validate.
func TestOldLayoutStillReads(t *testing.T) {
	olds, _ := filepath.Glob("../cmd/nodesnap/testdata/old-layout/*.tar.gz")
	if len(olds) == 0 {
		t.Fatal("no old-layout fixture in cmd/nodesnap/testdata/old-layout")
	}
	for _, p := range olds {
		rep, err := bundle.Validate(context.Background(), p)
		if err != nil || rep.Checked == 0 {
			t.Errorf("%s: %v %+v", p, err, rep)
		}
	}
}

// Once the first entry says the bundle has a directory, every entry must
// be in it: an archive mixing both layouts is refused.
func TestEntryOutsideTopDirRefused(t *testing.T) {
	p := rawArchive(t, []rawEntry{
		{hdr: tar.Header{Name: "b/manifest.json"}, body: `{"schema_version":1}`},
		{hdr: tar.Header{Name: "other/x.txt"}, body: "x"},
	}, 0)
	err := bundle.Walk(context.Background(), p, bundle.DefaultLimits, func(bundle.Entry) error { return nil })
	if !errors.Is(err, bundle.ErrUnsafe) || !strings.Contains(err.Error(), "outside the bundle's directory") {
		t.Errorf("Walk: %v, want a refusal of the entry outside b/", err)
	}
}

// An age-encrypted file is recognised and the reader told how to decrypt
// it, not that it is a malformed archive.
func TestEncryptedBundleSaysHowToDecrypt(t *testing.T) {
	for _, head := range []string{"age-encryption.org/v1\n-> X25519 abc\n", "-----BEGIN AGE ENCRYPTED FILE-----\nYWdl\n"} {
		p := filepath.Join(t.TempDir(), "b.tar.gz.age")
		if err := os.WriteFile(p, []byte(head), 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := bundle.ReadManifest(context.Background(), p)
		if !errors.Is(err, bundle.ErrEncrypted) || !strings.Contains(err.Error(), "age -d -i KEY") {
			t.Errorf("%q: %v, want ErrEncrypted", head[:10], err)
		}
	}
}
