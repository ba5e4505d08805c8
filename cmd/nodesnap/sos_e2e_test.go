package main

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/naming"
	"github.com/nodesnap/nodesnap/test/skip"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// The habits a support desk brings from sos report, through the real
// binary: names that carry the case, one directory per archive, a
// checksum file, a staging directory elsewhere, encryption, and readers
// that take old bundles and new alike.

// deskCollect runs collect of the host collector on the fixture root.
func deskCollect(t *testing.T, args ...string) runResult {
	t.Helper()
	root, err := filepath.Abs("testdata/root")
	if err != nil {
		t.Fatal(err)
	}
	return runNodesnap(t, 60*time.Second, nil, append([]string{"collect", "-q", "--root", root, "--only", "host", "--timeout", "30s"}, args...)...)
}

// oldBundle is a bundle as nodesnap wrote it before the top-level
// directory (kept in testdata as written then).
func oldBundle(t *testing.T) string {
	t.Helper()
	olds, _ := filepath.Glob("testdata/old-layout/*.tar.gz")
	if len(olds) != 1 {
		t.Fatalf("want one old-layout fixture bundle, found %v", olds)
	}
	// A copy: redact writes beside its input.
	p := filepath.Join(t.TempDir(), filepath.Base(olds[0]))
	b, err := os.ReadFile(olds[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func tarNames(t *testing.T, p string) []string {
	t.Helper()
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
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

// collect --case-id --label into a directory that does not exist yet:
// it is made 0700, the name carries case and label, every entry sits in
// one directory named like the file, and a .sha256 beside it satisfies
// sha256sum -c.
func TestCollectCaseLabelLayoutSidecar(t *testing.T) {
	out := filepath.Join(t.TempDir(), "cases", "new")
	r := deskCollect(t, "--output-dir", out, "--case-id", "01234567", "--label", "db-upgrade")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	st, err := os.Stat(out)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("output directory: %v %v, want made with mode 0700", st, err)
	}
	p := strings.TrimSpace(r.stdout)
	base := filepath.Base(p)
	if !regexp.MustCompile(`^nodesnap-fixture-node-[0-9]{8}T[0-9]{6}Z\.case-01234567\.db-upgrade\.tar\.gz$`).MatchString(base) {
		t.Errorf("bundle name %q does not carry the case id and label", base)
	}
	if n, ok := naming.ParseName(base); !ok || n.CaseID != "01234567" || n.Label != "db-upgrade" {
		t.Errorf("ParseName(%q) = %+v, %v", base, n, ok)
	}
	top := strings.TrimSuffix(base, ".tar.gz") + "/"
	names := tarNames(t, p)
	if len(names) < 2 || names[0] != top+"manifest.json" {
		t.Errorf("first entry %v, want %smanifest.json", names, top)
	}
	for _, n := range names {
		if !strings.HasPrefix(n, top) {
			t.Errorf("entry %q is outside %s: tar xzf would spill it", n, top)
		}
	}
	sum, err := os.ReadFile(p + ".sha256")
	if err != nil {
		t.Fatal(err)
	}
	_, digest, _ := bundle.HashFile(p)
	if string(sum) != digest+"  "+base+"\n" {
		t.Errorf("sidecar %q, want %q", sum, digest+"  "+base+"\n")
	}
	if sha, err := exec.LookPath("sha256sum"); err == nil {
		c := exec.Command(sha, "-c", base+".sha256")
		c.Dir = out
		if b, err := c.CombinedOutput(); err != nil {
			t.Errorf("sha256sum -c: %v\n%s", err, b)
		}
	}
	if got := readDir(t, out); len(got) != 2 {
		t.Errorf("output directory holds %v, want the bundle and its .sha256", got)
	}
	// tar xzf makes that one directory, and it reads as the bundle.
	if tarBin, err := exec.LookPath("tar"); err == nil {
		x := t.TempDir()
		if b, err := exec.Command(tarBin, "-xzf", p, "-C", x).CombinedOutput(); err != nil {
			t.Fatalf("tar xzf: %v\n%s", err, b)
		}
		if got := readDir(t, x); len(got) != 1 || got[0]+"/" != top {
			t.Errorf("tar xzf made %v, want one directory %s", got, top)
		}
		if rr := runNodesnap(t, 30*time.Second, nil, "validate", filepath.Join(x, top)); rr.code != 0 {
			t.Errorf("validate of the extracted directory: exit %d %s", rr.code, rr.stderr)
		}
	}
}

// Case id and label go into a file name: anything but letters, digits,
// '-' and '_' is refused before anything is collected.
func TestCollectRefusesUnsafeCaseID(t *testing.T) {
	out := t.TempDir()
	for _, args := range [][]string{{"--case-id", "../../etc"}, {"--label", "db upgrade"}, {"--label", "case-1"}} {
		r := deskCollect(t, append([]string{"--output-dir", out}, args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, args[0]) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming the flag", args, r.code, r.stderr)
		}
	}
	if got := readDir(t, out); len(got) != 0 {
		t.Errorf("written: %v", got)
	}
}

// A missing output directory that cannot be made (here in /proc, where
// no directory can be made) is an error that says how to make it; a path
// through a file says to choose another.
func TestCollectMissingOutputDirSaysHow(t *testing.T) {
	r := deskCollect(t, "--output-dir", "/proc/nodesnap-test-no-such/out")
	if r.code != exitFatal || !strings.Contains(r.stderr, "mkdir -m 0700 /proc/nodesnap-test-no-such/out") {
		t.Errorf("exit %d, stderr %q; want 1 and how to create it", r.code, r.stderr)
	}
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r = deskCollect(t, "--output-dir", filepath.Join(f, "sub"))
	if r.code != exitFatal || !strings.Contains(r.stderr, "choose another with --output-dir") {
		t.Errorf("exit %d, stderr %q; want 1 and a way out", r.code, r.stderr)
	}
}

// --output-file never overwrites: an existing file is refused before
// collection starts and left as it was.
func TestCollectOutputFileRefusesOverwrite(t *testing.T) {
	p := filepath.Join(t.TempDir(), "b.tar.gz")
	if err := os.WriteFile(p, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := deskCollect(t, "--output-file", p)
	if r.code == 0 || !strings.Contains(r.stderr, "already exists") {
		t.Errorf("exit %d, stderr %q; want a refusal", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(p); string(b) != "precious" {
		t.Errorf("the existing file was changed: %q", b)
	}
	if got := readDir(t, filepath.Dir(p)); len(got) != 1 {
		t.Errorf("left behind: %v", got)
	}
}

// --tmp-dir on another filesystem than the output directory (a tmpfs
// mounted for the test): the bundle still lands whole in the output
// directory, and neither directory keeps anything else.
func TestCollectTmpDirOtherFilesystem(t *testing.T) {
	testkit.RequireRoot(t)
	out := t.TempDir()
	tmp := t.TempDir()
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "nodesnap-test", tmp).Run(); err != nil {
		t.Fatalf("mounting a tmpfs for --tmp-dir: %v", err)
	}
	t.Cleanup(func() { _ = exec.Command("umount", tmp).Run() })
	r := deskCollect(t, "--output-dir", out, "--tmp-dir", tmp)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	p := strings.TrimSpace(r.stdout)
	if filepath.Dir(p) != out {
		t.Errorf("bundle at %s, want in %s", p, out)
	}
	if rep, err := bundle.Validate(t.Context(), p); err != nil {
		t.Errorf("validate: %v %+v", err, rep)
	}
	if got := readDir(t, tmp); len(got) != 0 {
		t.Errorf("left in --tmp-dir: %v", got)
	}
	if got := readDir(t, out); len(got) != 2 {
		t.Errorf("output directory: %v, want the bundle and its .sha256", got)
	}
	r = deskCollect(t, "--output-dir", out, "--tmp-dir", p)
	if r.code != exitFatal || !strings.Contains(r.stderr, "--tmp-dir") {
		t.Errorf("--tmp-dir a file: exit %d, %q", r.code, r.stderr)
	}
}

// --encrypt-to writes <bundle>.age and its .sha256, no plaintext bundle;
// the recipient's key decrypts it to a bundle that validates, and readers
// given the .age say how to decrypt it.
func TestCollectEncryptTo(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	r := deskCollect(t, "--output-dir", out, "--encrypt-to", id.Recipient().String(), "--case-id", "77")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	p := strings.TrimSpace(r.stdout)
	if !strings.HasSuffix(p, ".case-77.tar.gz.age") {
		t.Errorf("bundle %s, want a .tar.gz.age", p)
	}
	got := readDir(t, out)
	sort.Strings(got)
	if len(got) != 2 || got[0] != filepath.Base(p) || got[1] != filepath.Base(p)+".sha256" {
		t.Errorf("output directory %v, want only the .age and its .sha256", got)
	}
	for _, cmd := range [][]string{{"analyze", p}, {"inspect", p}, {"validate", p}} {
		rr := runNodesnap(t, 30*time.Second, nil, cmd...)
		if rr.code == 0 || !strings.Contains(rr.stderr, "encrypted") || !strings.Contains(rr.stderr, "age -d -i KEY") {
			t.Errorf("%s of the .age: exit %d, stderr %q; want it to say how to decrypt", cmd[0], rr.code, rr.stderr)
		}
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec, err := age.Decrypt(f, id)
	if err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(p), ".age"))
	w, _ := os.Create(plain)
	if _, err := io.Copy(w, dec); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if rr := runNodesnap(t, 30*time.Second, nil, "validate", plain); rr.code != 0 {
		t.Errorf("validate of the decrypted bundle: exit %d %s", rr.code, rr.stderr)
	}
	// Not a key: a usage error, nothing written.
	out2 := t.TempDir()
	if rr := deskCollect(t, "--output-dir", out2, "--encrypt-to", "hunter2"); rr.code != exitUsage || !strings.Contains(rr.stderr, "--encrypt-to") {
		t.Errorf("--encrypt-to hunter2: exit %d, %q", rr.code, rr.stderr)
	}
}

// Every reader takes a bundle of the old layout (no top-level directory)
// and of the new one: validate, analyze, inspect, redact, diff, report.
func TestReadersTakeOldAndNewLayouts(t *testing.T) {
	out := t.TempDir()
	r := deskCollect(t, "--output-dir", out)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	fresh := strings.TrimSpace(r.stdout)
	old := oldBundle(t)
	if names := tarNames(t, old); names[0] != "manifest.json" {
		t.Fatalf("the old fixture has a top-level directory: %v", names[:1])
	}
	for _, p := range []string{old, fresh} {
		for _, cmd := range [][]string{
			{"validate", p},
			{"analyze", p},
			{"inspect", p},
			{"report", p, "--output-file", filepath.Join(t.TempDir(), "r.html")},
			{"redact", "--obfuscate", "ip", "--output-file", filepath.Join(t.TempDir(), "red.tar.gz"), p},
		} {
			rr := runNodesnap(t, 60*time.Second, nil, cmd...)
			if rr.code != 0 {
				t.Errorf("%s of %s: exit %d\n%s", cmd[0], filepath.Base(p), rr.code, rr.stderr)
			}
		}
	}
	if rr := runNodesnap(t, 60*time.Second, nil, "diff", old, fresh); rr.code != 0 && rr.code != exitPartial {
		t.Errorf("diff old new: exit %d\n%s", rr.code, rr.stderr)
	}
}

// redact --obfuscate hostname names its output with the node's token: the
// real host name was in the file name.
func TestRedactHostnameNotInOutputName(t *testing.T) {
	old := oldBundle(t)
	rr := runNodesnap(t, 60*time.Second, nil, "redact", "--obfuscate", "hostname", old)
	if rr.code != 0 {
		t.Fatalf("exit %d\n%s", rr.code, rr.stderr)
	}
	p := strings.SplitN(rr.stdout, "\n", 2)[0]
	if strings.Contains(filepath.Base(p), "fixture-node") || !strings.HasSuffix(p, ".redacted.tar.gz") {
		t.Errorf("redacted bundle %s: the host name is in its name", p)
	}
	if !regexp.MustCompile(`^nodesnap-host-[0-9a-f]+-[0-9]{8}T[0-9]{6}Z\.redacted\.tar\.gz$`).MatchString(filepath.Base(p)) {
		t.Errorf("redacted bundle %s: want the node's token in place of its name", filepath.Base(p))
	}
	for _, n := range readDir(t, filepath.Dir(p)) {
		if strings.Contains(n, "fixture-node") && n != filepath.Base(old) {
			t.Errorf("a file named after the host: %s", n)
		}
	}
}

// --keep after partial runs keeps the newest complete bundle: the last
// good evidence is never evicted in favour of partial bundles.
func TestKeepPreservesCompleteAfterPartial(t *testing.T) {
	out := t.TempDir()
	run := func(partial bool) string {
		args := []string{"--output-dir", out, "--keep", "1"}
		want := 0
		if partial {
			args = append(args, "--max-bundle-size", "100") // leaves files out: partial
			want = exitPartial
		}
		r := deskCollect(t, args...)
		if r.code != want {
			t.Fatalf("exit %d, want %d\n%s", r.code, want, r.stderr)
		}
		return filepath.Base(strings.TrimSpace(r.stdout))
	}
	complete := run(false)
	p1 := run(true)
	p2 := run(true)
	got := readDir(t, out)
	sort.Strings(got)
	want := []string{complete, complete + ".sha256", p2, p2 + ".sha256"}
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("after complete, partial, partial with --keep 1: %v, want %v (%s removed)", got, want, p1)
	}
	// A complete run then takes the complete bundle's place.
	c2 := run(false)
	if got := readDir(t, out); len(got) != 2 || !strings.Contains(strings.Join(got, " "), c2) {
		t.Errorf("after a complete run with --keep 1: %v, want only %s and its .sha256", got, c2)
	}
}

// upload validates the bundle before sending anything: a damaged bundle
// is refused and the server hears nothing. A plain-http URL is warned of.
func TestUploadValidatesAndWarnsOnHTTP(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	good := oldBundle(t)
	b, _ := os.ReadFile(good)
	bad := filepath.Join(t.TempDir(), "damaged.tar.gz")
	if err := os.WriteFile(bad, b[:len(b)*2/3], 0o600); err != nil {
		t.Fatal(err)
	}
	r := runNodesnap(t, 30*time.Second, nil, "upload", bad, srv.URL+"/x")
	if r.code == 0 || !strings.Contains(r.stderr, "not uploading it") || hits.Load() != 0 {
		t.Errorf("damaged: exit %d, %d requests, stderr %q; want a refusal and no request", r.code, hits.Load(), r.stderr)
	}
	r = runNodesnap(t, 30*time.Second, nil, "upload", good, srv.URL+"/x?sig=s3cret")
	if r.code != 0 || hits.Load() != 1 {
		t.Fatalf("good: exit %d, %d requests\n%s", r.code, hits.Load(), r.stderr)
	}
	if !strings.Contains(r.stderr, "plain http") || strings.Contains(r.stderr, "s3cret") {
		t.Errorf("stderr %q: want a plain-http warning without the URL's query", r.stderr)
	}
}

// version and --version print the same line, with the Go version and
// the commit (or "commit unknown" and "devel" for a build without VCS
// stamps, as go run and -buildvcs=false give).
func TestVersionAgrees(t *testing.T) {
	bin := testkit.Binary(t)
	a, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	b, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Errorf("version %q, --version %q", a, b)
	}
	// Installed as a kubectl plugin, the same binary says the same.
	plugin := filepath.Join(t.TempDir(), KubectlPluginName)
	if err := os.Symlink(bin, plugin); err != nil {
		t.Fatal(err)
	}
	c, err := exec.Command(plugin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(c) != string(a) {
		t.Errorf("as %s, --version %q; as nodesnap %q", KubectlPluginName, c, a)
	}
	line := string(a)
	if !strings.Contains(line, runtime.Version()) || !strings.HasPrefix(line, "nodesnap ") {
		t.Errorf("version %q lacks the Go version %s", line, runtime.Version())
	}
	if !regexp.MustCompile(`commit ([0-9a-f]{12}(\+dirty)?|unknown)`).MatchString(line) {
		t.Errorf("version %q does not say which commit", line)
	}
	if strings.Contains(line, "commit unknown") && !strings.HasPrefix(line, "nodesnap devel ") {
		t.Errorf("version %q: a build without a commit must say devel", line)
	}
}

func TestBuildInfoString(t *testing.T) {
	b := buildInfo{Version: "v1.2.3", GoVersion: "go1.99", Revision: "0123456789abcdef", Modified: true, Time: time.Date(2026, 11, 21, 10, 15, 0, 0, time.UTC)}
	want := "nodesnap v1.2.3 (go1.99, commit 0123456789ab+dirty, built 2026-11-21T10:15:00Z, " + runtime.GOOS + "/" + runtime.GOARCH + ")"
	if b.String() != want {
		t.Errorf("%q, want %q", b.String(), want)
	}
	b = buildInfo{Version: "devel", GoVersion: "go1.99", Revision: "abc"}
	if !strings.Contains(b.String(), "commit abc,") {
		t.Errorf("%q", b.String())
	}
}

// collect --output json names the checksum file and says when the bundle
// is encrypted.
func TestCollectJSONNamesSidecar(t *testing.T) {
	out := t.TempDir()
	root, _ := filepath.Abs("testdata/root")
	r := runNodesnap(t, 60*time.Second, nil, "collect", "--output", "json", "--root", root, "--only", "host", "--output-dir", out)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var res struct {
		Path       string `json:"path"`
		SHA256File string `json:"sha256_file"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatal(err)
	}
	if res.SHA256File != res.Path+".sha256" {
		t.Errorf("sha256_file %q for %q", res.SHA256File, res.Path)
	}
}

// make build stamps the commit itself: a builder whose Go settings turn
// off the go command's VCS stamp (GOFLAGS=-buildvcs=false, as some CI
// images set) still gets a binary that says which commit it is.
func TestMakeBuildStampsCommit(t *testing.T) {
	root, err := testkit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	testkit.RequireTool(t, "make")
	testkit.RequireTool(t, "git")
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		skip.Missing(t, "not a git checkout, nothing to stamp: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "nodesnap")
	cmd := exec.Command("make", "--no-print-directory", "build", "BIN="+bin)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "commit " + strings.TrimSpace(string(head))[:12]; !strings.Contains(string(out), want) {
		t.Errorf("make build with -buildvcs=false: %q, want %q", out, want)
	}
}
