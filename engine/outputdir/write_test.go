package outputdir

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/naming"
)

// writeTestBundle writes a real bundle of status st named n in dir.
func writeTestBundle(t *testing.T, dir string, n naming.Name, st string) string {
	t.Helper()
	staging := t.TempDir()
	m := &bundle.Manifest{SchemaVersion: bundle.SchemaVersion, Status: st, Collectors: []bundle.CollectorResult{}, Files: []bundle.FileEntry{},
		Omitted: []bundle.Omitted{}, HungMounts: []bundle.HungItem{}, CommandLine: []string{}, Redaction: bundle.RedactionSummary{Rules: map[string]int{}}}
	w, err := bundle.Write(context.Background(), filepath.Join(dir, n.String()), bundle.Gzip, m, staging, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return w.Path
}

// After a run of partial bundles, --keep never removes the newest
// complete bundle: a node failing again and again keeps its last good
// evidence, one more than asked.
func TestRetainKeepsNewestComplete(t *testing.T) {
	dir := t.TempDir()
	at := func(d int) naming.Name {
		return naming.Name{Host: "h", Time: time.Date(2026, 1, d, 0, 0, 0, 0, time.UTC)}
	}
	oldComplete := writeTestBundle(t, dir, at(1), "complete")
	complete := writeTestBundle(t, dir, at(2), "complete")
	p1 := writeTestBundle(t, dir, at(3), "partial")
	p2 := writeTestBundle(t, dir, at(4), "partial")
	if err := os.WriteFile(complete+SumSuffix, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cur := writeTestBundle(t, dir, at(5), "partial")
	removed, err := Retain(dir, "h", 2, cur)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(removed)
	want := []string{oldComplete, p1}
	if strings.Join(removed, ",") != strings.Join(want, ",") {
		t.Errorf("removed %v, want %v (kept: the current, the newest partial before it, and the newest complete)", removed, want)
	}
	for _, p := range []string{cur, p2, complete, complete + SumSuffix} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", filepath.Base(p), err)
		}
	}
	// After a complete run, partial bundles count like any other.
	cur2 := writeTestBundle(t, dir, at(6), "complete")
	if err := os.WriteFile(p2+SumSuffix, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	removed, err = Retain(dir, "h", 2, cur2)
	if err != nil || len(removed) != 2 {
		t.Fatalf("removed %v, %v; want the two oldest", removed, err)
	}
	if _, err := os.Stat(p2 + SumSuffix); err == nil {
		t.Errorf("a removed bundle's .sha256 was left behind")
	}
}

// The sidecar is in sha256sum's format, so sha256sum -c checks the copy.
func TestWriteSum(t *testing.T) {
	dir := t.TempDir()
	p := writeTestBundle(t, dir, naming.Name{Host: "h", Time: time.Unix(0, 0)}, "complete")
	size, sum, err := bundle.HashFile(p)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := WriteSum(bundle.Written{Path: p, Size: size, SHA256: sum})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(sp)
	if string(b) != sum+"  "+filepath.Base(p)+"\n" {
		t.Errorf("sidecar %q", b)
	}
	if _, err := WriteSum(bundle.Written{Path: p, SHA256: sum}); err == nil {
		t.Errorf("a second WriteSum replaced the sidecar")
	}
	if sha, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command(sha, "-c", filepath.Base(sp))
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum -c: %v\n%s", err, out)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("left in the directory: %v, want the bundle and its sidecar", ents)
	}
}

// An encrypted bundle decrypts, with the recipient's key, to a bundle that
// validates; the file on disk is not a readable archive, and readers say
// how to decrypt it.
func TestWriteEncrypted(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	staging := t.TempDir()
	if err := os.MkdirAll(filepath.Join(staging, "host"), 0o700); err != nil {
		t.Fatal(err)
	}
	secret := []byte("evidence only the recipient may read\n")
	if err := os.WriteFile(filepath.Join(staging, "host", "f.txt"), secret, 0o600); err != nil {
		t.Fatal(err)
	}
	size, sum, _ := bundle.HashFile(filepath.Join(staging, "host", "f.txt"))
	m := &bundle.Manifest{SchemaVersion: bundle.SchemaVersion, Status: "complete", Collectors: []bundle.CollectorResult{{Name: "host", Status: "ok", Files: []string{"host/f.txt"}}},
		Files:   []bundle.FileEntry{{Path: "host/f.txt", Collector: "host", Size: size, SHA256: sum, Kind: bundle.KindText}},
		Omitted: []bundle.Omitted{}, HungMounts: []bundle.HungItem{}, CommandLine: []string{}, Redaction: bundle.RedactionSummary{Rules: map[string]int{}}}
	w, err := writeBundle(writeReq{WriteRequest: WriteRequest{Name: naming.Name{Host: "h", Time: time.Unix(0, 0)}, Recipients: []string{id.Recipient().String()}},
		Dir: dir, Staging: staging, Mtime: time.Unix(0, 0)}, m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(w.Path, ".tar.gz.age") || w.SumFile != w.Path+SumSuffix {
		t.Fatalf("written %+v", w)
	}
	raw, _ := os.ReadFile(w.Path)
	if strings.Contains(string(raw), "evidence") {
		t.Fatalf("the plaintext is in the encrypted file")
	}
	if _, _, err := bundle.ReadManifest(context.Background(), w.Path); !errors.Is(err, bundle.ErrEncrypted) || !strings.Contains(err.Error(), "age -d -i KEY") {
		t.Errorf("reading the encrypted bundle: %v, want ErrEncrypted saying how to decrypt", err)
	}
	f, _ := os.Open(w.Path)
	defer f.Close()
	r, err := age.Decrypt(f, id)
	if err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(t.TempDir(), "b.tar.gz")
	out, _ := os.Create(plain)
	if _, err := io.Copy(out, r); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := bundle.ReadAll(context.Background(), plain, 0)
	if err != nil || string(c.Files["host/f.txt"]) != string(secret) {
		t.Errorf("the decrypted bundle: %v, host/f.txt %q", err, c.Files["host/f.txt"])
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("left in the output directory: %v, want the .age and its sidecar only", ents)
	}
}

func TestParseRecipients(t *testing.T) {
	id, _ := age.GenerateX25519Identity()
	const sshKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFz6ZTAa0sb3Q0g0K6xVuPGLR0Fh+YVH7uWZWX12mj2Z support@example.com"
	rs, err := ParseRecipients([]string{id.Recipient().String(), sshKey})
	if err != nil || len(rs) != 2 {
		t.Fatalf("%d recipients, %v", len(rs), err)
	}
	for _, bad := range []string{"", "age1xyz", "ssh-ed25519 AAAA", id.String(), "https://example.com/key"} {
		if _, err := ParseRecipients([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		} else if strings.Contains(err.Error(), "AGE-SECRET-KEY-1") && len(bad) > 40 && strings.Contains(err.Error(), bad) {
			t.Errorf("the error repeats a secret key: %v", err)
		}
	}
}
