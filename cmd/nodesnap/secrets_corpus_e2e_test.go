package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/redact"
	"github.com/nodesnap/nodesnap/test/skip"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// The secrets corpus (issue 18) lives beside the repository, in
// ../shared/secrets-corpus: published secret values from other scanners'
// test fixtures, planted in node-shaped files, journal entries, pod logs,
// command lines and kubelet answers. Its values are read from there at run
// time and never copied into this repository.

// secretsCorpusDir finds the corpus: ../shared/secrets-corpus beside the
// module root, else $NODESNAP_SECRETS_CORPUS. Missing, the test is skipped,
// or fails in CI, where the repository is cloned with shared/ beside it.
func secretsCorpusDir(t *testing.T) string {
	t.Helper()
	var tried []string
	if root, err := testkit.ModuleRoot(); err == nil {
		d := filepath.Join(root, "..", "shared", "secrets-corpus")
		tried = append(tried, d)
		if st, err := os.Stat(filepath.Join(d, "secrets.tsv")); err == nil && st.Mode().IsRegular() {
			return d
		}
	}
	if d := os.Getenv("NODESNAP_SECRETS_CORPUS"); d != "" {
		tried = append(tried, d)
		if _, err := os.Stat(filepath.Join(d, "secrets.tsv")); err == nil {
			return d
		}
	}
	msg := fmt.Sprintf("the secrets corpus is not at %s (set NODESNAP_SECRETS_CORPUS to its directory)", strings.Join(tried, " nor "))
	skip.Missing(t, "%s (CI clones the repository with shared/ beside it)", msg)
	return ""
}

// corpusSecret is one row of secrets.tsv.
type corpusSecret struct {
	id, kind, loc string
	needles       []string
}

// corpusKeep is one row of keep.tsv: a value that must come through.
type corpusKeep struct {
	id, category, loc, value string
}

func readTSV(t *testing.T, path string, cols int) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	for i, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if i == 0 {
			continue // header
		}
		f := strings.Split(line, "\t")
		if len(f) != cols {
			t.Fatalf("%s line %d: %d columns, want %d", path, i+1, len(f), cols)
		}
		rows = append(rows, f)
	}
	return rows
}

// tsvUnescape decodes the corpus's TSV escapes: \\ \t \n.
func tsvUnescape(s string) string {
	return strings.NewReplacer(`\\`, `\`, `\t`, "\t", `\n`, "\n").Replace(s)
}

func loadCorpus(t *testing.T, dir string) ([]corpusSecret, []corpusKeep) {
	t.Helper()
	var secrets []corpusSecret
	for _, f := range readTSV(t, filepath.Join(dir, "secrets.tsv"), 8) {
		s := corpusSecret{id: f[0], kind: f[1], loc: f[2]}
		if err := json.Unmarshal([]byte(f[7]), &s.needles); err != nil || len(s.needles) == 0 {
			t.Fatalf("secrets.tsv %s: needles %q: %v", f[0], f[7], err)
		}
		if v := tsvUnescape(f[6]); v != "" && !slices.Contains(s.needles, v) {
			s.needles = append(s.needles, v)
		}
		secrets = append(secrets, s)
	}
	var keep []corpusKeep
	for _, f := range readTSV(t, filepath.Join(dir, "keep.tsv"), 4) {
		keep = append(keep, corpusKeep{id: f[0], category: f[1], loc: f[2], value: tsvUnescape(f[3])})
	}
	return secrets, keep
}

// needleForms are the strings whose presence anywhere means needle leaked:
// the value, every 16-byte piece of it, its base64 at each of the three
// alignments (the characters that depend on the value alone), and its
// JSON-escaped form.
func needleForms(needle string) []string {
	forms := []string{needle}
	const piece = 16
	for i := 0; i+piece <= len(needle) && len(needle) > piece; i++ {
		forms = append(forms, needle[i:i+piece])
	}
	for pad := 0; pad < 3; pad++ {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, pad), needle...))
		// Characters that mix in the padding bytes or the end are not
		// the needle's own.
		from := (pad*8 + 5) / 6
		if pad == 0 {
			from = 0
		}
		to := (pad + len(needle)) * 8 / 6
		if to-from >= 12 {
			core := enc[from:to]
			forms = append(forms, core, strings.NewReplacer("+", "-", "/", "_").Replace(core))
		}
	}
	if j, err := json.Marshal(needle); err == nil {
		if s := string(j[1 : len(j)-1]); s != needle {
			forms = append(forms, s)
		}
	}
	return forms
}

// startHeldProcess starts this test binary with argv as its command line;
// it sleeps (see TestMain) until killed by pid on cleanup.
func startHeldProcess(t *testing.T, argv []string) {
	binaryTest(t)
	t.Helper()
	cmd := &exec.Cmd{Path: os.Args[0], Args: argv, Env: append(os.Environ(), "NODESNAP_TEST_HOLD=1")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting a process with the corpus's command line: %v", err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
}

func plantTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o600)
	})
	if err != nil {
		t.Fatalf("planting %s: %v", from, err)
	}
}

// TestCollectSecretsCorpus plants the secrets corpus where a collection
// reads it: files under /etc of a fake --root, journal entries in a
// private journald, a CSI driver pod's CRI logs, the command lines of
// running processes, and a kubelet on loopback answering with the
// corpus's /pods, /configz, goroutine dumps, /metrics and /healthz. Then no
// secret may be anywhere in the bundle, the manifest or nodesnap's output,
// in any form; the non-secrets must come through; the manifest must count
// the redactions of every location.
func TestCollectSecretsCorpus(t *testing.T) {
	testkit.RequireRoot(t)
	collectCorpus(t, secretsCorpusDir(t))
}

// collectCorpus plants the corpus in dir (laid out as the secrets corpus
// is) where a collection reads it, collects, and checks the bundle and a
// `nodesnap redact` of a bundle collected with every rule off.
func collectCorpus(t *testing.T, dir string) {
	secrets, keep := loadCorpus(t, dir)
	plant := filepath.Join(dir, "plant")
	root := t.TempDir()

	// Files under /etc, and the CSI pod's logs in /var/log/pods of a node
	// with a kubelet directory.
	if err := os.MkdirAll(filepath.Join(root, "var/lib/kubelet/pods"), 0o755); err != nil {
		t.Fatal(err)
	}
	plantTree(t, filepath.Join(plant, "files"), root)
	plantTree(t, filepath.Join(plant, "podlogs"), filepath.Join(root, "var/log/pods"))

	// Files held open, whose paths the openfiles collector lists.
	hold, err := os.ReadFile(filepath.Join(plant, "holdfiles.txt"))
	if err != nil {
		t.Fatal(err)
	}
	held := strings.Fields(string(hold))
	for _, rel := range held {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		testkit.HoldOpenFile(t, p)
	}

	// Command lines: argv lists, and whole commands in argv[0] (exec -a).
	f, err := os.Open(filepath.Join(plant, "cmdlines.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var argv []string
		if err := json.Unmarshal(sc.Bytes(), &argv); err != nil || len(argv) == 0 {
			t.Fatalf("cmdlines.jsonl: %q: %v", sc.Text(), err)
		}
		startHeldProcess(t, argv)
	}
	f.Close()
	execa, err := os.ReadFile(filepath.Join(plant, "cmdlines-execa.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(execa)), "\n") {
		startHeldProcess(t, []string{line})
	}

	// Journal entries, in a journald of the test's own.
	j := testkit.StartJournald(t)
	idents := map[string]int{}
	jfiles, _ := filepath.Glob(filepath.Join(plant, "journal-*.jsonl"))
	for _, jf := range jfiles {
		b, err := os.ReadFile(jf)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		for {
			var e struct{ Ident, Msg string }
			if err := dec.Decode(&e); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", jf, err)
			}
			j.Native(t, e.Ident, e.Msg)
			idents[e.Ident]++
		}
	}
	var journalArgs []string
	for ident, n := range idents {
		j.WaitCount(t, "SYSLOG_IDENTIFIER="+ident, n)
		journalArgs = append(journalArgs, "--journal-match", "SYSLOG_IDENTIFIER="+ident)
	}

	// The kubelet, on loopback, with bearer authentication.
	tokenB, err := os.ReadFile(filepath.Join(plant, "kubelet", "token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenB))
	mux := testkit.KubeletMux(t)
	serve := func(pattern, file string) {
		b, err := os.ReadFile(filepath.Join(plant, "kubelet", file))
		if err != nil {
			t.Fatal(err)
		}
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if pattern == "/healthz" {
				w.WriteHeader(http.StatusInternalServerError)
			}
			_, _ = w.Write(b)
		})
	}
	serve("/pods", "pods.json")
	serve("/configz", "configz.json")
	serve("/metrics", "metrics.txt")
	serve("/healthz", "healthz.txt")
	dumps := map[string][]byte{}
	for _, d := range []string{"1", "2"} {
		b, err := os.ReadFile(filepath.Join(plant, "kubelet", "goroutine-debug"+d+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		dumps[d] = b
	}
	mux.HandleFunc("/debug/pprof/goroutine", func(w http.ResponseWriter, r *http.Request) {
		if b, ok := dumps[r.URL.Query().Get("debug")]; ok {
			_, _ = w.Write(b)
			return
		}
		http.Error(w, "only debug=1 and debug=2 here", http.StatusNotFound)
	})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	// The stand-in is this root's kubelet: its certificate is where a
	// self-signed kubelet keeps its own.
	kroot := kubeletRoot(t, srv.Certificate())
	if err := os.MkdirAll(filepath.Join(root, "var/lib/kubelet/pki"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(kroot, "var/lib/kubelet/pki/kubelet.crt"), filepath.Join(root, "var/lib/kubelet/pki/kubelet.crt")); err != nil {
		t.Fatal(err)
	}

	collect := func(extra ...string) (string, runResult) {
		out := t.TempDir()
		args := append([]string{"collect", "--output-dir", out, "--root", root, "--proc", "/proc", "--timeout", "100s",
			"--only", "nodeconfig,processes,openfiles,journal,csi,kubelet",
			"--journal-dir", j.Dir, "--journal-kernel=false",
			"--kubelet-url", srv.URL, "--kubelet-token", token, "--kubelet-readonly-url", ""}, journalArgs...)
		r := runNodesnap(t, 150*time.Second, nil, append(args, extra...)...)
		if r.code != exitOK && r.code != exitPartial {
			t.Fatalf("collect exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		p := bundlePath(t, out)
		if d := os.Getenv("NODESNAP_CORPUS_BUNDLE_TO"); d != "" {
			// For a look at what leaked: a copy of the bundle.
			if b, err := os.ReadFile(p); err == nil {
				_ = os.WriteFile(filepath.Join(d, filepath.Base(p)), b, 0o600)
			}
		}
		return p, r
	}
	cc := corpusCheck{secrets: secrets, keep: keep, held: held, root: root}

	// A collection: what a customer attaches to a ticket.
	p, r := collect()
	cc.check(t, "collect", p, r)

	// `nodesnap redact` on a bundle collected with every rule off: the
	// same secrets in the shapes nodesnap itself writes (re-indented
	// /pods, journal lines, ps tables) must go just as well.
	cfg := filepath.Join(t.TempDir(), "off.yaml")
	if err := os.WriteFile(cfg, []byte("disable: ["+strings.Join(redact.BuiltinRuleNames(), ", ")+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	raw, _ := collect("--redact-config", cfg)
	// The rules were off: the secrets are in that bundle, or the pass
	// below proves nothing.
	rc := mustValidate(t, raw)
	present := 0
	for _, s := range secrets {
		for _, f := range rc.Files {
			if bytes.Contains(f, []byte(s.needles[0])) {
				present++
				break
			}
		}
	}
	if present < len(secrets)*3/4 {
		t.Fatalf("with every rule off, only %d of %d secrets are in the bundle", present, len(secrets))
	}
	clean := filepath.Join(t.TempDir(), "clean.tar.gz")
	rr := runNodesnap(t, 120*time.Second, nil, "redact", "--output-file", clean, raw)
	if rr.code != exitOK {
		t.Fatalf("nodesnap redact exit %d\nstdout:\n%s\nstderr:\n%s", rr.code, rr.stdout, rr.stderr)
	}
	cc.check(t, "redact", clean, rr)
}

// corpusCheck holds what a bundle is checked against.
type corpusCheck struct {
	secrets []corpusSecret
	keep    []corpusKeep
	held    []string
	root    string
}

// check asserts a bundle (and the output of the command that wrote it)
// holds no secret of the corpus in any form, keeps the values to keep (all
// but at most 2) and counts redactions in every location.
func (cc corpusCheck) check(t *testing.T, label, p string, r runResult) {
	t.Helper()
	secrets, keep, held, root := cc.secrets, cc.keep, cc.held, cc.root
	c := mustValidate(t, p)
	_, mraw, err := readManifestRaw(p)
	if err != nil {
		t.Fatal(err)
	}
	everything := map[string][]byte{"(stdout)": []byte(r.stdout), "(stderr)": []byte(r.stderr), "manifest.json": mraw}
	for name, b := range c.Files {
		everything[name] = b
	}
	names := make([]string, 0, len(everything))
	for n := range everything {
		names = append(names, n)
	}
	sort.Strings(names)

	// No secret, in any form.
	leaked := 0
	for _, s := range secrets {
		found := ""
		for _, nd := range s.needles {
			if found = findLeak(everything, names, nd); found != "" {
				break
			}
		}
		if found != "" {
			leaked++
			t.Errorf("%s: leak %s (%s, %s): %s", label, s.id, s.kind, s.loc, found)
		}
	}

	// Every location was collected (its marker is there), and the values a
	// support engineer needs came through, all but at most 2.
	all := bytes.Join(func() [][]byte {
		var v [][]byte
		for _, n := range names {
			v = append(v, everything[n])
		}
		return v
	}(), []byte("\n"))
	lost := 0
	for _, k := range keep {
		if k.loc == "openfiles" {
			// The corpus names the held files under the root it was made
			// with; here they are under this test's root.
			for _, h := range held {
				if strings.HasSuffix(k.value, "/"+h) {
					k.value = filepath.Join(root, h)
				}
			}
		}
		if bytes.Contains(all, []byte(k.value)) {
			continue
		}
		if k.category == "marker" {
			t.Errorf("%s: location %s was not collected: its marker %q is nowhere in the bundle", label, k.loc, k.value)
			continue
		}
		lost++
		t.Logf("%s: over-redaction: %s (%s, %s): %q is gone", label, k.id, k.category, k.loc, k.value)
	}
	if lost > 2 {
		t.Errorf("%s: %d of %d values to keep were changed or lost; at most 2 may be", label, lost, len(keep))
	}

	// The manifest counts redactions in every location that held secrets:
	// the bundle files holding a location's marker (or, for the kubelet's
	// answers, its file) have redactions counted.
	redacted := map[string]int{}
	for _, fe := range c.Manifest.Files {
		for _, n := range fe.Redactions {
			redacted[fe.Path] += n
		}
	}
	kubeletFile := map[string]string{"kpods": "pods.json", "kconfigz": "configz.json", "kgoroutine": "goroutine", "kmetrics": "metrics"}
	locs := map[string]bool{}
	for _, s := range secrets {
		locs[s.loc] = true
	}
	for loc := range locs {
		if loc == "ktoken" || loc == "csikeyring" {
			continue // a flag's value, and a file with no marker (checked below)
		}
		marker := "secretslab-marker-" + loc
		n, files := 0, 0
		for _, name := range names {
			b := everything[name]
			hit := bytes.Contains(b, []byte(marker))
			if kf, ok := kubeletFile[loc]; ok {
				hit = strings.HasPrefix(name, "kubelet/") && strings.Contains(name, kf)
			}
			if hit {
				files++
				n += redacted[name]
			}
		}
		if files == 0 {
			t.Errorf("%s: location %s: no bundle file holds it", label, loc)
		} else if n == 0 {
			t.Errorf("%s: location %s: no redaction counted in the manifest", label, loc)
		}
	}
	if n := redacted["nodeconfig/files/etc/ceph/ceph.client.csi-rbd.keyring"]; n == 0 && locs["csikeyring"] {
		t.Errorf("%s: nodeconfig/files/etc/ceph/ceph.client.csi-rbd.keyring: no redaction counted (collected: %v)", label, c.Files["nodeconfig/files/etc/ceph/ceph.client.csi-rbd.keyring"] != nil)
	}
	t.Logf("%s: secrets corpus: %d of %d secrets leaked; %d of %d values to keep lost; %d redactions %v",
		label, leaked, len(secrets), lost, len(keep), c.Manifest.Redaction.Total, c.Manifest.Redaction.Rules)
}

// findLeak says where any form of value (needleForms) stands in the
// bundle's files, in the order of names, with the line around it; "" when
// nowhere.
func findLeak(everything map[string][]byte, names []string, value string) string {
	for _, form := range needleForms(value) {
		for _, n := range names {
			b := everything[n]
			if i := bytes.Index(b, []byte(form)); i >= 0 {
				ls := bytes.LastIndexByte(b[:i], '\n') + 1
				le := bytes.IndexByte(b[i:], '\n')
				if le < 0 {
					le = len(b) - i
				}
				line := b[ls : i+le]
				if len(line) > 300 {
					line = line[:300]
				}
				return fmt.Sprintf("%q in %s: %s", form, n, line)
			}
		}
	}
	return ""
}
