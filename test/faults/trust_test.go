package faults

// The attacks of "trust nothing the node, the network or the bundle
// says", each through the real binary: a root whose links lead out of it,
// bundles that carry terminal commands, white space by the hundred MiB or
// sizes that lie, an https upload sent to plain http, a lock file planted
// in a shared directory, a journal field forging a line.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/internal/inroot"
	"github.com/nodesnap/nodesnap/test/skip"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// unpack reads a bundle archive into its entries, in order, and the
// directory its entries live under.
func unpack(t *testing.T, p string) (prefix string, names []string, files map[string][]byte) {
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
	files = map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		dir, rest, _ := strings.Cut(h.Name, "/")
		prefix = dir
		names = append(names, rest)
		files[rest] = b
	}
	return prefix, names, files
}

// pack writes entries (manifest first) under prefix.
func pack(t *testing.T, prefix string, names []string, files map[string][]byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), prefix+".tar.gz")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for _, n := range names {
		b := files[n]
		if err := tw.WriteHeader(&tar.Header{Name: prefix + "/" + n, Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(b)), ModTime: time.Unix(1_700_000_000, 0)}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// realBundle collects a fixture node once per test (--only host).
func realBundle(t *testing.T) string {
	t.Helper()
	testkit.RequireRoot(t)
	n := newNode(t)
	out := t.TempDir()
	r := nodesnap(t, runTimeout+30*time.Second, nil, n.args(out, "--only", "host")...)
	if r.code != 0 && r.code != 3 {
		t.Fatalf("collect: exit %d\n%s", r.code, r.stderr)
	}
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tar.gz") {
			return filepath.Join(out, e.Name())
		}
	}
	t.Fatal("collect wrote no bundle")
	return ""
}

// forge rewrites a real bundle: edit changes the manifest (decoded as
// JSON), add adds files (listed under the host collector) or replaces
// them, and every file's size and sha256 are set to match unless lie.
func forge(t *testing.T, src string, edit func(m map[string]any), add map[string][]byte, lie bool) string {
	t.Helper()
	prefix, names, files := unpack(t, src)
	var m map[string]any
	if err := json.Unmarshal(files["manifest.json"], &m); err != nil {
		t.Fatal(err)
	}
	listed := map[string]map[string]any{}
	for _, fe := range m["files"].([]any) {
		fe := fe.(map[string]any)
		listed[fe["path"].(string)] = fe
	}
	for name, body := range add {
		if _, ok := files[name]; !ok {
			names = append(names, name)
		}
		files[name] = body
		if listed[name] == nil {
			fe := map[string]any{"path": name, "collector": "host", "size": 0, "sha256": "", "kind": "text", "truncated": false}
			m["files"] = append(m["files"].([]any), fe)
			listed[name] = fe
			for _, c := range m["collectors"].([]any) {
				c := c.(map[string]any)
				if c["name"] == "host" {
					fs, _ := c["files"].([]any)
					c["files"] = append(fs, name)
				}
			}
		}
	}
	for name, fe := range listed {
		sum := sha256.Sum256(files[name])
		fe["size"], fe["sha256"] = len(files[name]), hex.EncodeToString(sum[:])
		if lie {
			fe["size"], fe["sha256"] = len(files[name])+7, strings.Repeat("ab", 32)
		}
	}
	if edit != nil {
		edit(m)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	// The edited manifest sealed anew, as a forger would: what the
	// readers then meet is the edit, not a broken checksum.
	if err := bundle.SealManifest(raw); err != nil {
		t.Fatal(err)
	}
	files["manifest.json"] = raw
	return pack(t, prefix, names, files)
}

// hostile is text a terminal would obey: OSC 52 (writes the clipboard),
// a screen clear, an OSC 8 link, a fake green "verified OK", a C1 CSI and
// bidi overrides.
const hostile = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x1b[H\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07\x1b[32mverified OK\x1b[0m\u009b31m\u202egnp.exe\u2066\u200f\u061c\x7f"

// obeyable reports the first character a terminal may act on in s.
func obeyable(s string) (rune, bool) {
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f,
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
			return r, true
		}
	}
	return 0, false
}

// Text from a bundle reaches the terminal escaped in every printer:
// hostname, kernel, collector errors and notes, evidence lines, entry
// names, in analyze, analyze -v, inspect, diff, validate and the errors.
func TestHostileBundleTerminal(t *testing.T) {
	src := realBundle(t)
	// An evidence line: a kubelet log line the CSI rules quote, carrying
	// the sequences in its pod name.
	logLine := "Jul 15 03:49:34 node kubelet[1432]: E0715 03:49:34.053463    1432 nestedpendingoperations.go:348] Operation for \"{volumeName:kubernetes.io/csi/hostpath.csi.k8s.io^e9216f9a podName:9a42f711-028a-4ca2-802a-0e4db734592d nodeName:}\" failed. Error: UnmountVolume.TearDown failed for volume \"vol" + hostile + "\" : kubernetes.io/csi: Unmounter.TearDownAt failed to clean mount dir [/var/lib/kubelet/pods/9a42f711-028a-4ca2-802a-0e4db734592d/volumes/kubernetes.io~csi/pvc-1/mount]: kubernetes.io/csi: failed to remove dir [/var/lib/kubelet/pods/9a42f711-028a-4ca2-802a-0e4db734592d/volumes/kubernetes.io~csi/pvc-1/mount]: remove /var/lib/kubelet/pods/9a42f711-028a-4ca2-802a-0e4db734592d/volumes/kubernetes.io~csi/pvc-1/mount: device or resource busy\n"
	edit := func(m map[string]any) {
		h := m["host"].(map[string]any)
		h["hostname"] = "node" + hostile
		h["kernel"] = "6.1" + hostile
		for _, c := range m["collectors"].([]any) {
			c := c.(map[string]any)
			c["status"] = "error"
			c["error"] = "failed" + hostile
			c["notes"] = []any{"note" + hostile}
		}
	}
	good := forge(t, src, edit, map[string][]byte{"journal/kubelet.log": []byte(strings.Repeat(logLine, 3))}, false)
	other := forge(t, src, func(m map[string]any) {
		edit(m)
		m["host"].(map[string]any)["hostname"] = "other" + hostile
	}, nil, false)
	// Entry names reach validate and inspect through their problems.
	badName := forge(t, src, nil, map[string][]byte{"host/x" + hostile: []byte("x")}, false)
	prefix, names, files := unpack(t, badName)
	names = append(names, "host/unlisted"+hostile)
	files["host/unlisted"+hostile] = []byte("y")
	badName = pack(t, prefix, names, files)

	for _, args := range [][]string{
		{"analyze", good}, {"analyze", "-v", good}, {"inspect", good}, {"inspect", "-v", good},
		{"validate", good}, {"diff", other, good}, {"collectors"},
		{"validate", badName}, {"inspect", badName}, {"analyze", badName}, {"redact", "--output-file", filepath.Join(t.TempDir(), "o.tar.gz"), badName},
	} {
		t.Run(strings.Join(args[:len(args)-1], " "), func(t *testing.T) {
			r := nodesnap(t, 60*time.Second, nil, args...)
			for what, out := range map[string]string{"stdout": r.stdout, "stderr": r.stderr} {
				if c, bad := obeyable(out); bad {
					i := strings.IndexRune(out, c)
					t.Errorf("%v: %s carries %U unescaped, near %q", args, what, c, out[max(0, i-40):min(len(out), i+40)])
				}
			}
			if r.code == 1 && !strings.HasPrefix(r.stderr, "nodesnap: ") {
				t.Errorf("%v: exit 1 without a clear error: %q", args, r.stderr)
			}
			t.Logf("%v: exit %d", args, r.code)
		})
	}
	// The escaped form is shown: the reader sees what was there.
	r := nodesnap(t, 60*time.Second, nil, "analyze", "-v", good)
	for _, want := range []string{`\x1b]52;c;`, `\u202e`, `\x9b`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("analyze -v does not show %s escaped:\n%s", want, r.stdout)
		}
	}
}

// A bundle of a few hundred KiB whose tasks.json is 300 MiB of white
// space, or one 100 MiB string, is read in bounded time and memory by
// every reader; the long string is reported unreadable, clearly.
func TestHostileBundleWhitespace(t *testing.T) {
	src := realBundle(t)
	space := bytes.Repeat([]byte(" "), 300<<20)
	space[0], space[len(space)-1] = '[', ']'
	ws := forge(t, src, nil, map[string][]byte{"processes/tasks.json": space}, false)
	long := append(append([]byte(`[{"pid":1,"comm":"`), bytes.Repeat([]byte("a"), 100<<20)...), `"}]`...)
	tok := forge(t, src, nil, map[string][]byte{"processes/tasks.json": long}, false)
	for name, p := range map[string]string{"300 MiB of white space": ws, "a 100 MiB string": tok} {
		st, _ := os.Stat(p)
		for _, args := range [][]string{{"analyze", p}, {"report", "--output-file", filepath.Join(t.TempDir(), "r.html"), p}, {"diff", p, p}, {"validate", p}} {
			t.Run(name+"/"+args[0], func(t *testing.T) {
				cmd, mem := nodesnapInCgroup(t, t.TempDir(), args...)
				// Not a speed target: a hang guard. The quadratic scan
				// took minutes here.
				r := execRun(t, 120*time.Second, cmd)
				if r.code == 1 || strings.Contains(r.stderr, "panic") {
					t.Errorf("%v: exit %d: %s", args, r.code, r.stderr)
				}
				if name == "a 100 MiB string" && args[0] == "analyze" && !strings.Contains(r.stdout, "tasks.json") {
					t.Errorf("analyze does not say tasks.json was unreadable:\n%s", r.stdout)
				}
				if mem != "" {
					peak := readInt(t, filepath.Join(mem, "memory.max_usage_in_bytes"))
					t.Logf("%s: exit %d in %s, peak memory %d MiB, bundle %d KiB", args[0], r.code, r.elapsed.Round(time.Millisecond), peak>>20, st.Size()>>10)
					if peak > 256<<20 {
						t.Errorf("%s peaked at %d MiB for a %d KiB bundle", args[0], peak>>20, st.Size()>>10)
					}
				}
			})
		}
	}
}

// redact refuses what validate refuses: a bundle whose sizes and digests
// are all wrong is not laundered into one validate calls valid.
func TestRedactRefusesInvalid(t *testing.T) {
	src := realBundle(t)
	liar := forge(t, src, nil, nil, true)
	out := filepath.Join(t.TempDir(), "redacted.tar.gz")
	if r := nodesnap(t, 60*time.Second, nil, "validate", liar); r.code == 0 {
		t.Fatalf("validate accepted the forged bundle")
	}
	r := nodesnap(t, 60*time.Second, nil, "redact", "--output-file", out, liar)
	if r.code == 0 || !strings.Contains(r.stderr, "sha256") && !strings.Contains(r.stderr, "size") {
		t.Errorf("redact: exit %d, %q; want a refusal naming the mismatch", r.code, r.stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("redact wrote %s", out)
	}
}

// The root is a boundary: links under --root resolve as the host they
// belong to would resolve them, never on nodesnap's own filesystem.
func TestRootIsABoundary(t *testing.T) {
	// openat2 where the kernel has it, and the walk kernels before 5.6
	// take, forced.
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "walk"
		}
		t.Run(name, func(t *testing.T) { rootIsABoundary(t, walk) })
	}
}

func rootIsABoundary(t *testing.T, walk bool) {
	testkit.RequireRoot(t)
	realShadow, err := os.ReadFile("/etc/shadow")
	if err != nil || len(realShadow) < 8 {
		skip.Missing(t, "no /etc/shadow to compare with: %v", err)
	}
	const canary = "NODESNAP_TRUST_CANARY=envleak-5f1c9b"
	n := newNode(t)
	mk := func(p, s string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(n.root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(n.root, p), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := func(p, to string) {
		full := filepath.Join(n.root, p)
		os.Remove(full)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(to, full); err != nil {
			t.Fatal(err)
		}
	}
	mk("etc/shadow", "inside-the-root shadow\n")
	mk("var/lib/kubelet/pki/kubelet-client-2024.pem", "the pod-style pem, inside the root\n")
	link("var/lib/kubelet/config.yaml", "/etc/shadow")
	link("etc/kubernetes/kubelet.conf", "/proc/self/environ")
	link("var/lib/kubelet/pki/kubelet-client-current.pem", "/var/lib/kubelet/pki/kubelet-client-2024.pem")
	link("etc/escape.conf", "../../../../../../../../../../etc/shadow")
	env := []string{canary}
	if walk {
		env = append(env, inroot.WalkEnv+"=1")
	}
	out := t.TempDir()
	r := nodesnap(t, runTimeout+30*time.Second, env, n.args(out, "--only", "nodeconfig",
		"--config-file", "/var/lib/kubelet/pki/kubelet-client-current.pem", "--config-file", "/etc/escape.conf")...)
	c, o := checkOutput(t, out, false, []string{"envleak-5f1c9b"})
	o.fault = "symlinks leading out of --root"
	defer func() { o.failed = t.Failed(); record(o) }()
	if c == nil {
		t.Fatalf("no bundle: exit %d\n%s", r.code, r.stderr)
	}
	all := ""
	for name, b := range c.Files {
		all += string(b)
		if bytes.Contains(b, realShadow[:min(len(realShadow), 64)]) {
			t.Errorf("%s holds the machine's real /etc/shadow", name)
		}
	}
	if !strings.Contains(all, "inside-the-root shadow") {
		t.Errorf("config.yaml → /etc/shadow did not resolve inside the root")
	}
	if !strings.Contains(all, "the pod-style pem, inside the root") {
		t.Errorf("an absolute link under the root did not resolve inside it")
	}
	// The same link into /proc with the host's own root: refused, said.
	dir := t.TempDir()
	if err := os.Symlink("/proc/self/environ", filepath.Join(dir, "environ.conf")); err != nil {
		t.Fatal(err)
	}
	out2 := t.TempDir()
	r = nodesnap(t, runTimeout+30*time.Second, env, "collect", "-q", "--output-dir", out2, "--only", "nodeconfig",
		"--timeout", runTimeout.String(), "--config-file", filepath.Join(dir, "environ.conf"))
	c2, _ := checkOutput(t, out2, false, []string{"envleak-5f1c9b"})
	if c2 == nil {
		t.Fatalf("no bundle: exit %d\n%s", r.code, r.stderr)
	}
	if fj := string(c2.Files["nodeconfig/files.json"]); !strings.Contains(fj, "leads into /proc") {
		t.Errorf("the refused link is not said in nodeconfig/files.json:\n%s", fj)
	}
}

// An https upload redirected to http is refused on the first attempt and
// the plain server is sent nothing.
func TestUploadRefusesHTTPSDowngrade(t *testing.T) {
	src := realBundle(t)
	var plainHits int
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { plainHits++ }))
	defer plain.Close()
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+"/b", http.StatusTemporaryRedirect)
	}))
	defer secure.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: secure.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	r := nodesnap(t, 60*time.Second, []string{"SSL_CERT_FILE=" + ca}, "upload", "--retries", "2", "--backoff", "10ms", src, secure.URL+"/b")
	if r.code == 0 || !strings.Contains(r.stderr, "unencrypted") {
		t.Errorf("upload: exit %d, %q; want a refusal", r.code, r.stderr)
	}
	if plainHits != 0 {
		t.Errorf("the plain http server was sent the bundle %d time(s)", plainHits)
	}
}

// A lock file planted by another user in a shared output directory (the
// default /var/tmp) does not stop a collection.
func TestPlantedLockInSharedDir(t *testing.T) {
	testkit.RequireRoot(t)
	n := newNode(t)
	out := t.TempDir()
	if err := os.Chmod(out, 0o1777); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(out, ".nodesnap.lock")
	if err := os.WriteFile(planted, []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(planted, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, made := os.Stat("/run/nodesnap")
	defer func() {
		if made != nil {
			os.Remove("/run/nodesnap") // only if the test made it, and only when empty
		}
	}()
	r := nodesnap(t, runTimeout+30*time.Second, nil, n.args(out, "--only", "host")...)
	if r.code != 0 && r.code != 3 {
		t.Fatalf("collect with a planted lock file: exit %d\n%s", r.code, r.stderr)
	}
	// The private directory the lock went in is not left behind.
	if _, err := os.Stat("/run/nodesnap"); made != nil && err == nil {
		t.Errorf("/run/nodesnap is left behind after the run")
	}
}

// A journal entry whose identifier holds a newline does not forge a
// line (a fake kubelet line) in the journal text of the bundle.
func TestJournalFieldForgesNoLine(t *testing.T) {
	testkit.RequireRoot(t)
	j := testkit.StartJournald(t)
	const forged = "2026-11-21T10:00:00.000000+0000 node-1 kubelet[1]: E1121 forged-by-identifier"
	var b bytes.Buffer
	b.WriteString("SYSLOG_IDENTIFIER\n")
	ident := "evil\n" + strings.TrimSuffix(forged, ": E1121 forged-by-identifier")
	_ = binary.Write(&b, binary.LittleEndian, uint64(len(ident)))
	b.WriteString(ident + "\n")
	b.WriteString("PRIORITY=6\nMESSAGE=E1121 forged-by-identifier\nNODESNAP_TRUST=1\n")
	sock := fmt.Sprintf("/proc/%d/root/run/systemd/journal/socket", j.Pid)
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	c.Close()
	j.WaitCount(t, "NODESNAP_TRUST=1", 1)
	n := newNode(t)
	out := t.TempDir()
	r := nodesnap(t, runTimeout+30*time.Second, nil, n.args(out, "--only", "journal", "--journal-dir="+j.Dir,
		"--journal-reader=native", "--journal-match=NODESNAP_TRUST=1", "--journal-kernel=false")...)
	cont, _ := checkOutput(t, out, true, nil)
	if cont == nil {
		t.Fatalf("no bundle: exit %d\n%s", r.code, r.stderr)
	}
	seen := false
	for name, body := range cont.Files {
		if !strings.HasPrefix(name, "journal/") {
			continue
		}
		for _, l := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(l, forged[:20]) {
				t.Errorf("%s holds a forged line: %q", name, l)
			}
			if strings.Contains(l, "forged-by-identifier") {
				seen = true
			}
		}
	}
	if !seen {
		t.Errorf("the entry is not in the bundle at all (exit %d, %s)", r.code, r.stderr)
	}
}
