package journal_test

import (
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/journal"
	"github.com/nodesnap/nodesnap/internal/journalfile"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// snapshotJournal copies a journald's files (journald keeps writing; both
// readers must see the same bytes) into a new directory, machine-id
// subdirectory included.
func snapshotJournal(t *testing.T, dir string) string {
	t.Helper()
	snap := t.TempDir()
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.journal"))
	if len(files) == 0 {
		t.Fatalf("no journal files in %s", dir)
	}
	for _, f := range files {
		dst := filepath.Join(snap, filepath.Base(filepath.Dir(f)), filepath.Base(f))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		in, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(dst)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		_ = in.Close()
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return snap
}

// journalctlText is what journalctl prints of dir for matches, as the
// collector runs it.
func journalctlText(t *testing.T, dir string, matches []string) string {
	t.Helper()
	args := append([]string{"--no-pager", "--quiet", "--all", "--utc", "--output=short-iso-precise", "--directory=" + dir}, matches...)
	out, err := exec.Command("journalctl", args...).Output()
	if err != nil {
		t.Fatalf("journalctl %v: %v", args, err)
	}
	return string(out)
}

// journalHeader reads the header flags of the first journal file in dir.
func journalHeader(t *testing.T, dir string) journalfile.Header {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.journal"))
	f, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	st, _ := f.Stat()
	jf, err := journalfile.Open(f, st.Size())
	if err != nil {
		t.Fatalf("%s: %v", files[0], err)
	}
	return jf.Header
}

// A real journald (started by the test, in its own mount namespace) in
// both file layouts it writes: the native reader prints, line for line,
// what journalctl prints of the same files, for the collector's own
// queries, read in small chunks through the cursors.
func TestJournalNativeMatchesJournalctl(t *testing.T) {
	testkit.RequireTool(t, "logger")
	for _, tc := range []struct {
		name string
		env  []string
		// compact and keyed: the layout that journald must have written.
		compact, keyed bool
	}{
		// systemd 252's defaults: compact, keyed hash, zstd.
		{name: "default", compact: true, keyed: true},
		{name: "regular", env: []string{"SYSTEMD_JOURNAL_COMPACT=0", "SYSTEMD_JOURNAL_KEYED_HASH=0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := startJournaldEnv(t, tc.env...)
			id := nonce(t)
			var lines []string
			for i := 0; i < 400; i++ {
				lines = append(lines, kubeletLine(i, " "+id))
			}
			j.cat(t, "kubelet", lines)
			j.native(t, "kubelet", "multi-line "+id+"\nsecond\n\tthird\n\n")
			// Above journald's compression threshold (512 bytes).
			big := "big " + id + " " + strings.Repeat("0123456789abcdef", 512)
			j.native(t, "kubelet", big)
			// Through syslog: the entry carries the sender's own time
			// (_SOURCE_REALTIME_TIMESTAMP), which journalctl prints.
			if out, err := exec.Command("nsenter", "-t", strconv.Itoa(j.Pid), "-m", "logger", "-u", "/run/systemd/journal/dev-log", "-t", "containerd", "syslog "+id).CombinedOutput(); err != nil {
				t.Fatalf("logger: %v: %s", err, out)
			}
			// journald serves its syslog socket before its native one:
			// wait, so that the entries are stored in the order sent.
			j.waitFor(t, "SYSLOG_IDENTIFIER=containerd", "syslog "+id)
			j.native(t, "containerd", "")
			j.native(t, "containerd", "end "+id)
			j.waitFor(t, "SYSLOG_IDENTIFIER=containerd", "end "+id)
			snap := snapshotJournal(t, j.Dir)
			h := journalHeader(t, snap)
			t.Logf("journald wrote incompatible flags %#x (compact %v, keyed hash %v, zstd %v)", h.Incompatible, h.Compact(), h.KeyedHash(), h.Incompatible&journalfile.IncompatibleCompressedZSTD != 0)
			if h.Compact() != tc.compact || h.KeyedHash() != tc.keyed {
				t.Fatalf("journald wrote flags %#x, want compact %v keyed %v", h.Incompatible, tc.compact, tc.keyed)
			}
			kubelet := []string{"_SYSTEMD_UNIT=kubelet.service", "+", "_PID=1", "UNIT=kubelet.service",
				"+", "MESSAGE_ID=fc2e22bc6ee647b6b90729ab34a250b1", "COREDUMP_UNIT=kubelet.service", "+", "SYSLOG_IDENTIFIER=kubelet"}
			for _, m := range [][]string{kubelet, {"_TRANSPORT=kernel"}, {"SYSLOG_IDENTIFIER=containerd"}, nil} {
				want := journalctlText(t, snap, m)
				for _, chunk := range []int{1, 4 << 10, 4 << 20} {
					got, calls, problems, err := journal.JournalNativeReadForTest([]string{snap}, m, 0, chunk)
					if err != nil {
						t.Fatalf("%v: %v", m, err)
					}
					if len(problems) > 0 {
						t.Errorf("%v: problems %q", m, problems)
					}
					if got != want {
						gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
						for k := 0; k < min(len(gl), len(wl)); k++ {
							if gl[k] != wl[k] {
								t.Fatalf("%v chunk %d: line %d differs:\nnative:     %q\njournalctl: %q\n(%d and %d lines, %d calls)", m, chunk, k, gl[k], wl[k], len(gl), len(wl), calls)
							}
						}
						t.Fatalf("%v chunk %d: native has %d lines, journalctl %d (%d calls)", m, chunk, len(gl), len(wl), calls)
					}
					if chunk == 1 && strings.Count(want, "\n") > 2 && calls < 3 {
						t.Errorf("%v: a 1-byte chunk took %d calls: the cursor did not resume", m, calls)
					}
				}
				if len(m) > 0 && m[0] == "_SYSTEMD_UNIT=kubelet.service" {
					for _, must := range []string{big, "\tthird", "seq=00399", "seq=00000"} {
						if !strings.Contains(want, must[:min(len(must), 200)]) {
							t.Errorf("kubelet text lacks %.40q", must)
						}
					}
				}
			}
			// --since: only what is newer.
			all := journalctlText(t, snap, []string{"SYSLOG_IDENTIFIER=containerd"})
			got, _, _, err := journal.JournalNativeReadForTest([]string{snap}, []string{"SYSLOG_IDENTIFIER=containerd"}, 1<<55-1, 1<<20)
			if err != nil || got != "" || all == "" {
				t.Errorf("since in the future: %q, %v (all: %q)", got, err, all)
			}
		})
	}
}

// The collector with the native reader (its default) writes what it
// writes with journalctl, file for file, and says which reader it used; a
// node whose journal is there but holds a damaged file beside the good one
// is partial, naming it.
func TestJournalNativeCollector(t *testing.T) {
	j := startJournald(t)
	id := nonce(t)
	var lines []string
	for i := 0; i < 600; i++ {
		lines = append(lines, kubeletLine(i, " "+id))
	}
	j.cat(t, "kubelet", lines)
	j.waitFor(t, "SYSLOG_IDENTIFIER=kubelet", lines[len(lines)-1])
	snap := snapshotJournal(t, j.Dir)

	collect := func(t *testing.T, dir string, args ...string) (*bundle.Contents, *bundle.CollectorResult, layout.JournalSources) {
		journalFlags(t, append([]string{"--journal-dir=" + dir, "--journal-unit=kubelet,containerd"}, args...)...)
		c, _ := collectJournal(t, []string{"journal"}, collectors.Common{})
		return c, journalResult(t, c), journalSources(t, c)
	}
	nc, nr, ns := collect(t, snap)
	if nr.Status != bundle.StatusOK {
		t.Fatalf("native: status %q (%s) notes %q", nr.Status, nr.Error, nr.Notes)
	}
	if ns.Journald.Reader != journal.ReaderNative || ns.Backend != "journald" {
		t.Errorf("native: sources.json reader %q backend %q", ns.Journald.Reader, ns.Backend)
	}
	jc, jr, js := collect(t, snap, "--journal-reader=journalctl")
	if jr.Status != bundle.StatusOK || js.Journald.Reader != journal.ReaderJournalctl {
		t.Fatalf("journalctl: status %q (%s), reader %q", jr.Status, jr.Error, js.Journald.Reader)
	}
	for _, f := range []string{"journal/kubelet.log", "journal/kernel.log"} {
		if string(nc.Files[f]) != string(jc.Files[f]) {
			t.Errorf("%s differs between the readers:\nnative %d bytes, journalctl %d bytes", f, len(nc.Files[f]), len(jc.Files[f]))
		}
	}
	if n := strings.Count(string(nc.Files["journal/kubelet.log"]), id); n != len(lines) {
		t.Errorf("native kubelet.log holds %d of %d lines", n, len(lines))
	}
	if k := sourceNamed(t, ns, "journal", "kubelet"); k.Reader != journal.ReaderNative || k.Status != layout.JournalOK || k.Entries != len(lines) {
		t.Errorf("native kubelet source: %+v", k)
	}

	t.Run("no journalctl in the image", func(t *testing.T) {
		// As in nodesnap's container image: the native reader needs no
		// program.
		t.Setenv("PATH", t.TempDir())
		c, r, s := collect(t, snap, "--journal-kernel=false")
		if r.Status != bundle.StatusOK || s.Journald.Reader != journal.ReaderNative {
			t.Fatalf("status %q (%s), reader %q", r.Status, r.Error, s.Journald.Reader)
		}
		if n := strings.Count(string(c.Files["journal/kubelet.log"]), id); n != len(lines) {
			t.Errorf("kubelet.log holds %d of %d lines", n, len(lines))
		}
		// journalctl asked for and missing, the journal right there:
		// partial, not ok with the kubelet's lines lost.
		_, r, s = collect(t, snap, "--journal-kernel=false", "--journal-reader=journalctl")
		if r.Status != bundle.StatusPartial || !strings.Contains(r.Error, "the node's journal files (1) could not be read") || !strings.Contains(r.Error, "journalctl is not installed") {
			t.Errorf("journalctl missing: status %q (%s), sources %+v", r.Status, r.Error, s.Journald)
		}
	})

	t.Run("cap keeps the newest", func(t *testing.T) {
		c, r, s := collect(t, snap, "--journal-max-bytes=16KiB", "--journal-kernel=false")
		log := string(c.Files["journal/kubelet.log"])
		kl := strings.Split(strings.TrimSuffix(log, "\n"), "\n")
		first, ok := seqRe(kl[0])
		last, _ := seqRe(kl[len(kl)-1])
		if r.Status != bundle.StatusOK || !ok || first == 0 || last != len(lines)-1 || len(log) > 16<<10 {
			t.Fatalf("status %q; kept seq %d..%d in %d bytes, want the newest ending at %d within 16 KiB", r.Status, first, last, len(log), len(lines)-1)
		}
		for k, l := range kl {
			if q, _ := seqRe(l); q != first+k {
				t.Fatalf("line %d: seq %d, want %d", k, q, first+k)
			}
		}
		if k := sourceNamed(t, s, "journal", "kubelet"); !k.Truncated {
			t.Errorf("kubelet source not marked truncated: %+v", k)
		}
	})

	t.Run("damaged file beside a good one", func(t *testing.T) {
		dir := t.TempDir()
		good, _ := filepath.Glob(filepath.Join(snap, "*", "system.journal"))
		b, err := os.ReadFile(good[0])
		if err != nil {
			t.Fatal(err)
		}
		mid := filepath.Join(dir, hex.EncodeToString([]byte("0123456789abcdef")))
		if err := os.MkdirAll(mid, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mid, "system.journal"), b, 0o640); err != nil {
			t.Fatal(err)
		}
		junk := append([]byte("LPKSHHRH"), make([]byte, 4096)...)
		if err := os.WriteFile(filepath.Join(mid, "user-1000.journal"), junk, 0o640); err != nil {
			t.Fatal(err)
		}
		c, r, _ := collect(t, dir, "--journal-kernel=false")
		if r.Status != bundle.StatusPartial || !strings.Contains(r.Error, "user-1000.journal") {
			t.Fatalf("status %q (%s), want partial naming the damaged file", r.Status, r.Error)
		}
		if n := strings.Count(string(c.Files["journal/kubelet.log"]), id); n != len(lines) {
			t.Errorf("kubelet.log holds %d of %d lines", n, len(lines))
		}
	})
}
