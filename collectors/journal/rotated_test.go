package journal_test

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/test/skip"
)

// rotatedLogs writes files under root/var/log: name → content, gzipped
// when the name ends in .gz.
func rotatedLogs(t *testing.T, root string, files map[string][]byte) {
	t.Helper()
	logs := filepath.Join(root, "var/log")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if strings.HasSuffix(name, ".gz") && !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			_, _ = zw.Write(b)
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
			b = z.Bytes()
		}
		if err := os.WriteFile(filepath.Join(logs, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// kubeletLines is lines from..to-1 of the test's kubelet log.
func kubeletLines(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		b.WriteString(kubeletLine(i, "") + "\n")
	}
	return b.String()
}

// tailLines is what a budget of n bytes keeps of s: its last n bytes,
// without the partial first line.
func tailLines(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	return s[strings.IndexByte(s, '\n')+1:]
}

// rotatedSources is the file sources of one log, in sources.json order.
func rotatedSources(s layout.JournalSources, host string) []layout.JournalSource {
	var out []layout.JournalSource
	for _, src := range s.Sources {
		if src.Kind == "file" && (src.Path == host || src.RotatedFrom == host) {
			out = append(out, src)
		}
	}
	return out
}

// No journald, and logrotate has just run: kubelet.log holds two lines,
// the evidence sits in kubelet.log.1 and kubelet.log.2.gz. The parts are
// kept newest first, each in its own file, until the budget is spent; the
// part that does not fit is cut to its newest whole lines and the older
// one is left out; the bearer token in the compressed part is redacted.
func TestJournalRotatedParts(t *testing.T) {
	root := t.TempDir()
	const secret = "rotatedSignatureGz0001"
	bearer := "E1121 09:00:01.000000 2211 round_trippers.go:466] curl -v -XGET -H \"Authorization: Bearer eyJhbGciOiJSUzI1NiIsImtpZCI6ImZpeHR1cmUifQ.eyJzdWIiOiJzeXN0ZW06bm9kZTpub2RlLTcifQ." + secret + "\" 'https://10.0.0.1:6443/api/v1/nodes/node-7'\n"
	teardown := "E1121 09:00:02.000000 2211 nestedpendingoperations.go:348] UnmountVolume.TearDown failed for volume \"pvc-00001\": unmount failed: device or resource busy\n"
	cur := kubeletLines(330, 332)
	p1 := kubeletLines(290, 330)
	p2 := kubeletLines(250, 270) + bearer + teardown + kubeletLines(270, 290)
	p3 := kubeletLines(50, 250)
	p4 := kubeletLines(0, 50)
	rotatedLogs(t, root, map[string][]byte{
		"kubelet.log":       []byte(cur),
		"kubelet.log.1":     []byte(p1),
		"kubelet.log.2.gz":  []byte(p2),
		"kubelet.log.3.gz":  []byte(p3),
		"kubelet.log.4":     []byte(p4),
		"kubelet.log.5.xz":  []byte("not read"),
		"kubelet.log.1.bak": []byte("not read"),
	})
	t.Setenv("PATH", t.TempDir()) // no journalctl
	const budget = 16 << 10
	journalFlags(t, "--journal-max-bytes=16KiB", "--journal-kernel=false")
	c, _ := collectJournal(t, []string{"journal"}, collectors.Common{Root: root})
	r := journalResult(t, c)
	if r.Status != bundle.StatusOK {
		t.Fatalf("journal status %q (%s)", r.Status, r.Error)
	}
	s := journalSources(t, c)
	got := rotatedSources(s, "/var/log/kubelet.log")
	type want struct {
		name, file, path, status, compression string
		rotation                              int
		truncated                             bool
		content                               string
	}
	left := budget - len(cur) - len(p1) - len(p2)
	wants := []want{
		{"kubelet.log", "files/kubelet.log", "/var/log/kubelet.log", layout.JournalOK, "", 0, false, cur},
		{"kubelet.log.1", "files/kubelet.log.1", "/var/log/kubelet.log.1", layout.JournalOK, "", 1, false, p1},
		{"kubelet.log.2.gz", "files/kubelet.log.2", "/var/log/kubelet.log.2.gz", layout.JournalOK, "gzip", 2, false, p2},
		{"kubelet.log.3.gz", "files/kubelet.log.3", "/var/log/kubelet.log.3.gz", layout.JournalOK, "gzip", 3, true, tailLines(p3, left)},
		{"kubelet.log.4", "", "/var/log/kubelet.log.4", layout.JournalSkipped, "", 4, false, ""},
	}
	if len(got) != len(wants) {
		t.Fatalf("kubelet.log sources: %+v", got)
	}
	total := int64(0)
	for i, w := range wants {
		g := got[i]
		total += g.Bytes
		if g.Name != w.name || g.File != w.file || g.Path != w.path || g.Status != w.status || g.Compression != w.compression ||
			g.Rotation != w.rotation || g.Truncated != w.truncated || g.Bytes != int64(len(w.content)) {
			t.Errorf("part %d: %+v\nwant %+v", i, g, w)
		}
		if i > 0 && g.RotatedFrom != "/var/log/kubelet.log" {
			t.Errorf("part %d: rotated_from %q", i, g.RotatedFrom)
		}
		if w.file == "" {
			continue
		}
		content := w.content
		if i == 2 {
			content = strings.Replace(content, "Bearer eyJhbGciOiJSUzI1NiIsImtpZCI6ImZpeHR1cmUifQ.eyJzdWIiOiJzeXN0ZW06bm9kZTpub2RlLTcifQ."+secret, "Bearer [REDACTED]", 1)
		}
		if b := string(c.Files["journal/"+w.file]); b != content {
			t.Errorf("%s:\n%s\nwant:\n%s", w.file, b, content)
		}
		if fe := fileEntry(c, "journal/"+w.file); fe == nil || fe.Truncated != w.truncated {
			t.Errorf("%s manifest entry: %+v", w.file, fe)
		}
	}
	if total > budget {
		t.Errorf("kept %d bytes of kubelet.log and its parts, over the %d budget", total, budget)
	}
	if g := got[2]; g.InflatedBytes != int64(len(p2)) || g.InflateCapped || g.SourceBytes == 0 || g.Entries != 42 {
		t.Errorf("kubelet.log.2.gz: %+v", g)
	}
	if !strings.Contains(string(c.Files["journal/files/kubelet.log.2"]), "UnmountVolume.TearDown failed") {
		t.Error("the TearDown failure of the rotated part is not in the bundle")
	}
	assertNowhere(t, c, secret)
	for _, f := range []string{"journal/files/kubelet.log.5", "journal/files/kubelet.log.4", "journal/files/kubelet.log.1.bak"} {
		if _, ok := c.Files[f]; ok {
			t.Errorf("%s is in the bundle", f)
		}
	}
	notes := strings.Join(r.Notes, "\n")
	for _, n := range []string{"also kept rotated parts kubelet.log.1, kubelet.log.2.gz, kubelet.log.3.gz", "1 older rotated parts were left out"} {
		if !strings.Contains(notes, n) {
			t.Errorf("notes lack %q: %s", n, notes)
		}
	}
}

// Date-suffixed parts are kept latest date first; a damaged .gz gives an
// error entry for that part, and the parts older than it are still kept.
func TestJournalRotatedDatedAndCorrupt(t *testing.T) {
	root := t.TempDir()
	cur := kubeletLines(300, 301)
	d20 := kubeletLines(200, 300)
	d18 := kubeletLines(0, 100)
	var bad bytes.Buffer
	zw := gzip.NewWriter(&bad)
	_, _ = zw.Write([]byte(kubeletLines(100, 200)))
	_ = zw.Close()
	damaged := append([]byte(nil), bad.Bytes()[:bad.Len()/2]...)
	damaged = append(damaged, bytes.Repeat([]byte{0xff}, 64)...)
	rotatedLogs(t, root, map[string][]byte{
		"kubelet.log":             []byte(cur),
		"kubelet.log-20261120":    []byte(d20),
		"kubelet.log-20261119.gz": damaged,
		"kubelet.log-20261118.gz": []byte(d18),
		"kubelet.log-20261117.gz": {0x1f, 0x8b, 'n', 'o', 't'},
		"messages-20261120":       []byte("Nov 20 00:00:00 node-7 systemd[1]: Started.\n"),
	})
	t.Setenv("PATH", t.TempDir())
	journalFlags(t, "--journal-max-bytes=1MiB", "--journal-kernel=false")
	c, _ := collectJournal(t, []string{"journal"}, collectors.Common{Root: root})
	s := journalSources(t, c)
	got := rotatedSources(s, "/var/log/kubelet.log")
	var names []string
	for _, g := range got {
		names = append(names, g.Name+":"+g.Status)
	}
	if want := "kubelet.log:ok kubelet.log-20261120:ok kubelet.log-20261119.gz:error kubelet.log-20261118.gz:ok kubelet.log-20261117.gz:error"; strings.Join(names, " ") != want {
		t.Fatalf("kubelet.log parts: %s\nwant %s\n%+v", strings.Join(names, " "), want, got)
	}
	if string(c.Files["journal/files/kubelet.log-20261120"]) != d20 || string(c.Files["journal/files/kubelet.log-20261118"]) != d18 {
		t.Errorf("dated parts not kept whole")
	}
	// Nothing of a damaged part is kept: deflate emits garbage copied
	// from earlier lines before it notices the damage.
	if g := got[2]; !strings.Contains(g.Error, "is damaged") || g.Rotation != 2 || g.File != "" || g.Bytes != 0 || g.InflatedBytes == 0 {
		t.Errorf("damaged part: %+v", g)
	}
	if _, ok := c.Files["journal/files/kubelet.log-20261119"]; ok {
		t.Error("the damaged part's bytes are in the bundle")
	}
	if g := got[4]; !strings.Contains(g.Error, "not a readable gzip file") || g.File != "" {
		t.Errorf("not gzip: %+v", g)
	}
	// messages has no current file: its rotated part is read anyway.
	m := rotatedSources(s, "/var/log/messages")
	if len(m) != 2 || m[0].Status != layout.JournalMissing || m[1].Status != layout.JournalOK || m[1].Rotation != 1 {
		t.Errorf("messages parts: %+v", m)
	}
}

// A gzip bomb among the rotated parts is stopped at the decompression cap,
// says so, keeps no NUL bytes, and the parts after it are still read.
func TestJournalRotatedGzipBomb(t *testing.T) {
	skip.Short(t, "decompresses 256 MiB")
	root := t.TempDir()
	var bomb bytes.Buffer
	zeros := make([]byte, 10<<20)
	for range 30 {
		zw := gzip.NewWriter(&bomb)
		_, _ = zw.Write(zeros)
		_ = zw.Close()
	}
	p2 := kubeletLines(0, 10)
	rotatedLogs(t, root, map[string][]byte{
		"kubelet.log":      []byte(kubeletLines(20, 21)),
		"kubelet.log.1.gz": bomb.Bytes(),
		"kubelet.log.2.gz": []byte(p2),
	})
	t.Setenv("PATH", t.TempDir())
	journalFlags(t, "--journal-max-bytes=1MiB", "--journal-kernel=false")
	// A generous probe deadline: the cap, not the clock, must stop it.
	c, _ := collectJournal(t, []string{"journal"}, collectors.Common{Root: root, ProbeTimeout: 30 * time.Second})
	got := rotatedSources(journalSources(t, c), "/var/log/kubelet.log")
	if len(got) != 3 {
		t.Fatalf("parts: %+v", got)
	}
	b := got[1]
	if !b.InflateCapped || b.InflatedBytes != 256<<20 || !b.Truncated || b.Bytes != 0 || b.File != "" ||
		!strings.Contains(b.Error, "decompression stopped at the 256.0 MiB cap") || b.SourceBytes != int64(bomb.Len()) {
		t.Errorf("bomb part: %+v", b)
	}
	if got[2].Status != layout.JournalOK || string(c.Files["journal/files/kubelet.log.2"]) != p2 {
		t.Errorf("part after the bomb: %+v", got[2])
	}
	if notes := strings.Join(journalResult(t, c).Notes, "\n"); !strings.Contains(notes, "/var/log/kubelet.log.1.gz: decompression stopped at the 256.0 MiB cap") {
		t.Errorf("notes do not tell of the cap: %s", notes)
	}
}
