package journal_test

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/journal"
	"github.com/nodesnap/nodesnap/engine/supervisor"
	"github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// journalFlags sets the journal collector's options as the command line
// would, and puts the defaults back when the test ends (the options live
// in the registry, shared by every run in this process).
func journalFlags(t *testing.T, args ...string) {
	t.Helper()
	spec, ok := collectors.Lookup("journal")
	if !ok {
		t.Fatal("journal collector is not registered")
	}
	set := func(args []string) error {
		fs := pflag.NewFlagSet("journal", pflag.ContinueOnError)
		spec.Flags(fs)
		return fs.Parse(args)
	}
	if err := set(args); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = set(nil) })
}

// collectJournal runs a real collection (supervisortest serves the
// children) and returns the validated bundle.
func collectJournal(t *testing.T, only []string, common collectors.Common) (*bundle.Contents, time.Duration) {
	t.Helper()
	return supervisortest.Run(t, supervisor.Options{Only: only, Timeout: 90 * time.Second, Common: common})
}

func journalResult(t *testing.T, c *bundle.Contents) *bundle.CollectorResult {
	t.Helper()
	r := c.Manifest.Collector("journal")
	if r == nil {
		t.Fatal("no journal collector in the manifest")
	}
	return r
}

func journalSources(t *testing.T, c *bundle.Contents) layout.JournalSources {
	t.Helper()
	var s layout.JournalSources
	if err := json.Unmarshal(c.Files["journal/sources.json"], &s); err != nil {
		t.Fatalf("journal/sources.json: %v\n%s", err, c.Files["journal/sources.json"])
	}
	return s
}

func sourceNamed(t *testing.T, s layout.JournalSources, kind, name string) layout.JournalSource {
	t.Helper()
	for _, src := range s.Sources {
		if src.Kind == kind && src.Name == name {
			return src
		}
	}
	t.Fatalf("no %s source %q in sources.json: %+v", kind, name, s.Sources)
	return layout.JournalSource{}
}

func fileEntry(c *bundle.Contents, path string) *bundle.FileEntry {
	for i := range c.Manifest.Files {
		if c.Manifest.Files[i].Path == path {
			return &c.Manifest.Files[i]
		}
	}
	return nil
}

// assertNowhere fails if secret occurs in any byte of the bundle.
func assertNowhere(t *testing.T, c *bundle.Contents, secret string) {
	t.Helper()
	m, _ := json.Marshal(c.Manifest)
	if bytes.Contains(m, []byte(secret)) {
		t.Errorf("the manifest holds the secret %q", secret)
	}
	for name, b := range c.Files {
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds the secret %q", name, secret)
		}
	}
}

func nonce(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// testJournald is a systemd-journald the test started in its own mount
// namespace (pid 1 here is not systemd, and the host's journal is not
// touched). Its journal files land in Dir, which journalctl -D reads.
type testJournald struct {
	Dir string
	Pid int
}

func startJournald(t *testing.T) *testJournald {
	t.Helper()
	return startJournaldEnv(t)
}

// startJournaldEnv starts journald with extra environment variables
// (SYSTEMD_JOURNAL_COMPACT=0 and SYSTEMD_JOURNAL_KEYED_HASH=0 make it
// write the older layout).
func startJournaldEnv(t *testing.T, env ...string) *testJournald {
	t.Helper()
	// cat enters journald's namespace and writes through systemd-cat.
	for _, tool := range []string{"nsenter", "systemd-cat"} {
		testkit.RequireTool(t, tool)
	}
	j := testkit.StartJournaldEnv(t, env...)
	return &testJournald{Dir: j.Dir, Pid: j.Pid}
}

// cat writes lines with systemd-cat -t ident, inside journald's namespace.
func (j *testJournald) cat(t *testing.T, ident string, lines []string) {
	t.Helper()
	cmd := exec.Command("nsenter", "-t", strconv.Itoa(j.Pid), "-m", "systemd-cat", "-t", ident)
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("systemd-cat: %v: %s", err, out)
	}
}

// native sends one entry over journald's native protocol; unlike
// systemd-cat it can carry a multi-line MESSAGE.
func (j *testJournald) native(t *testing.T, ident, msg string) {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("SYSLOG_IDENTIFIER=" + ident + "\nPRIORITY=3\nMESSAGE\n")
	_ = binary.Write(&b, binary.LittleEndian, uint64(len(msg)))
	b.WriteString(msg + "\n")
	sock := fmt.Sprintf("/proc/%d/root/run/systemd/journal/socket", j.Pid)
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatalf("journald socket: %v", err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.Write(b.Bytes()); err != nil {
		t.Fatalf("sending to journald: %v", err)
	}
}

// waitFor polls the journal until the newest message matching match is
// want: journald stores what it receives asynchronously.
func (j *testJournald) waitFor(t *testing.T, match, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := exec.Command("journalctl", "-D", j.Dir, "--no-pager", "-q", "-a", "-o", "cat", "-n", "1", match).Output()
		if err == nil && strings.TrimSpace(string(out)) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("journal never showed %q for %s (last: %q, %v)", want, match, out, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kubeletLine is line i of the test's kubelet log.
func kubeletLine(i int, pad string) string {
	return fmt.Sprintf("I1121 09:00:00.%06d 2211 reconciler.go:%d] seq=%05d operationExecutor.UnmountVolume started for volume \"pvc-%05d\"%s", i, i%500, i, i, pad)
}

var seqRe = func(line string) (int, bool) {
	i := strings.Index(line, "seq=")
	if i < 0 || len(line) < i+9 {
		return 0, false
	}
	n, err := strconv.Atoi(line[i+4 : i+9])
	return n, err == nil
}

// A real journald, started by the test, holds kubelet lines (a bearer
// token and an rbd byte array among them), a multi-line entry and a kernel
// message. The bundle holds them in order, the token nowhere, and with a
// small cap only the newest lines, saying so.
func TestJournalFromJournald(t *testing.T) {
	j := startJournald(t)
	id, tokenID := nonce(t), nonce(t)
	token := "eyJhbGciOiJSUzI1NiIsImtpZCI6Im5vZGVzbmFwIn0.eyJzdWIiOiJzeXN0ZW06bm9kZSJ9." + tokenID
	rbd := `rbd: unmap failed: (16) Device or resource busy, rbd output: [114 98 100 58 32 115 121 115 102 115 32 119 114 105 116 101 32 102 97 105 108 101 100]`
	const n = 1500
	pad := " " + strings.Repeat("x", 60)
	var first, second []string
	for i := 0; i < n; i++ {
		l := kubeletLine(i, pad)
		switch i {
		case 300:
			l = kubeletLine(i, ` round_trippers.go:466] curl -v -XGET -H "Authorization: Bearer `+token+`" 'https://10.0.0.1:6443/api/v1/nodes/node-7'`)
		case 700:
			l = kubeletLine(i, " "+rbd)
		}
		if i < n/2 {
			first = append(first, l)
		} else {
			second = append(second, l)
		}
	}
	j.cat(t, "kubelet", first)
	j.waitFor(t, "SYSLOG_IDENTIFIER=kubelet", first[len(first)-1])
	multi := "multi-line " + id + " first\nsecond line of the entry\n\tthird, indented"
	j.native(t, "kubelet", multi)
	j.waitFor(t, "SYSLOG_IDENTIFIER=kubelet", multi)
	j.cat(t, "kubelet", second)
	j.waitFor(t, "SYSLOG_IDENTIFIER=kubelet", second[len(second)-1])
	// A kernel message: through /dev/kmsg, which journald reads, so it is
	// stored with _TRANSPORT=kernel like any kernel line. (It is also in
	// the host's ring buffer: a harmless marker.)
	kmark := "nodesnap journal test " + id + ": kernel transport check"
	if err := os.WriteFile("/dev/kmsg", []byte("<5>"+kmark+"\n"), 0); err != nil {
		t.Fatalf("writing to /dev/kmsg: %v", err)
	}
	j.waitFor(t, "_TRANSPORT=kernel", kmark)

	t.Run("all", func(t *testing.T) {
		journalFlags(t, "--journal-dir="+j.Dir, "--journal-json", "--journal-match=SYSLOG_IDENTIFIER=kubelet")
		c, _ := collectJournal(t, []string{"journal"}, collectors.Common{})
		r := journalResult(t, c)
		if r.Status != bundle.StatusOK {
			t.Fatalf("journal status %q (%s), notes %q", r.Status, r.Error, r.Notes)
		}
		log := string(c.Files["journal/kubelet.log"])
		lines := strings.Split(strings.TrimSuffix(log, "\n"), "\n")
		// Every line, in order; the multi-line entry between the halves
		// with its continuation lines indented under it.
		next, sawMulti := 0, false
		for k, l := range lines {
			if !strings.HasPrefix(l, "20") && !strings.HasPrefix(l, " ") {
				t.Fatalf("line %d is not short-iso-precise: %q", k, l)
			}
			if strings.Contains(l, "multi-line "+id+" first") {
				if next != n/2 || k+2 >= len(lines) || !strings.HasPrefix(lines[k+1], " ") || !strings.HasSuffix(lines[k+1], "second line of the entry") ||
					!strings.HasSuffix(lines[k+2], "\tthird, indented") {
					t.Fatalf("multi-line entry misplaced or split at line %d (after seq %d): %q", k, next, lines[k:min(k+3, len(lines))])
				}
				sawMulti = true
				continue
			}
			if s, ok := seqRe(l); ok {
				if s != next {
					t.Fatalf("line %d: seq %d, want %d: lines are missing or out of order", k, s, next)
				}
				next++
			}
		}
		if next != n || !sawMulti {
			t.Fatalf("kubelet.log has %d of %d lines (multi-line entry seen: %v)", next, n, sawMulti)
		}
		if !strings.Contains(log, rbd) {
			t.Errorf("the rbd byte array is not in kubelet.log verbatim")
		}
		if !strings.Contains(log, "Authorization: Bearer [REDACTED]") && !strings.Contains(log, "Authorization: [REDACTED]") {
			t.Errorf("the token line is not redacted as expected: %q", lines[300])
		}
		assertNowhere(t, c, token)
		assertNowhere(t, c, tokenID) // nor any part of its tail
		fe := fileEntry(c, "journal/kubelet.log")
		if fe == nil || fe.Truncated || len(fe.Redactions) == 0 {
			t.Errorf("kubelet.log manifest entry: %+v (want not truncated, with redactions)", fe)
		}
		if !strings.Contains(string(c.Files["journal/kernel.log"]), kmark) {
			t.Errorf("kernel.log lacks the kernel message %q", kmark)
		}
		if string(c.Files["journal/match-SYSLOG_IDENTIFIER-kubelet.log"]) != log {
			t.Errorf("--journal-match SYSLOG_IDENTIFIER=kubelet did not give the kubelet's lines")
		}
		// The JSON export: one entry per line, in order.
		next = 0
		for _, l := range strings.Split(strings.TrimSpace(string(c.Files["journal/kubelet.json"])), "\n") {
			var e struct {
				Message any `json:"MESSAGE"`
			}
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("kubelet.json line is not JSON: %v: %q", err, l)
			}
			if s, ok := e.Message.(string); ok {
				if q, ok := seqRe(s); ok {
					if q != next {
						t.Fatalf("kubelet.json: seq %d, want %d", q, next)
					}
					next++
				}
			}
		}
		if next != n {
			t.Errorf("kubelet.json has %d of %d lines", next, n)
		}
		s := journalSources(t, c)
		if s.Backend != "journald" || !s.Journald.Usable || s.Journald.Version == "" {
			t.Errorf("sources.json: backend %q journald %+v", s.Backend, s.Journald)
		}
		if k := sourceNamed(t, s, "journal", "kubelet"); k.Status != layout.JournalOK || k.Entries != n+1 || k.Truncated {
			t.Errorf("kubelet source: %+v", k)
		}
		if k := sourceNamed(t, s, "journal", "containerd"); k.Status != layout.JournalEmpty || k.File != "" {
			t.Errorf("containerd source (no such lines): %+v", k)
		}
		if _, ok := c.Files["journal/containerd.log"]; ok {
			t.Errorf("an empty source left a file")
		}
		bootID, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
		if b := strings.ReplaceAll(strings.TrimSpace(string(bootID)), "-", ""); !strings.Contains(string(c.Files["journal/boots.txt"]), b) {
			t.Errorf("boots.txt lacks this boot (%s): %q", b, c.Files["journal/boots.txt"])
		}
	})

	t.Run("corrupted file beside a good one", func(t *testing.T) {
		// journalctl reads the good file and skips the bad one: the lines
		// are all there and the collector is partial, saying why.
		dir := t.TempDir()
		good, _ := filepath.Glob(filepath.Join(j.Dir, "*", "system.journal"))
		if len(good) != 1 {
			t.Fatalf("journal files: %v", good)
		}
		b, err := os.ReadFile(good[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "system.journal"), b, 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "system@0005f00000000000-0000000000000000.journal~"), b[:len(b)/3], 0o640); err != nil {
			t.Fatal(err)
		}
		junk := make([]byte, 64<<10)
		_, _ = rand.Read(junk)
		if err := os.WriteFile(filepath.Join(dir, "user-1000.journal"), junk, 0o640); err != nil {
			t.Fatal(err)
		}
		journalFlags(t, "--journal-dir="+dir, "--journal-unit=kubelet", "--journal-kernel=false")
		c, _ := collectJournal(t, []string{"journal"}, collectors.Common{})
		r := journalResult(t, c)
		if r.Status != bundle.StatusPartial || !strings.Contains(r.Error, "could not read part of the journal") {
			t.Fatalf("journal status %q (%s), want partial naming the unreadable file", r.Status, r.Error)
		}
		got := 0
		for _, l := range strings.Split(string(c.Files["journal/kubelet.log"]), "\n") {
			if _, ok := seqRe(l); ok {
				got++
			}
		}
		if got < n {
			t.Errorf("kubelet.log has %d of %d lines", got, n)
		}
	})

	t.Run("cap keeps the newest", func(t *testing.T) {
		const capBytes = 64 << 10
		journalFlags(t, "--journal-dir="+j.Dir, "--journal-unit=kubelet", "--journal-kernel=false", "--journal-max-bytes=64KiB")
		c, _ := collectJournal(t, []string{"journal"}, collectors.Common{})
		r := journalResult(t, c)
		if r.Status != bundle.StatusOK {
			t.Fatalf("journal status %q (%s)", r.Status, r.Error)
		}
		log := c.Files["journal/kubelet.log"]
		if len(log) > capBytes || len(log) < capBytes/2 {
			t.Errorf("kubelet.log is %d bytes with a %d-byte cap", len(log), capBytes)
		}
		lines := strings.Split(strings.TrimSuffix(string(log), "\n"), "\n")
		firstSeq, ok := seqRe(lines[0])
		if !ok {
			t.Fatalf("first kept line is not a whole kubelet line: %q", lines[0])
		}
		for k, l := range lines {
			if s, _ := seqRe(l); s != firstSeq+k {
				t.Fatalf("kept line %d has seq %d, want %d", k, s, firstSeq+k)
			}
		}
		if last, _ := seqRe(lines[len(lines)-1]); last != n-1 || firstSeq == 0 {
			t.Errorf("kept seq %d..%d, want the newest lines ending at %d", firstSeq, last, n-1)
		}
		if fe := fileEntry(c, "journal/kubelet.log"); fe == nil || !fe.Truncated {
			t.Errorf("manifest does not mark kubelet.log truncated: %+v", fe)
		}
		if !strings.Contains(strings.Join(r.Notes, "\n"), "kubelet.log: kept the newest") {
			t.Errorf("no note about the cap: %q", r.Notes)
		}
		if k := sourceNamed(t, journalSources(t, c), "journal", "kubelet"); !k.Truncated || k.Entries != len(lines) || k.Oldest == "" || k.Newest == "" {
			t.Errorf("kubelet source: %+v", k)
		}
	})

	// A memory cap smaller than the source (and the byte cap far above
	// it): the collector keeps the newest lines up to the memory cap, and
	// is partial, saying how many older lines it left out and which flag
	// to raise; the file is marked truncated. Both readers.
	for _, reader := range []string{"native", "journalctl"} {
		t.Run("memory cap cuts with "+reader, func(t *testing.T) {
			base := []string{"--journal-dir=" + j.Dir, "--journal-unit=kubelet", "--journal-kernel=false", "--journal-reader=" + reader}
			journalFlags(t, base...)
			whole, _ := collectJournal(t, []string{"journal"}, collectors.Common{})
			if r := journalResult(t, whole); r.Status != bundle.StatusOK {
				t.Fatalf("uncut run: journal status %q (%s)", r.Status, r.Error)
			}
			all := string(whole.Files["journal/kubelet.log"])
			total := strings.Count(all, "\n")

			const memCap = 32 << 10
			journalFlags(t, append(base, "--journal-memory-cap=32KiB")...)
			c, _ := collectJournal(t, []string{"journal"}, collectors.Common{})
			r := journalResult(t, c)
			log := string(c.Files["journal/kubelet.log"])
			kept := strings.Count(log, "\n")
			want := fmt.Sprintf("journal: %d lines past the 32KiB memory cap were left out of kubelet.log", total-kept)
			if r.Status != bundle.StatusPartial || !strings.Contains(r.Error, want) || !strings.Contains(r.Error, "raise --journal-memory-cap") {
				t.Fatalf("journal status %q (%s), want partial saying %q", r.Status, r.Error, want)
			}
			if len(log) > memCap || len(log) < memCap/2 || kept >= total {
				t.Errorf("kubelet.log is %d bytes (%d of %d lines) with a %d-byte memory cap", len(log), kept, total, memCap)
			}
			if !strings.HasSuffix(all, log) {
				t.Errorf("the kept lines are not the newest lines of the uncut log")
			}
			if fe := fileEntry(c, "journal/kubelet.log"); fe == nil || !fe.Truncated {
				t.Errorf("manifest does not mark kubelet.log truncated: %+v", fe)
			}
			if k := sourceNamed(t, journalSources(t, c), "journal", "kubelet"); !k.Truncated || k.Status != layout.JournalOK {
				t.Errorf("kubelet source: %+v", k)
			}
		})
	}
}

// A journal directory holding only a corrupted file: journalctl skips it
// and says so; the collector reports an error naming it and falls back.
func TestJournalCorrupted(t *testing.T) {
	testkit.RequireRoot(t)
	testkit.RequireTool(t, "journalctl")
	dir := t.TempDir()
	junk := make([]byte, 256<<10)
	if _, err := rand.Read(junk); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "system.journal"), junk, 0o640); err != nil {
		t.Fatal(err)
	}
	for _, reader := range []string{journal.ReaderJournalctl, journal.ReaderNative} {
		t.Run(reader, func(t *testing.T) {
			journalFlags(t, "--journal-dir="+dir, "--journal-unit=kubelet", "--journal-reader="+reader)
			c, _ := collectJournal(t, []string{"journal"}, collectors.Common{})
			r := journalResult(t, c)
			if r.Status != bundle.StatusError || !strings.Contains(r.Error, "could not read the journal") || !strings.Contains(r.Error, "system.journal") {
				t.Fatalf("journal status %q error %q, want an error naming the unreadable file", r.Status, r.Error)
			}
			s := journalSources(t, c)
			if s.Backend != "files" || !strings.Contains(s.FallbackReason, "could not read the journal") {
				t.Errorf("sources.json: backend %q, fallback %q", s.Backend, s.FallbackReason)
			}
			k := sourceNamed(t, s, "journal", "kubelet")
			said := k.Stderr
			if reader == journal.ReaderNative {
				said = strings.Join(k.Problems, "\n")
			}
			if k.Status != layout.JournalEmpty || !strings.Contains(said, "system.journal") {
				t.Errorf("kubelet source: %+v", k)
			}
		})
	}
}

// A journalctl that hangs: the collector gives up on it at its own
// deadline, says so in the manifest with where it hung, keeps what it had
// read (the newest entries), runs it no more, falls back, and the other
// collectors of the run complete.
func TestJournalctlHangs(t *testing.T) {
	testkit.RequireRoot(t)
	testkit.RequireTool(t, "sh")
	testkit.RequireTool(t, "sleep")
	for _, tc := range []struct {
		name string
		// stub is the body of the fake journalctl after it logged its pid.
		stub  string
		runs  int
		error string
	}{
		{
			// A query that hangs after the first entries, as on a
			// journal file on a hung mount: the kept entries are the
			// newest, in time order.
			name: "query",
			stub: `case "$1" in --version) echo "systemd 252 (252.38-1~deb12u1)"; exit 0;; --list-boots) exit 0;; esac
echo "2026-11-21T09:05:02.000002+0000 node-7 kubelet[2211]: newest entry"
echo "2026-11-21T09:05:01.000001+0000 node-7 kubelet[2211]: older entry"
exec sleep 300`,
			runs:  2,
			error: "journalctl (kubelet) did not finish within 2s",
		},
		{
			name:  "version",
			stub:  "exec sleep 300",
			runs:  1,
			error: "journalctl --version did not answer within 2s",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := t.TempDir()
			pids := filepath.Join(t.TempDir(), "pids")
			stub := "#!/bin/sh\necho $$ >> " + pids + "\n" + tc.stub + "\n"
			if err := os.WriteFile(filepath.Join(bin, "journalctl"), []byte(stub), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
			jdir := t.TempDir()
			if err := os.WriteFile(filepath.Join(jdir, "system.journal"), []byte("LPKSHHRH not really a journal"), 0o644); err != nil {
				t.Fatal(err)
			}
			journalFlags(t, "--journal-dir="+jdir, "--journal-timeout=2s", "--journal-reader=journalctl")
			c, elapsed := collectJournal(t, []string{"journal", "host", "processes"}, collectors.Common{})
			r := journalResult(t, c)
			if r.Status != bundle.StatusTimeout {
				t.Fatalf("journal status %q (%s), want timeout", r.Status, r.Error)
			}
			if !strings.Contains(r.Error, tc.error) || !strings.Contains(r.Error, "collected instead") {
				t.Errorf("error does not say what hung and what was done instead: %q", r.Error)
			}
			if r.DurationSeconds > 30 || elapsed > 60*time.Second {
				t.Errorf("journal took %.1fs (run %s): it waited on the hung journalctl", r.DurationSeconds, elapsed)
			}
			found := false
			for _, h := range r.HungItems {
				if h.Op == "exec" && strings.HasPrefix(h.Target, "journalctl") && h.Evidence != nil && h.Evidence.PID > 0 {
					found = true
				}
			}
			if !found {
				t.Errorf("no hung exec of journalctl with evidence in the manifest: %+v", r.HungItems)
			}
			for _, name := range []string{"host", "processes"} {
				if o := c.Manifest.Collector(name); o == nil || o.Status != bundle.StatusOK {
					t.Errorf("%s did not complete: %+v", name, o)
				}
			}
			s := journalSources(t, c)
			if s.Backend != "files" || !strings.Contains(s.FallbackReason, "journalctl hung") {
				t.Errorf("sources.json: backend %q, fallback reason %q", s.Backend, s.FallbackReason)
			}
			if tc.name == "query" {
				k := sourceNamed(t, s, "journal", "kubelet")
				if k.Status != layout.JournalTimeout || k.Entries != 2 || !k.Truncated {
					t.Errorf("kubelet source: %+v", k)
				}
				want := "2026-11-21T09:05:01.000001+0000 node-7 kubelet[2211]: older entry\n2026-11-21T09:05:02.000002+0000 node-7 kubelet[2211]: newest entry\n"
				if got := string(c.Files["journal/kubelet.log"]); got != want {
					t.Errorf("kubelet.log: %q, want %q", got, want)
				}
				if fe := fileEntry(c, "journal/kubelet.log"); fe == nil || !fe.Truncated {
					t.Errorf("kubelet.log not marked truncated: %+v", fe)
				}
				if k := sourceNamed(t, s, "journal", "containerd"); k.Status != layout.JournalSkipped {
					t.Errorf("containerd after the hang: %+v", k)
				}
			}
			// The stub, and the sleep it became, were killed (by process
			// group), and journalctl was not run again after it hung.
			b, err := os.ReadFile(pids)
			if err != nil {
				t.Fatalf("the stub journalctl never ran: %v", err)
			}
			if got := strings.Fields(string(b)); len(got) != tc.runs {
				t.Errorf("journalctl was run %d times, want %d", len(got), tc.runs)
			}
			for _, p := range strings.Fields(string(b)) {
				pid, _ := strconv.Atoi(p)
				comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
				if err == nil && strings.TrimSpace(string(comm)) == "sleep" {
					t.Errorf("the hung journalctl (pid %d) is still running", pid)
				}
			}
		})
	}
}

// No journald at all (no journalctl, no journal files, no socket): the
// /var/log files under --root and the kernel ring buffer are used, tails
// only, and the manifest says which.
func TestJournalWithoutJournald(t *testing.T) {
	testkit.RequireRoot(t) // the kernel ring buffer
	root := t.TempDir()
	logs := filepath.Join(root, "var/log")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"messages", "kern.log"} {
		b, err := os.ReadFile(filepath.Join("testdata/journal", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(logs, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// syslog's daemon facility: the storage daemons' lines.
	const daemonLine = "Nov 21 03:14:07 node-7 iscsid: connect to 10.0.0.9:3260 failed (No route to host)\n"
	if err := os.WriteFile(filepath.Join(logs, "daemon.log"), []byte(daemonLine), 0o644); err != nil {
		t.Fatal(err)
	}
	// A kubelet.log far over the cap: only its newest lines are kept.
	var big bytes.Buffer
	const n = 3000
	for i := 0; i < n; i++ {
		big.WriteString(kubeletLine(i, " "+strings.Repeat("y", 40)) + "\n")
	}
	if err := os.WriteFile(filepath.Join(logs, "kubelet.log"), big.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// RKE2's kubelet logs to a file of its own, not to the journal.
	rke2 := filepath.Join(root, "var/lib/rancher/rke2/agent/logs")
	if err := os.MkdirAll(rke2, 0o755); err != nil {
		t.Fatal(err)
	}
	rke2Line := kubeletLine(7, " rke2") + "\n"
	if err := os.WriteFile(filepath.Join(rke2, "kubelet.log"), []byte(rke2Line), 0o644); err != nil {
		t.Fatal(err)
	}
	// k3s's own containerd logs to a file of its own too.
	k3sCtrd := filepath.Join(root, "var/lib/rancher/k3s/agent/containerd")
	if err := os.MkdirAll(k3sCtrd, 0o755); err != nil {
		t.Fatal(err)
	}
	const k3sCtrdLine = `time="2026-11-21T09:00:00Z" level=error msg="failed to remove rootfs" error="unmount rootfs: device or resource busy"` + "\n"
	if err := os.WriteFile(filepath.Join(k3sCtrd, "containerd.log"), []byte(k3sCtrdLine), 0o644); err != nil {
		t.Fatal(err)
	}
	const secret = "fixtureSignatureMessages01"

	check := func(t *testing.T, c *bundle.Contents, kernelKind string) {
		t.Helper()
		r := journalResult(t, c)
		if r.Status != bundle.StatusOK {
			t.Fatalf("journal status %q (%s)", r.Status, r.Error)
		}
		notes := strings.Join(r.Notes, "\n")
		if !strings.Contains(notes, "journald is not usable") || !strings.Contains(notes, "/var/log/messages") {
			t.Errorf("notes do not say journald was absent and what was used: %q", notes)
		}
		s := journalSources(t, c)
		if s.Backend != "files" || s.Journald.Usable || !strings.Contains(s.FallbackReason, "no journal files") {
			t.Errorf("sources.json: backend %q fallback %q journald %+v", s.Backend, s.FallbackReason, s.Journald)
		}
		for name, want := range map[string]string{"messages": layout.JournalOK, "kern.log": layout.JournalOK,
			"kubelet.log": layout.JournalOK, "daemon.log": layout.JournalOK, "syslog": layout.JournalMissing, "rke2-kubelet.log": layout.JournalOK,
			"k3s-containerd.log": layout.JournalOK, "rke2-containerd.log": layout.JournalMissing} {
			if got := sourceNamed(t, s, "file", name); got.Status != want {
				t.Errorf("%s: status %q, want %q (%+v)", name, got.Status, want, got)
			}
		}
		msgs := string(c.Files["journal/files/messages"])
		fixture, _ := os.ReadFile("testdata/journal/messages")
		if want := strings.Replace(string(fixture), "Bearer eyJhbGciOiJSUzI1NiIsImtpZCI6ImZpeHR1cmUifQ.eyJzdWIiOiJzeXN0ZW06bm9kZTpub2RlLTcifQ."+secret, "Bearer [REDACTED]", 1); msgs != want {
			t.Errorf("files/messages:\n%s\nwant:\n%s", msgs, want)
		}
		if got := string(c.Files["journal/files/k3s-containerd.log"]); got != k3sCtrdLine {
			t.Errorf("files/k3s-containerd.log: %q, want %q", got, k3sCtrdLine)
		}
		if got := string(c.Files["journal/files/rke2-kubelet.log"]); got != rke2Line {
			t.Errorf("files/rke2-kubelet.log: %q, want %q", got, rke2Line)
		}
		if got := string(c.Files["journal/files/daemon.log"]); got != daemonLine {
			t.Errorf("files/daemon.log: %q, want %q", got, daemonLine)
		}
		if !strings.Contains(string(c.Files["journal/files/kern.log"]), "INFO: task umount:31337 blocked for more than 120 seconds.") {
			t.Errorf("files/kern.log lacks the hung task line")
		}
		assertNowhere(t, c, secret)
		// The kubelet.log tail: whole lines, contiguous, ending with the
		// file's last line; the manifest says it was cut.
		kl := strings.Split(strings.TrimSuffix(string(c.Files["journal/files/kubelet.log"]), "\n"), "\n")
		firstSeq, ok := seqRe(kl[0])
		if !ok || !strings.HasPrefix(kl[0], "I1121 ") {
			t.Fatalf("first kept kubelet.log line is partial: %q", kl[0])
		}
		for k, l := range kl {
			if s, _ := seqRe(l); s != firstSeq+k {
				t.Fatalf("kubelet.log line %d: seq %d, want %d", k, s, firstSeq+k)
			}
		}
		if last, _ := seqRe(kl[len(kl)-1]); last != n-1 || firstSeq == 0 {
			t.Errorf("kubelet.log kept seq %d..%d, want the newest ending at %d", firstSeq, last, n-1)
		}
		if fe := fileEntry(c, "journal/files/kubelet.log"); fe == nil || !fe.Truncated || fe.Size > 64<<10 {
			t.Errorf("files/kubelet.log manifest entry: %+v", fe)
		}
		if fe := fileEntry(c, "journal/files/messages"); fe == nil || fe.Truncated {
			t.Errorf("files/messages manifest entry: %+v", fe)
		}
		k := sourceNamed(t, s, kernelKind, kernelKind)
		if k.Status != layout.JournalOK || k.Entries == 0 || len(c.Files["journal/"+kernelKind+".log"]) == 0 {
			t.Errorf("kernel ring buffer via %s: %+v", kernelKind, k)
		}
	}

	t.Run("dmesg", func(t *testing.T) {
		dmesg, err := exec.LookPath("dmesg")
		if err != nil {
			testkit.RequireTool(t, "dmesg")
		}
		bin := t.TempDir()
		if err := os.Symlink(dmesg, filepath.Join(bin, "dmesg")); err != nil {
			t.Fatal(err)
		}
		t.Setenv("PATH", bin)
		journalFlags(t, "--journal-max-bytes=64KiB")
		c, _ := collectJournal(t, []string{"journal"}, collectors.Common{Root: root})
		check(t, c, "dmesg")
	})
	t.Run("kmsg", func(t *testing.T) {
		// Neither journalctl nor dmesg: /dev/kmsg is read directly.
		t.Setenv("PATH", t.TempDir())
		journalFlags(t, "--journal-max-bytes=64KiB")
		c, _ := collectJournal(t, []string{"journal"}, collectors.Common{Root: root})
		check(t, c, "kmsg")
		for _, l := range strings.Split(strings.TrimSpace(string(c.Files["journal/kmsg.log"])), "\n") {
			if !strings.Contains(l, " kernel: [") {
				t.Fatalf("kmsg.log line not rendered: %q", l)
			}
		}
	})
}
